import path from 'node:path';
import { shardMigrations } from '../../migrations/shard/index.js';
import { unavailable } from '../errors/domain.js';
import { systemClock } from '../clock.js';
import type { ControlPlane } from '../control/controlPlane.js';
import type { AssetPlacement } from '../locations/placement.js';
import { checkpointInBackground } from '../storage/checkpointer.js';
import { migrate, openDatabase, type Db } from '../storage/sqlite.js';
import { commandNamed } from './commands.js';
import type { ShardGenerations } from './generations.js';
import { encodeError, type CommandAnswer, type CommandMessage } from './mailbox.js';

export type IdEntity = 'asset' | 'location' | 'tag' | 'history';

/** What a shard's commands ask of other features, handed to the actor by whoever builds it. */
export interface WriterPorts {
  placement: AssetPlacement;
}

export const shardFile = (dataDir: string, index: number) => path.join(dataDir, 'shards', `shard-${index}.sqlite`);

/**
 * The state of a shard actor, owned by the thread that runs it: the only writer connection of the
 * shard's SQLite file, the id blocks it draws from, and the writer-side state of features (prepared
 * statements, in-memory positions). It runs one command at a time, to completion (SQLite calls are
 * synchronous), and answers only after the commit and after bumping the generations that the caches
 * of reads on every thread compare against.
 */
export class ShardWriter {
  private readonly ids = new Map<IdEntity, { next: number; end: number }>();
  /** The running command's time (its message's `now`): commands read the clock only through this. */
  now = 0;
  private readonly afterCommand: (() => void)[] = [];

  private constructor(
    readonly index: number,
    readonly writer: Db,
    private readonly control: ControlPlane,
    readonly generations: ShardGenerations,
    readonly ports: WriterPorts,
    private readonly stopCheckpoints: () => void,
  ) {}

  static async open(
    dataDir: string,
    index: number,
    control: ControlPlane,
    generations: ShardGenerations,
    ports: WriterPorts,
  ): Promise<ShardWriter> {
    const file = shardFile(dataDir, index);
    await migrate(file, shardMigrations);
    const writer = openDatabase(file);
    // Planner statistics for tables never (or long ago) analyzed. Without them SQLite walks the
    // location tree through the (org_id, external_key) index, a full scan per step (bench: 6 req/s).
    writer.pragma('optimize=0x10002');
    return new ShardWriter(index, writer, control, generations, ports, checkpointInBackground(file, writer));
  }

  /** Runs one mailbox message to its answer. Never throws: a failure is the answer. */
  execute(message: CommandMessage): CommandAnswer {
    try {
      // The deadline is the actor's own wall clock against the sender's: how long the message waited.
      if (message.deadline !== undefined && systemClock.now() > message.deadline) {
        throw unavailable('The write waited too long behind other work of its shard; nothing was changed; retry later', 1);
      }
      const command = commandNamed(message.name);
      if (command === undefined) throw new Error(`unknown shard command ${message.name}`);
      this.now = message.now;
      const value = command.run(this, message.args);
      this.generations.bump(command.effects(message.args, value));
      return { id: message.id, value };
    } catch (err) {
      // A failed command changed nothing: each runs in one transaction or one statement.
      return { id: message.id, error: encodeError(err) };
    } finally {
      for (const settle of this.afterCommand) settle();
    }
  }

  /** Runs `settle` after every command, committed or failed (writer-side state that follows committed rows). */
  afterEachCommand(settle: () => void): void {
    this.afterCommand.push(settle);
  }

  /** Next id for an entity type, from a block reserved in the control plane. */
  nextId(entity: IdEntity): number {
    let block = this.ids.get(entity);
    if (block === undefined || block.next >= block.end) {
      const reserved = this.control.reserveIds(entity);
      block = { next: reserved.start, end: reserved.end };
      this.ids.set(entity, block);
    }
    return block.next++;
  }

  close(): void {
    this.stopCheckpoints();
    this.writer.close();
  }
}
