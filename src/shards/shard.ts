import { openDatabase, StatementCache, type Db } from '../storage/sqlite.js';
import type { ShardCommand } from './commands.js';
import type { ShardGenerations } from './generations.js';
import type { Mailbox, SendOptions } from './mailbox.js';
import { shardFile } from './writer.js';

export type { RowEffects, WriteEffects } from './generations.js';

/** How long a write may wait in its shard's mailbox before the actor refuses it (503, nothing changed). */
export const COMMAND_DEADLINE_MS = 10_000;

/**
 * An organization shard as one thread sees it. Writes go to the shard's actor through its mailbox
 * (`send`: a named command with structured arguments, answered after its commit), wherever the
 * actor runs (its own thread; the caller's thread in tools). Reads run on this thread's own
 * read-only connection (WAL lets it read committed state while the actor writes) and on this
 * thread's caches (typed per-shard state, see shardState), which the actor's generation counters keep exact.
 */
export class Shard {
  readonly readerStatements: StatementCache;

  constructor(
    readonly index: number,
    readonly reader: Db,
    private readonly mailbox: Mailbox,
    readonly generations: ShardGenerations,
  ) {
    this.readerStatements = new StatementCache(reader);
  }

  /** `mmapBytes`: the reading connection's memory map (READ_MMAP_MB; default openDatabase's). */
  static openReader(dataDir: string, index: number, mailbox: Mailbox, generations: ShardGenerations, mmapBytes?: number): Shard {
    return new Shard(index, openDatabase(shardFile(dataDir, index), { readonly: true, mmapBytes }), mailbox, generations);
  }

  /** Sends a command to the shard's actor; it runs after every command this thread sent before it. */
  send<A, R>(command: ShardCommand<A, R>, args: A, options: SendOptions = { deadlineMs: COMMAND_DEADLINE_MS }): Promise<R> {
    return this.mailbox.send(command, args, options);
  }

  async close(): Promise<void> {
    await this.mailbox.close();
    this.reader.close();
  }
}
