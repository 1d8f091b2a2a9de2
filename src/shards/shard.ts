import path from 'node:path';
import { shardMigrations } from '../../migrations/shard/index.js';
import type { ControlPlane } from '../control/controlPlane.js';
import { checkpointInBackground } from '../storage/checkpointer.js';
import { migrate, openDatabase, StatementCache, type Db } from '../storage/sqlite.js';

export type IdEntity = 'asset' | 'location' | 'tag' | 'history';

/**
 * What a write command may change. `scans`: scan state only (master-data caches stay warm). `any`:
 * any master data. `{ table, ids }`: master data, where among existing rows only these rows of
 * `table` changed (a create names none: a row that did not exist cannot be cached).
 */
export type WriteEffects = 'any' | 'scans' | RowEffects;
export interface RowEffects {
  table: string;
  ids: number[];
}

/**
 * An organization shard: an actor that owns one SQLite file and is its only writer.
 *
 * Writes go through `write()`, the shard's mailbox: commands run one at a time, in arrival order,
 * each against the writer connection. Reads run on `reader`, a read-only connection beside the
 * writer, synchronously on the caller's thread: WAL lets it read committed state while the writer
 * works, and keeping the hot reads off the mailbox saves a hop per request (measured by the bench).
 * Because commands and reads only meet through SQLite, the shard can move to a worker thread or
 * another machine (mailbox over NATS) without changing its callers.
 */
export class Shard {
  private readonly ids = new Map<IdEntity, { next: number; end: number }>();
  private readonly locals = new Map<string, unknown>();
  private tail: Promise<unknown> = Promise.resolve();
  readonly readerStatements: StatementCache;
  /** Told of every master-data command in the same turn as its commit: caches of reads drop what it changed (reads and commands share one thread). */
  private readonly masterDataListeners: ((effects: 'any' | RowEffects) => void)[] = [];

  private constructor(
    readonly index: number,
    readonly writer: Db,
    readonly reader: Db,
    private readonly control: ControlPlane,
    private readonly stopCheckpoints: () => void,
  ) {
    this.readerStatements = new StatementCache(reader);
  }

  static async open(dataDir: string, index: number, control: ControlPlane): Promise<Shard> {
    const file = path.join(dataDir, 'shards', `shard-${index}.sqlite`);
    await migrate(file, shardMigrations);
    const writer = openDatabase(file);
    // Planner statistics for tables never (or long ago) analyzed. Without them SQLite walks the
    // location tree through the (org_id, external_key) index, a full scan per step (bench: 6 req/s).
    writer.pragma('optimize=0x10002');
    const reader = openDatabase(file, { readonly: true });
    return new Shard(index, writer, reader, control, checkpointInBackground(file, writer));
  }

  /** Enqueues a command in the mailbox; it runs after every command sent before it. */
  write<T>(command: (db: Db) => T, effects: WriteEffects = 'any'): Promise<T> {
    const run = this.tail.then(() => {
      try {
        return command(this.writer);
      } finally {
        if (effects !== 'scans') for (const listener of this.masterDataListeners) listener(effects);
      }
    });
    this.tail = run.catch(() => undefined);
    return run;
  }

  /** Called after every master-data command, in the same turn as its commit (before any later read). */
  onMasterDataWrite(listener: (effects: 'any' | RowEffects) => void): void {
    this.masterDataListeners.push(listener);
  }

  /** Next id for an entity type, from a block reserved in the control plane. Writer side only. */
  nextId(entity: IdEntity): number {
    let block = this.ids.get(entity);
    if (block === undefined || block.next >= block.end) {
      const reserved = this.control.reserveIds(entity);
      block = { next: reserved.start, end: reserved.end };
      this.ids.set(entity, block);
    }
    return block.next++;
  }

  /** Per-shard state of a feature (prepared statements, caches), created once on first use. */
  local<T>(key: string, create: (shard: Shard) => T): T {
    let value = this.locals.get(key) as T | undefined;
    if (value === undefined) {
      value = create(this);
      this.locals.set(key, value);
    }
    return value;
  }

  async close(): Promise<void> {
    await this.tail;
    this.stopCheckpoints();
    this.reader.close();
    this.writer.close();
  }
}
