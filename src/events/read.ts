import { ApiError } from '../errors/catalog.js';
import type { Shard } from '../shards/shard.js';
import { shardState } from '../shards/state.js';
import type { Db } from '../storage/sqlite.js';
import { EVENT_COLUMNS, envelopeJson, type EventRow } from './envelope.js';
import { scopeOf } from './types.js';

function prepare(db: Db) {
  return {
    head: db.prepare('SELECT last_seq FROM event_heads WHERE org_id = ?').pluck(),
    oldest: db.prepare('SELECT min(seq) FROM events WHERE org_id = ?').pluck(),
    after: db.prepare(`SELECT ${EVENT_COLUMNS} FROM events WHERE org_id = ? AND seq > ? ORDER BY seq LIMIT ?`),
  };
}

/** The event log's reads on this thread's read connection of a shard (the pages and the streams). */
export const eventReads = shardState((shard: Shard) => prepare(shard.reader));

/** The organization's last sequence (0 before its first event), on this thread's read connection. */
export function lastSeq(shard: Shard, orgId: number): number {
  return (eventReads(shard).head.get(orgId) as number | undefined) ?? 0;
}

/** Whether a key with `scopes` may see the event in `row`. */
export function visibleTo(scopes: ReadonlySet<string>, row: EventRow): boolean {
  const needs = scopeOf(row.type, row.type.startsWith('tag.') ? (JSON.parse(row.data) as { owner_type?: string }) : {});
  return scopes.has(needs);
}

export interface EventSlice {
  rows: EventRow[];
  /** The last sequence the slice covered (its rows' last, or `after` when it holds none). */
  through: number;
  last: number;
}

/**
 * Up to `limit` events of the organization after `after`, read in one snapshot with the head. A cursor
 * whose next event has been pruned already is 410 cursor_expired, naming the oldest sequence held.
 */
export function eventsAfter(shard: Shard, orgId: number, after: number, limit: number): EventSlice {
  const s = eventReads(shard);
  return shard.reader.transaction(() => {
    const last = (s.head.get(orgId) as number | undefined) ?? 0;
    const oldest = (s.oldest.get(orgId) as number | null) ?? last + 1;
    if (after + 1 < oldest) {
      throw new ApiError(
        'cursor_expired',
        `events after ${after} are no longer held (retention); the oldest available event is ${oldest}: read from after=${oldest - 1}, and reconcile with the report first`,
        { headers: { 'Trackd-Oldest-Seq': String(oldest) } },
      );
    }
    const rows = s.after.all(orgId, after, limit) as EventRow[];
    return { rows, through: rows.length === 0 ? Math.max(after, 0) : rows[rows.length - 1]!.seq, last };
  })();
}

/** A page of events as JSON text (schema EventPage): the stored payloads spliced in unparsed. */
export function pageJson(slice: EventSlice, scopes: ReadonlySet<string>): string {
  const events = slice.rows.filter((row) => visibleTo(scopes, row)).map(envelopeJson);
  return `{"data":[${events.join(',')}],"next_after":${slice.through},"last_seq":${slice.last}}`;
}
