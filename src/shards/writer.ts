import path from 'node:path';
import { shardMigrations } from '../../migrations/shard/index.js';
import { unavailable } from '../errors/domain.js';
import { systemClock } from '../clock.js';
import type { AssetPlacement } from '../locations/placement.js';
import { checkpointInBackground } from '../storage/checkpointer.js';
import { migrate, openDatabase, type Db } from '../storage/sqlite.js';
import { commandNamed } from './commands.js';
import type { ShardGenerations } from './generations.js';
import { encodeError, type CommandAnswer, type CommandMessage } from './mailbox.js';
import type { DrawnIds, IdEntity, RecordSink, ShardRecord } from './records.js';

export type { IdEntity } from './records.js';

/** Where new ids come from: blocks reserved in the control plane (ControlPlane), or a replay's records. */
export interface IdSource {
  reserveIds(entity: IdEntity): { start: number; end: number };
}

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
  /** Where committed commands are recorded; undefined (the default) costs nothing per command. */
  private sink: RecordSink | undefined;
  /** The ids the running command drew, per entity in order (only while a sink listens). */
  private drawn: DrawnIds | undefined;
  /** During a replay: the ids the recorded command drew, handed out again in the same order. */
  private given: DrawnIds | undefined;

  private constructor(
    readonly index: number,
    readonly writer: Db,
    private readonly idSource: IdSource,
    readonly generations: ShardGenerations,
    readonly ports: WriterPorts,
    private readonly stopCheckpoints: () => void,
  ) {}

  static async open(
    dataDir: string,
    index: number,
    idSource: IdSource,
    generations: ShardGenerations,
    ports: WriterPorts,
    file = shardFile(dataDir, index),
  ): Promise<ShardWriter> {
    await migrate(file, shardMigrations);
    const writer = openDatabase(file);
    // Planner statistics for tables never (or long ago) analyzed. Without them SQLite walks the
    // location tree through the (org_id, external_key) index, a full scan per step (bench: 6 req/s).
    writer.pragma('optimize=0x10002');
    return new ShardWriter(index, writer, idSource, generations, ports, checkpointInBackground(file, writer));
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
      const recording = this.sink !== undefined && command.recorded;
      if (recording) this.drawn = {};
      const value = command.run(this, message.args);
      if (recording) this.sink!({ name: message.name, now: message.now, args: message.args, ids: this.drawn! });
      this.generations.bump(command.effects(message.args, value));
      return { id: message.id, value };
    } catch (err) {
      // A failed command changed nothing: each runs in one transaction or one statement.
      return { id: message.id, error: encodeError(err) };
    } finally {
      this.drawn = undefined;
      for (const settle of this.afterCommand) settle();
    }
  }

  /**
   * Records every committed state change from now on: `sink` gets one record per command that
   * committed (in commit order, before the command is answered), enough to apply it again
   * elsewhere (replay.ts). Read-only commands are not recorded. The sink runs after the commit, so
   * it must not fail (a failure would answer an error for a committed command); a journal that must
   * hold a record before its effects are committed belongs inside the command's transaction instead.
   */
  recordTo(sink: RecordSink | undefined): void {
    this.sink = sink;
  }

  /**
   * Applies a recorded command again: its recorded now, args and ids, never the wall clock or the
   * id source. Throws when it fails or draws other ids than recorded (the replay has diverged).
   */
  replay(record: ShardRecord): unknown {
    const command = commandNamed(record.name);
    if (command === undefined) throw new Error(`unknown shard command ${record.name}`);
    this.given = Object.fromEntries(Object.entries(record.ids).map(([entity, ids]) => [entity, [...ids]]));
    try {
      this.now = record.now;
      const value = command.run(this, record.args);
      const left = Object.entries(this.given).filter(([, ids]) => ids.length > 0);
      if (left.length > 0) throw new Error(`replay of ${record.name}: recorded ids not drawn: ${JSON.stringify(Object.fromEntries(left))}`);
      this.generations.bump(command.effects(record.args, value));
      return value;
    } finally {
      this.given = undefined;
      for (const settle of this.afterCommand) settle();
    }
  }

  /** Runs `settle` after every command, committed or failed (writer-side state that follows committed rows). */
  afterEachCommand(settle: () => void): void {
    this.afterCommand.push(settle);
  }

  /** Next id for an entity type: from a block reserved in the id source, or (replaying) the recorded one. */
  nextId(entity: IdEntity): number {
    if (this.given !== undefined) {
      const id = this.given[entity]?.shift();
      if (id === undefined) throw new Error(`replay: the command draws more ${entity} ids than it recorded`);
      return id;
    }
    let block = this.ids.get(entity);
    if (block === undefined || block.next >= block.end) {
      const reserved = this.idSource.reserveIds(entity);
      block = { next: reserved.start, end: reserved.end };
      this.ids.set(entity, block);
    }
    const id = block.next++;
    if (this.drawn !== undefined) (this.drawn[entity] ??= []).push(id);
    return id;
  }

  close(): void {
    this.stopCheckpoints();
    this.writer.close();
  }
}
