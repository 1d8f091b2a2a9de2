import path from 'node:path';
import { headers, nanos, type NatsConnection } from '@nats-io/transport-node';
import { JetStreamApiCodes, StorageType, jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import { Backoff } from '../scans/backoff.js';
import { ADMIN_OPTIONS, connectNats, DUPLICATE_WINDOW_MS, isApiError, streamWithLeader } from '../scans/streams.js';
import { openDatabase, type Db } from '../storage/sqlite.js';
import { shardFile } from '../shards/writer.js';
import type { WebhookSettings } from '../webhooks/dispatcher.js';
import { AckedPublisher, type StreamMessage } from './ackedPublish.js';
import { EVENT_COLUMNS, envelopeJson, type EventRow } from './envelope.js';
import { isoSql } from '../wire/timestamps.js';

export const EVENTS_STREAM = 'EVENTS';
export const eventSubject = (orgId: number, type: string) => `events.${orgId}.${type}`;
/** The header carrying the organization's sequence (clients see only it; the stream's own sequence is shared by every tenant). */
export const SEQ_HEADER = 'Trackd-Seq';
/** JetStream's de-duplication header (what `js.publish`'s `msgID` sets). */
const MSG_ID_HEADER = 'Nats-Msg-Id';

export interface RelaySettings {
  natsUrl: string;
  /** EVENT_RETENTION_SECONDS in ms: the log keeps events this long (once relayed), the stream too. */
  retentionMs: number;
  /** How often the relay asks its shard to prune the log. */
  pruneEveryMs?: number;
  /** Copies of EVENTS when the relay creates it (JOURNAL_REPLICAS). */
  replicas?: number;
  /** The webhook dispatcher that runs beside the relay on the shard's thread (src/webhooks/dispatcher.ts); none: no deliveries. */
  webhooks?: WebhookSettings;
}

/** Rows published per round trip of acks. */
const BATCH = 256;

/**
 * A batch of events as the frames nc.publish would write for them (`HPUB`, the headers
 * `Nats-Msg-Id` and `Trackd-Seq`, envelopeJson's text, the reply `<prefix><i>` with i the event's
 * distance past the batch's start), built by SQLite beside the rows it reads: building the
 * envelope, the headers and the frame per event in JavaScript was about half of the relay's CPU
 * during field ingest (a move is an event). The ids, types and numbers need no JSON escaping;
 * `data` is stored JSON, spliced in as envelopeJson does.
 */
const FRAMES_SQL = `WITH r AS MATERIALIZED (
    SELECT pos, org_id, seq, type,
      'NATS/1.0' || char(13, 10) || '${MSG_ID_HEADER}: ' || id || char(13, 10) || '${SEQ_HEADER}: ' || seq || char(13, 10, 13, 10) AS h,
      '{"id":"' || id || '","seq":' || seq || ',"type":"' || type || '","org_id":' || org_id || ',"occurred_at":"' || ${isoSql('occurred_at')} || '","data":' || data || '}' AS b
    FROM events WHERE pos > @after ORDER BY pos LIMIT @limit)
  SELECT pos, org_id, seq, type, length(h) + octet_length(b) AS size,
    CAST('HPUB events.' || org_id || '.' || type || ' ' || @reply || (pos - @after - 1) || ' '
      || length(h) || ' ' || (length(h) + octet_length(b)) || char(13, 10) || h || b || char(13, 10) AS BLOB) AS frame
  FROM r ORDER BY pos`;

interface FrameRow {
  pos: number;
  org_id: number;
  seq: number;
  type: string;
  size: number;
  frame: Buffer;
}

const DEFAULT_PRUNE_EVERY_MS = 60_000;

/** The relay's own file beside the shard's: its published position, kept out of the shard's state (which is a function of its records). */
export const relayFile = (dataDir: string, index: number) => path.join(dataDir, 'shards', `shard-${index}.relay.db`);

/**
 * Publishes a shard's committed events to JetStream (`EVENTS`, subject `events.<org>.<type>`,
 * `Nats-Msg-Id` = the event id) in commit order, and remembers the last position published in a
 * file of its own. It reads the log on a read-only connection, so it sees committed rows only.
 *
 * Neither lost nor twice: an event is in the log before it can be published (same transaction as its
 * change), the position moves only after JetStream acknowledged every event up to it, and at start
 * the relay asks the stream, per organization with events past its saved position, for the last
 * sequence it holds, and skips what is there already (a crash between the acks and the save), so
 * a re-publish does not depend on the stream's duplicate window.
 */
export class EventRelay {
  private pos: number;
  private readonly skip = new Map<number, number>();
  /** The last position holding an event the stream had at start (`skip`): up to it, rows are published one by one so that those are left out. */
  private skipThrough = 0;
  private running = false;
  private again = false;
  private stopped = false;
  private pruneTimer: NodeJS.Timeout | undefined;
  private readonly backoff = new Backoff(100, 2_000);
  private readonly statements;

  private constructor(
    private readonly reader: Db,
    private readonly store: Db,
    private readonly nc: NatsConnection,
    private readonly publisher: AckedPublisher,
    private readonly settings: RelaySettings,
    private readonly prune: (before: number, throughPos: number) => Promise<unknown>,
    /** Tests only: `before:<type>` / `after:<type>` kills the process before publishing (after acking, before saving) an event of that type. */
    private readonly kill?: { when: 'before' | 'after'; type: string },
  ) {
    this.statements = {
      after: reader.prepare(`SELECT ${EVENT_COLUMNS} FROM events WHERE pos > ? ORDER BY pos LIMIT ?`),
      frames: reader.prepare(FRAMES_SQL),
      lastHeld: reader.prepare('SELECT max(pos) FROM events WHERE org_id = ? AND seq <= ? AND pos > ?').pluck(),
      orgsAfter: reader.prepare('SELECT DISTINCT org_id FROM events WHERE pos > ?').pluck(),
      oldest: reader.prepare('SELECT pos, occurred_at FROM events ORDER BY pos LIMIT 1'),
      save: store.prepare('INSERT INTO relay_position (id, pos) VALUES (1, ?) ON CONFLICT (id) DO UPDATE SET pos = excluded.pos'),
    };
    this.pos = (store.prepare('SELECT pos FROM relay_position WHERE id = 1').pluck().get() as number | undefined) ?? 0;
  }

  static async start(
    dataDir: string,
    index: number,
    settings: RelaySettings,
    prune: (before: number, throughPos: number) => Promise<unknown>,
    kill = parseKill(process.env.TRACKD_TEST_RELAY_KILL),
  ): Promise<EventRelay> {
    const store = openDatabase(relayFile(dataDir, index));
    store.exec('CREATE TABLE IF NOT EXISTS relay_position (id INTEGER PRIMARY KEY CHECK (id = 1), pos INTEGER NOT NULL)');
    const reader = openDatabase(shardFile(dataDir, index), { readonly: true });
    const nc = await connectNats(settings.natsUrl, `trackd-events-${index}`, { reconnect: true, noAsyncTraces: true });
    try {
      await ensureEventsStream(await jetstreamManager(nc, ADMIN_OPTIONS), settings.retentionMs, settings.replicas ?? 1);
      const relay = new EventRelay(reader, store, nc, new AckedPublisher(nc), settings, prune, kill);
      await relay.recover(await jetstreamManager(nc));
      relay.pruneTimer = setInterval(() => void relay.pruneNow(), settings.pruneEveryMs ?? DEFAULT_PRUNE_EVERY_MS);
      relay.pruneTimer.unref();
      relay.wake();
      return relay;
    } catch (err) {
      await nc.close();
      reader.close();
      store.close();
      throw err;
    }
  }

  /** What the stream already holds of each organization with events past the saved position. */
  private async recover(jsm: JetStreamManager): Promise<void> {
    for (const orgId of this.statements.orgsAfter.all(this.pos) as number[]) {
      try {
        const last = await jsm.streams.getMessage(EVENTS_STREAM, { last_by_subj: `events.${orgId}.>` });
        const seq = Number(last?.header.get(SEQ_HEADER));
        if (!Number.isSafeInteger(seq)) continue;
        this.skip.set(orgId, seq);
        this.skipThrough = Math.max(this.skipThrough, (this.statements.lastHeld.get(orgId, seq, this.pos) as number | null) ?? 0);
      } catch (err) {
        if (!isApiError(err, JetStreamApiCodes.NoMessageFound)) throw err;
      }
    }
  }

  /** The last position published and saved. */
  position(): number {
    return this.pos;
  }

  /** Called after every commit of the shard: publishes what is new. */
  wake(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    void this.pump();
  }

  private async pump(): Promise<void> {
    this.running = true;
    let failed = false;
    try {
      do {
        this.again = false;
        for (;;) {
          const last = this.pos < this.skipThrough ? await this.publishRows() : await this.publishFrames();
          if (last === undefined) break;
          this.pos = last;
          this.statements.save.run(this.pos);
        }
      } while (this.again && !this.stopped);
      this.backoff.reset();
    } catch {
      // The broker is away or refused: the same rows again after a pause (their ids make a re-publish a no-op).
      failed = true;
      await this.backoff.wait();
    } finally {
      this.running = false;
    }
    if ((failed || this.again) && !this.stopped) this.wake();
  }

  /** The next batch built in SQL (FRAMES_SQL); the position of its last event, or undefined when there was none. */
  private async publishFrames(): Promise<number | undefined> {
    let rows: FrameRow[] = [];
    await this.publisher.publishFrames((reply) => {
      rows = this.statements.frames.all({ after: this.pos, limit: BATCH, reply }) as FrameRow[];
      if (rows.length === 0 || this.stopped) return undefined;
      const maxPayload = this.nc.info?.max_payload ?? Number.POSITIVE_INFINITY;
      for (const row of rows) {
        // What nc.publish would throw: the broker closes a connection that sends more than this.
        if (row.size > maxPayload) throw new Error(`event ${row.org_id}/${row.seq} is larger than the broker's max_payload`);
        if (this.kill?.when === 'before' && this.kill.type === row.type) process.kill(process.pid, 'SIGKILL');
      }
      return { frames: rows.map((row) => row.frame), span: rows[rows.length - 1]!.pos - this.pos };
    });
    if (rows.length === 0 || this.stopped) return undefined;
    if (this.kill?.when === 'after' && rows.some((r) => r.type === this.kill!.type)) process.kill(process.pid, 'SIGKILL');
    return rows[rows.length - 1]!.pos;
  }

  /** The next batch row by row, leaving out what the stream held at start; the position of its last event, or undefined. */
  private async publishRows(): Promise<number | undefined> {
    const rows = this.statements.after.all(this.pos, BATCH) as EventRow[];
    if (rows.length === 0 || this.stopped) return undefined;
    const messages: StreamMessage[] = [];
    for (const row of rows) {
      if (row.seq <= (this.skip.get(row.org_id) ?? 0)) continue;
      if (this.kill?.when === 'before' && this.kill.type === row.type) process.kill(process.pid, 'SIGKILL');
      const h = headers();
      h.set(MSG_ID_HEADER, row.id);
      h.set(SEQ_HEADER, String(row.seq));
      messages.push({ subject: eventSubject(row.org_id, row.type), data: envelopeJson(row), headers: h });
    }
    await this.publisher.publishAll(messages);
    if (this.kill?.when === 'after' && rows.some((r) => r.type === this.kill!.type)) process.kill(process.pid, 'SIGKILL');
    return rows[rows.length - 1]!.pos;
  }

  /** Asks the shard to prune when its oldest event is due (published and past retention): a prune that would drop nothing is never recorded or journaled. */
  pruneNow(now = Date.now()): Promise<unknown> {
    const before = now - this.settings.retentionMs;
    const oldest = this.statements.oldest.get() as { pos: number; occurred_at: number } | undefined;
    if (oldest === undefined || oldest.pos > this.pos || oldest.occurred_at >= before) return Promise.resolve();
    return this.prune(before, this.pos).catch(() => undefined);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.pruneTimer);
    // A publish the broker never answers must not hold the shutdown: after a while the connection
    // is closed under it. Its event is published again at the next start (deduplicated there).
    const deadline = Date.now() + 2_000;
    while (this.running && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
    this.publisher.close();
    await this.nc.close();
    this.reader.close();
    this.store.close();
  }
}

function parseKill(text: string | undefined): { when: 'before' | 'after'; type: string } | undefined {
  const match = /^(before|after):(.+)$/.exec(text ?? '');
  return match === null ? undefined : { when: match[1] as 'before' | 'after', type: match[2]! };
}

/** Creates EVENTS (`events.>`) when missing: its messages kept as long as the log keeps events, re-publishes within the window dropped. */
export async function ensureEventsStream(jsm: JetStreamManager, retentionMs: number, replicas = 1): Promise<void> {
  try {
    await jsm.streams.info(EVENTS_STREAM);
    return;
  } catch (err) {
    if (!isApiError(err, JetStreamApiCodes.StreamNotFound)) throw err;
  }
  try {
    await jsm.streams.add({
      name: EVENTS_STREAM,
      subjects: ['events.>'],
      storage: StorageType.File,
      num_replicas: replicas,
      max_age: nanos(retentionMs),
      duplicate_window: nanos(Math.min(DUPLICATE_WINDOW_MS, retentionMs)),
    });
  } catch (err) {
    // Another shard's relay created it between our two calls.
    await jsm.streams.info(EVENTS_STREAM).catch(() => Promise.reject(err));
  }
  await streamWithLeader(jsm, EVENTS_STREAM);
}
