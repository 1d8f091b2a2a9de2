import type { TableStamp } from '../shards/generations.js';
import type { Shard } from '../shards/shard.js';
import type { KeyedTable } from './keys.js';
import { shardState } from '../shards/state.js';

/**
 * Answers derived from one master-data table of a shard (list counts, subtree orders), each kept
 * while it cannot change: until a write touches the table (the shard's actor bumps the table's
 * generation counter, shared by every thread, before it answers), and until the table's next validity boundary (a live
 * row's valid_from or valid_to after the time of the first answer), where the currently-effective
 * rule could let a row in or out. Computing these walks every matching row; they repeat per page.
 */
const memosOf = shardState((_shard: Shard) => new Map<string, TableMemo<unknown>>());

export class TableMemo<T> {
  private readonly answers = new Map<string, T>();
  private validFrom = 0;
  private validUntil = -1;
  private stamp: TableStamp = { any: 0, table: 0 };

  private constructor(
    private readonly shard: Shard,
    private readonly table: KeyedTable,
    private readonly maxEntries: number,
  ) {}

  /** The shard's memo named `name` over `table` on this thread, created on first use. */
  static of<T>(shard: Shard, name: string, table: KeyedTable, maxEntries: number): TableMemo<T> {
    const memos = memosOf(shard);
    let memo = memos.get(name) as TableMemo<T> | undefined;
    if (memo === undefined) memos.set(name, (memo = new TableMemo<T>(shard, table, maxEntries)));
    return memo;
  }

  get(key: string, now: number, compute: () => T): T {
    // The stamp is taken before any read: a write committed during `compute` leaves it stale.
    const generations = this.shard.generations;
    if (now >= this.validUntil || now < this.validFrom || !generations.tableCurrent(this.table, this.stamp)) {
      this.answers.clear();
      this.stamp = generations.tableStamp(this.table);
      this.validFrom = now;
      this.validUntil = this.nextBoundary(now);
    }
    let answer = this.answers.get(key);
    if (answer === undefined) {
      answer = compute();
      if (this.answers.size >= this.maxEntries) this.answers.clear();
      this.answers.set(key, answer);
    }
    return answer;
  }

  /** The first time after `now` at which a live row of any org on this shard becomes effective or stops being so. */
  private nextBoundary(now: number): number {
    const statements = this.shard.readerStatements;
    const from = statements.get(`SELECT min(valid_from) FROM ${this.table} WHERE deleted_at IS NULL AND valid_from > ?`).pluck().get(now) as
      | number
      | null;
    const to = statements.get(`SELECT min(valid_to) FROM ${this.table} WHERE deleted_at IS NULL AND valid_to > ?`).pluck().get(now) as
      | number
      | null;
    return Math.min(from ?? Infinity, to ?? Infinity);
  }
}
