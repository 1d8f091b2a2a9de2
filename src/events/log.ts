import { hash } from 'node:crypto';
import { encodeTime } from 'ulid';
import { shardState } from '../shards/state.js';
import type { ShardWriter } from '../shards/writer.js';
import type { Db } from '../storage/sqlite.js';
import { formatTimestamp } from '../wire/timestamps.js';
import { enteredAndLeft, type NodeRef } from './tree.js';
import type { EventType } from './types.js';

/**
 * The writer side of the event log (migration 010): each event a committed change implies is
 * appended inside the change's own transaction, so a rolled-back change leaves neither its events
 * nor a hole in the organization's sequence (the head lives in SQLite, not in memory). Everything
 * an event holds comes from the command's record: its time is the command's `now` (a scan batch's
 * stream time), its id a function of the organization, the sequence and that time. A replay of the
 * records therefore writes the same rows.
 */

/** Rows examined per step of a prune. */
const PRUNE_STEP = 10_000;

const CROCKFORD = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';

/** A ULID-shaped id whose time part is the event's time and whose other 80 bits come from (org, seq): no randomness, so a replay draws the same. */
export function eventId(orgId: number, seq: number, at: number): string {
  // One-shot hash: the same digest as createHash(...).update(...).digest() for about two thirds of its CPU (an event per imported row).
  const digest = hash('sha256', `${orgId}:${seq}`, 'buffer');
  let tail = '';
  // 16 characters of 5 bits from the first 10 bytes.
  let bits = 0;
  let value = 0;
  for (let i = 0; i < 10; i++) {
    value = (value << 8) | digest[i]!;
    bits += 8;
    while (bits >= 5) {
      bits -= 5;
      tail += CROCKFORD[(value >> bits) & 31];
    }
    value &= (1 << bits) - 1;
  }
  return encodeTime(Math.max(0, at), 10) + tail;
}

/**
 * An organization's last sequence handed out (0 before its first event), one parameter: the org. Its
 * events' highest, else (all pruned, or none yet) its head's: inside a round, whose heads are
 * written only before its COMMIT (`EventLog.deferHeads`), that is the round's latest too, so every
 * read of "the sequence so far" on the writer (a webhook's starting cursor, the tree counts' as-of)
 * gives what it gave with the head upserted per event. On committed state it equals the head.
 */
export const LAST_SEQ_SQL =
  'WITH o(id) AS (SELECT ?) SELECT coalesce((SELECT max(seq) FROM events WHERE org_id = o.id), (SELECT last_seq FROM event_heads WHERE org_id = o.id), 0) FROM o';

function prepare(db: Db) {
  return {
    head: db.prepare(
      `INSERT INTO event_heads (org_id, last_seq) VALUES (?, 1)
       ON CONFLICT (org_id) DO UPDATE SET last_seq = last_seq + 1 RETURNING last_seq`,
    ),
    lastSeq: db.prepare('SELECT last_seq FROM event_heads WHERE org_id = ?').pluck(),
    current: db.prepare(LAST_SEQ_SQL).pluck(),
    setHead: db.prepare(
      'INSERT INTO event_heads (org_id, last_seq) VALUES (?, ?) ON CONFLICT (org_id) DO UPDATE SET last_seq = excluded.last_seq',
    ),
    insert: db.prepare('INSERT INTO events (org_id, seq, id, type, occurred_at, data) VALUES (?, ?, ?, ?, ?, ?)'),
    epoch: db.prepare('SELECT epoch FROM scan_resolution_epoch WHERE id = 1').pluck(),
    node: db.prepare('SELECT id, external_key, parent_id FROM locations WHERE id = ?'),
    assetKeys: db.prepare('SELECT id, external_key FROM assets WHERE id IN (SELECT value FROM json_each(?))'),
    prunable: db.prepare('SELECT pos, occurred_at FROM events WHERE pos <= ? ORDER BY pos LIMIT ?'),
    prune: db.prepare('DELETE FROM events WHERE pos <= ?'),
  };
}

/** Numbers per move in MovedEvents. */
const MOVED_FIELDS = 5;
/** `from` of an asset's first location. */
const NOWHERE = 0;

/** A batch's `asset.moved` events, in order, for EventLog.movedMany: five numbers each, without an object per move. */
export class MovedEvents {
  readonly values: number[] = [];

  /** `from` undefined: the asset's first location. */
  push(orgId: number, assetId: number, from: number | undefined, to: number, observedAt: number): void {
    this.values.push(orgId, assetId, from ?? NOWHERE, to, observedAt);
  }
}

/** A location as it appears in an event: id and external key. */
export type EventLocation = NodeRef;

/** A location of the tree cache: its parent, and its JSON as events write it. */
interface EventNode extends NodeRef {
  parent_id: number | null;
  json: string;
}

const jsonOf = (node: EventNode) => node.json;

/** The per-shard writer state: statements and a cache of the location tree (dropped on any master-data change). */
export class EventLog {
  private readonly s: ReturnType<typeof prepare>;
  private readonly nodes = new Map<number, EventNode>();
  private epoch = -1;
  /** Inside `withHeldHeads`: each organization's last sequence handed out, not yet written to event_heads. */
  private held: Map<number, number> | undefined;
  /** Between `deferHeads` and `writeHeads`: the organizations whose events this transaction appended (or more). */
  private touched: Set<number> | undefined;

  constructor(private readonly shard: ShardWriter) {
    this.s = prepare(shard.writer);
  }

  /**
   * Runs `fn` with the organizations' heads kept in memory and written once when it returns, instead
   * of an upsert of the head per event (an import batch appends one event per row). `fn` must run
   * inside a transaction that a throw out of it rolls back (better-sqlite3's `transaction`), so the
   * events it appended never commit without their head.
   */
  withHeldHeads<T>(fn: () => T): T {
    if (this.held !== undefined) return fn();
    const held = new Map<number, number>();
    this.held = held;
    try {
      const result = fn();
      for (const [orgId, seq] of held) this.s.setHead.run(orgId, seq);
      return result;
    } finally {
      this.held = undefined;
    }
  }

  /**
   * Defers the heads of the transaction the shard writer opens (shards/deferred.ts) to
   * `writeHeads`, before its COMMIT: an upsert of the head per event cost more than the event's
   * own insert. Each event's sequence is then read from the events the transaction holds, so a
   * command undone in a round (its savepoint rolled back) takes its events and their sequences with
   * it, and the next command's follow on without a hole, as with the head upserted per event.
   */
  deferHeads(): void {
    this.touched = new Set();
  }

  /** Before the COMMIT of the transaction that deferred them: each touched organization's head, once. */
  writeHeads(): void {
    const touched = this.touched;
    this.touched = undefined;
    if (touched === undefined) return;
    for (const orgId of touched) {
      const last = this.s.current.get(orgId) as number;
      if (last !== ((this.s.lastSeq.get(orgId) as number | undefined) ?? 0)) this.s.setHead.run(orgId, last);
    }
  }

  /** After a rollback of the transaction that deferred them: nothing to write. */
  headsRolledBack(): void {
    this.touched = undefined;
  }

  private nextSeq(orgId: number): number {
    if (this.held !== undefined) {
      const seq = (this.held.get(orgId) ?? (this.s.current.get(orgId) as number)) + 1;
      this.held.set(orgId, seq);
      return seq;
    }
    if (this.touched !== undefined) {
      this.touched.add(orgId);
      return (this.s.current.get(orgId) as number) + 1;
    }
    return (this.s.head.get(orgId) as { last_seq: number }).last_seq;
  }

  append(orgId: number, type: EventType, data: object): void {
    this.appendJson(orgId, type, JSON.stringify(data));
  }

  private appendJson(orgId: number, type: EventType, json: string): void {
    const seq = this.nextSeq(orgId);
    const at = this.shard.now;
    this.s.insert.run(orgId, seq, eventId(orgId, seq, at), type, at, json);
    this.shard.eventsAppended = true;
  }

  /** After the transaction of a command that commits itself (a scan batch): the streams are woken before its after-commit work. */
  committed(): void {
    this.shard.eventsVisible();
  }

  /** Drops the tree cache when master data changed since it was filled (once per batch of moves: a scan batch changes no master data). */
  private currentTree(): void {
    const epoch = this.s.epoch.get() as number;
    if (epoch !== this.epoch) {
      this.nodes.clear();
      this.epoch = epoch;
    }
  }

  /** A location and its ancestors, root first, from the tree cache (`currentTree` first). */
  private chainNodes(locationId: number): EventNode[] {
    const out: EventNode[] = [];
    const seen = new Set<number>();
    let id: number | null = locationId;
    while (id !== null && !seen.has(id)) {
      seen.add(id);
      let node = this.nodes.get(id);
      if (node === undefined) {
        const row = this.s.node.get(id) as { id: number; external_key: string; parent_id: number | null } | undefined;
        if (row === undefined) break;
        if (this.nodes.size >= 100_000) this.nodes.clear();
        node = { ...row, json: JSON.stringify({ id: row.id, external_key: row.external_key }) };
        this.nodes.set(id, node);
      }
      out.push(node);
      id = node.parent_id;
    }
    return out.reverse();
  }

  /**
   * `asset.moved` for each of a scan batch's moves, in order. Their text is written from each
   * location's JSON kept beside the tree cache (field ingest moves thousands of assets a second):
   * the same text as JSON.stringify of { asset, from, to, observed_at, entered, left }, which the
   * event tests compare. The tree's epoch is read once and the assets' keys in one query: two
   * statements per move cost about 50 ms of a 100,000-read batch (docs/field-rereads.md).
   */
  movedMany(moves: MovedEvents): void {
    const m = moves.values;
    if (m.length === 0) return;
    this.currentTree();
    const assetIds = new Float64Array(m.length / MOVED_FIELDS);
    for (let i = 0; i < assetIds.length; i++) assetIds[i] = m[i * MOVED_FIELDS + 1]!;
    // In id order: consecutive lookups share the assets table's pages.
    assetIds.sort();
    const keys = new Map<number, string>();
    for (const [id, key] of this.s.assetKeys.raw().iterate(JSON.stringify(Array.from(assetIds))) as IterableIterator<[number, string]>)
      keys.set(id, key);
    for (let i = 0; i < m.length; i += MOVED_FIELDS) {
      const orgId = m[i]!;
      const assetId = m[i + 1]!;
      const from = m[i + 2]!;
      const toChain = this.chainNodes(m[i + 3]!);
      const fromChain = from === NOWHERE ? [] : this.chainNodes(from);
      const { entered, left } = enteredAndLeft(fromChain, toChain);
      const key = JSON.stringify(keys.get(assetId));
      const fromJson = from === NOWHERE ? 'null' : fromChain[fromChain.length - 1]!.json;
      const toJson = toChain[toChain.length - 1]!.json;
      this.appendJson(
        orgId,
        'asset.moved',
        `{"asset":{"id":${assetId},"external_key":${key}},"from":${fromJson},"to":${toJson},"observed_at":"${formatTimestamp(m[i + 4]!)}","entered":[${entered.map(jsonOf).join(',')}],"left":[${left.map(jsonOf).join(',')}]}`,
      );
    }
  }

  /**
   * Drops the oldest events: those at or below `throughPos` (what the relay has published) that
   * occurred before `before`, as a prefix of the shard's order, so that every organization keeps a
   * contiguous tail of its sequence. Returns the rows dropped.
   */
  prune(before: number, throughPos: number): number {
    let dropped = 0;
    for (;;) {
      const rows = this.s.prunable.all(throughPos, PRUNE_STEP) as { pos: number; occurred_at: number }[];
      let cut = 0;
      let reachedYoung = false;
      for (const row of rows) {
        if (row.occurred_at >= before) {
          reachedYoung = true;
          break;
        }
        cut = row.pos;
      }
      if (cut === 0) return dropped;
      dropped += this.s.prune.run(cut).changes;
      if (reachedYoung || rows.length < PRUNE_STEP) return dropped;
    }
  }
}

export const eventLogOf = shardState((shard: ShardWriter) => new EventLog(shard));
