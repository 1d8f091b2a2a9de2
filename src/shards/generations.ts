/**
 * What a shard command changed, as seen by the caches of reads. `scans`: scan state only
 * (master-data caches stay valid). `any`: any master data. `{ table, ids }`: master data, where
 * among existing rows only these rows of `table` changed (a create names none: a row that did not
 * exist cannot be cached).
 */
export type WriteEffects = 'any' | 'scans' | RowEffects;
export interface RowEffects {
  table: string;
  ids: number[];
}

const TABLES = ['assets', 'locations', 'tags'] as const;
const ANY = 0;
const FIRST_TABLE = 1;
const FIRST_ROW = FIRST_TABLE + TABLES.length;
/** Rows hash into this many counters: two rows sharing one only cost each other a cache miss. */
const ROW_SLOTS = 8192;
/** After the row counters: the count of commits that appended events (what event streams wait on). */
const EVENTS = FIRST_ROW + ROW_SLOTS;
/** Then, 8-byte aligned, the time of the last of those commits (ms, a Float64). */
const EVENTS_AT_BYTE = Math.ceil(((EVENTS + 1) * 4) / 8) * 8;
const BUFFER_BYTES = EVENTS_AT_BYTE + 8;

export interface RowStamp {
  any: number;
  row: number;
}

export interface TableStamp {
  any: number;
  table: number;
}

/**
 * A shard's change counters in shared memory: the writer bumps them after each commit and before
 * it answers; every thread's caches of reads compare the counters they were filled under with the
 * current ones (`Atomics.load`) before serving. A reader takes its stamp before it reads SQLite, so
 * a commit that lands during the read leaves the entry already stale. Exact across threads: after
 * an answered write, no thread serves a value computed before it.
 */
export class ShardGenerations {
  private readonly counters: Int32Array;
  private readonly eventsAt: Float64Array;

  constructor(readonly buffer: SharedArrayBuffer = new SharedArrayBuffer(BUFFER_BYTES)) {
    this.counters = new Int32Array(buffer, 0, EVENTS + 1);
    this.eventsAt = new Float64Array(buffer, EVENTS_AT_BYTE, 1);
  }

  /**
   * Writer side, after a commit that appended events: wakes the event streams of every thread
   * waiting in `eventsAfter` (instead of their next poll) and records when (their debug lines).
   */
  eventsCommitted(at: number): void {
    this.eventsAt[0] = at;
    Atomics.add(this.counters, EVENTS, 1);
    Atomics.notify(this.counters, EVENTS);
  }

  /** How many commits appended events so far (wraps; compare for equality only). */
  eventsGeneration(): number {
    return Atomics.load(this.counters, EVENTS);
  }

  /** When the last commit that appended events ran (ms; 0 before the first one). */
  lastEventsAt(): number {
    return this.eventsAt[0]!;
  }

  /** Resolves once a commit with events follows generation `seen`, or after `timeoutMs`. */
  async eventsAfter(seen: number, timeoutMs: number): Promise<void> {
    const wait = Atomics.waitAsync(this.counters, EVENTS, seen, timeoutMs);
    if (wait.async) await wait.value;
  }

  /** Writer side: records a committed command's effects. */
  bump(effects: WriteEffects): void {
    if (effects === 'scans') return;
    const table = effects === 'any' ? -1 : tableIndex(effects.table);
    if (effects === 'any' || table < 0) {
      Atomics.add(this.counters, ANY, 1);
      return;
    }
    for (const id of effects.ids) Atomics.add(this.counters, FIRST_ROW + rowSlot(table, id), 1);
    Atomics.add(this.counters, FIRST_TABLE + table, 1);
  }

  rowStamp(table: string, id: number): RowStamp {
    const t = tableIndex(table);
    return { any: Atomics.load(this.counters, ANY), row: t < 0 ? 0 : Atomics.load(this.counters, FIRST_ROW + rowSlot(t, id)) };
  }

  rowCurrent(table: string, id: number, stamp: RowStamp): boolean {
    const now = this.rowStamp(table, id);
    return now.any === stamp.any && now.row === stamp.row;
  }

  tableStamp(table: string): TableStamp {
    const t = tableIndex(table);
    return { any: Atomics.load(this.counters, ANY), table: t < 0 ? 0 : Atomics.load(this.counters, FIRST_TABLE + t) };
  }

  tableCurrent(table: string, stamp: TableStamp): boolean {
    const now = this.tableStamp(table);
    return now.any === stamp.any && now.table === stamp.table;
  }
}

/** The table's counter index, or -1 for a table without counters of its own (its changes bump 'any'). */
function tableIndex(table: string): number {
  return TABLES.indexOf(table as (typeof TABLES)[number]);
}

function rowSlot(table: number, id: number): number {
  return (Math.imul(id, 0x9e3779b1) + table * 0x85ebca6b) >>> 19; // top 13 bits: 0..8191
}
