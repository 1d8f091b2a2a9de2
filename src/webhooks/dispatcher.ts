import { randomUUID } from 'node:crypto';
import { EVENT_COLUMNS, envelopeJson, type EventRow } from '../events/envelope.js';
import { chainSubtrees, compileFilter, type EventFilter } from '../events/filters.js';
import { visibleTo } from '../events/read.js';
import { LocationStatements } from '../locations/store.js';
import { shardFile } from '../shards/writer.js';
import { openDatabase, type Db } from '../storage/sqlite.js';
import { formatTimestamp } from '../wire/timestamps.js';
import { AddressPolicy } from './addresses.js';
import type { Attempt, EndpointProgress } from './commands.js';
import { decryptSecret, secretsKey, signatureHeader } from './secrets.js';
import { Sender, type SendOutcome } from './send.js';
import { parseFilters, parseSecrets, parseTypes, type WebhookRow } from './store.js';

export interface WebhookSettings {
  /** WEBHOOK_ALLOWED_CIDRS: ranges allowed although private, loopback or link-local. */
  allowedCidrs?: string;
  /** WEBHOOK_RETRY_WINDOW_SECONDS in ms: an event failing this long pauses its endpoint. */
  retryWindowMs: number;
  /** The first retry's delay and the most any one waits (before jitter): doubled per failed attempt. */
  retryFirstMs: number;
  retryMaxMs: number;
  /** WEBHOOK_TIMEOUT_MS: the deadline of one attempt (connect, answer and body). */
  timeoutMs: number;
  /** How long successes wait to be recorded together (failures are recorded at once). */
  flushEveryMs?: number;
}

/** Events read per step of an endpoint's cursor. */
const STEP = 256;
/** Successes recorded in one command at most (beyond it, recorded without waiting for the timer). */
const FLUSH_AT = 512;

interface OneOffRequest {
  id: number;
  kind: 'test' | 'redelivery';
  message_id: string;
  event_seq: number | null;
}

/** An endpoint as the dispatcher runs it: its settings, its position in memory, what is not yet recorded. */
interface Endpoint {
  row: WebhookRow;
  filter: EventFilter;
  scopes: Set<string>;
  cursor: number;
  epoch: number;
  failingSince: number | null;
  attempts: number;
  pause?: 'gone' | 'retry_window';
  busy: boolean;
  /** Retry timer of the failing event (none: not waiting). */
  retry?: NodeJS.Timeout;
  log: Attempt[];
  done: number[];
  lastRequest: number;
  /**
   * Whether a one-off request (test, redelivery) may be waiting: set at every settings load (each
   * webhooks command but progress loads them, and those commands are what add requests), cleared
   * once the table has none left. Asking the table before each delivery cost as much as signing it.
   */
  requestsWanted: boolean;
  dirty: boolean;
  gone: boolean;
  /** Events read ahead of the cursor (in sequence order, all after it), taken from the front. */
  ahead: EventRow[];
}

/** Delay before the next attempt after `attempts` failures: doubling from `first` up to `max`, the upper half jittered. */
export function retryDelay(attempts: number, first: number, max: number, random = Math.random): number {
  const base = Math.min(max, first * 2 ** Math.min(30, attempts - 1));
  return Math.round(base / 2 + (random() * base) / 2);
}

/** `Retry-After` in ms from now (delay-seconds or an HTTP date), or 0 when absent or unreadable. */
export function retryAfterMs(value: string | undefined, now: number): number {
  if (value === undefined) return 0;
  if (/^\d+$/.test(value.trim())) return Number(value.trim()) * 1000;
  const at = Date.parse(value);
  return Number.isNaN(at) ? 0 : Math.max(0, at - now);
}

/**
 * Delivers a shard's event log to the webhooks of its organizations, beside the shard's actor (on
 * its thread, wherever the shard runs). Driven by the log and the rows, not by in-memory hooks of
 * the write path: at start and on every wake it reads, per endpoint, the events after its cursor
 * on a read-only connection (committed rows only).
 *
 * Per endpoint: one attempt at a time, in sequence order; the cursor moves past an event only after
 * a 2xx (or when the event does not match), and is recorded in the shard (a `webhooks.progress`
 * command, successes batched): a crash re-sends at most what was not recorded yet (at least once).
 * A failure waits (doubling delay, jitter, at least `Retry-After`) and tries the same event again;
 * a 410, or a failure after the retry window, pauses the endpoint at that event.
 */
export class WebhookDispatcher {
  private readonly endpoints = new Map<number, Endpoint>();
  private readonly statements;
  private readonly locations: LocationStatements;
  private readonly sender: Sender;
  private readonly plain = new Map<string, string>();
  private stopped = false;
  private flushTimer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> | undefined;
  private reloadWanted = true;

  private constructor(
    private readonly reader: Db,
    private readonly key: Buffer,
    private readonly settings: WebhookSettings,
    private readonly submit: (items: EndpointProgress[]) => Promise<void>,
  ) {
    this.statements = {
      webhooks: reader.prepare('SELECT * FROM webhooks ORDER BY id'),
      after: reader.prepare(`SELECT ${EVENT_COLUMNS} FROM events WHERE org_id = ? AND seq > ? ORDER BY seq LIMIT ?`),
      event: reader.prepare(`SELECT ${EVENT_COLUMNS} FROM events WHERE org_id = ? AND seq = ?`),
      request: reader.prepare(
        'SELECT id, kind, message_id, event_seq FROM webhook_requests WHERE webhook_id = ? AND id > ? ORDER BY id LIMIT 1',
      ),
    };
    this.locations = new LocationStatements(reader);
    this.sender = new Sender(new AddressPolicy(settings.allowedCidrs), settings.timeoutMs);
  }

  static async start(
    dataDir: string,
    index: number,
    settings: WebhookSettings,
    submit: (items: EndpointProgress[]) => Promise<void>,
  ): Promise<WebhookDispatcher> {
    const key = await secretsKey(dataDir);
    const dispatcher = new WebhookDispatcher(openDatabase(shardFile(dataDir, index), { readonly: true }), key, settings, submit);
    dispatcher.wake();
    return dispatcher;
  }

  /** Endpoint settings changed (an API command committed): read them again before the next step. */
  reload(): void {
    this.reloadWanted = true;
    this.wake();
  }

  /** Something committed (new events perhaps): every idle endpoint looks after its cursor. */
  wake(): void {
    if (this.stopped) return;
    if (this.reloadWanted) this.load();
    for (const endpoint of this.endpoints.values()) if (!endpoint.busy) void this.run(endpoint);
  }

  private load(): void {
    this.reloadWanted = false;
    const seen = new Set<number>();
    for (const row of this.statements.webhooks.all() as WebhookRow[]) {
      seen.add(row.id);
      const filters = parseFilters(row);
      // Settings may have changed (types, filters, scopes): compiled again, and what was read ahead is judged again.
      const filter = compileFilter(
        { types: parseTypes(row), assetIds: filters.asset_ids, locationId: filters.location_id },
        chainSubtrees(this.locations, row.org_id),
      );
      let endpoint = this.endpoints.get(row.id);
      if (endpoint === undefined) {
        endpoint = {
          row,
          filter,
          scopes: new Set(),
          cursor: row.cursor,
          epoch: row.cursor_epoch,
          failingSince: row.failing_since,
          attempts: row.attempts,
          busy: false,
          log: [],
          done: [],
          lastRequest: 0,
          requestsWanted: true,
          dirty: false,
          gone: false,
          ahead: [],
        };
        this.endpoints.set(row.id, endpoint);
      } else if (row.cursor_epoch !== endpoint.epoch) {
        // A replay or a resume moved the cursor: start over from the recorded position.
        clearTimeout(endpoint.retry);
        endpoint.retry = undefined;
        endpoint.cursor = row.cursor;
        endpoint.epoch = row.cursor_epoch;
        endpoint.failingSince = row.failing_since;
        endpoint.attempts = row.attempts;
        endpoint.pause = undefined;
      }
      endpoint.ahead = [];
      endpoint.requestsWanted = true;
      endpoint.row = row;
      endpoint.filter = filter;
      endpoint.scopes = new Set(JSON.parse(row.scopes) as string[]);
    }
    for (const [id, endpoint] of this.endpoints)
      if (!seen.has(id)) {
        clearTimeout(endpoint.retry);
        endpoint.gone = true;
        this.endpoints.delete(id);
      }
  }

  private active(endpoint: Endpoint): boolean {
    return !endpoint.gone && endpoint.row.status === 'active' && endpoint.pause === undefined;
  }

  private async run(endpoint: Endpoint): Promise<void> {
    endpoint.busy = true;
    try {
      while (!this.stopped && !endpoint.gone) {
        if (endpoint.requestsWanted) {
          const request = this.statements.request.get(endpoint.row.id, endpoint.lastRequest) as OneOffRequest | undefined;
          if (request !== undefined) {
            await this.sendOneOff(endpoint, request);
            continue;
          }
          endpoint.requestsWanted = false;
        }
        if (!this.active(endpoint) || endpoint.retry !== undefined) break;
        if (endpoint.ahead.length === 0 || endpoint.ahead[0]!.seq <= endpoint.cursor) {
          endpoint.ahead = this.statements.after.all(endpoint.row.org_id, endpoint.cursor, STEP) as EventRow[];
          if (endpoint.ahead.length === 0) break;
        }
        const next = endpoint.ahead.shift()!;
        if (!this.wanted(endpoint, next)) {
          this.advance(endpoint, next.seq);
          continue;
        }
        if (!(await this.deliver(endpoint, next))) {
          endpoint.ahead = [];
          break;
        }
      }
    } finally {
      endpoint.busy = false;
    }
  }

  private wanted(endpoint: Endpoint, row: EventRow): boolean {
    return visibleTo(endpoint.scopes, row) && endpoint.filter.matches(row);
  }

  private advance(endpoint: Endpoint, seq: number): void {
    endpoint.cursor = seq;
    endpoint.dirty = true;
    this.flushSoon(false);
  }

  private secretsAt(endpoint: Endpoint, now: number): string[] {
    return parseSecrets(endpoint.row)
      .filter((s) => s.expires_at === null || s.expires_at > now)
      .map((s) => {
        let plain = this.plain.get(s.enc);
        if (plain === undefined) {
          plain = decryptSecret(this.key, endpoint.row.org_id, s.enc);
          this.plain.set(s.enc, plain);
        }
        return plain;
      });
  }

  private post(endpoint: Endpoint, messageId: string, body: string): { at: number; sending: Promise<SendOutcome> } {
    const at = Date.now();
    const timestamp = Math.floor(at / 1000);
    const headers = {
      'user-agent': 'trackd-webhooks',
      'webhook-id': messageId,
      'webhook-timestamp': String(timestamp),
      'webhook-signature': signatureHeader(this.secretsAt(endpoint, at), messageId, timestamp, body),
    };
    return { at, sending: this.sender.send(endpoint.row.url, headers, body) };
  }

  private logAttempt(
    endpoint: Endpoint,
    attempt: Omit<Attempt, 'status' | 'error' | 'latency_ms' | 'response_excerpt'>,
    o: SendOutcome,
  ): void {
    endpoint.log.push({ ...attempt, status: o.status, error: o.error, latency_ms: o.latencyMs, response_excerpt: o.excerpt });
    endpoint.dirty = true;
  }

  /** One attempt of the event after the cursor; true when it succeeded (go on), false when the endpoint now waits or paused. */
  private async deliver(endpoint: Endpoint, row: EventRow): Promise<boolean> {
    const epoch = endpoint.epoch;
    const { at, sending } = this.post(endpoint, row.id, envelopeJson(row));
    const outcome = await sending;
    const ok = outcome.status !== null && outcome.status >= 200 && outcome.status < 300;
    this.logAttempt(
      endpoint,
      { kind: 'event', message_id: row.id, event_seq: row.seq, event_type: row.type, attempt: endpoint.attempts + 1, attempted_at: at },
      outcome,
    );
    if (endpoint.gone || endpoint.epoch !== epoch) {
      // The cursor was moved (replay, resume) while this attempt ran: its outcome is logged, nothing else.
      this.flushSoon(true);
      return false;
    }
    if (ok) {
      endpoint.failingSince = null;
      endpoint.attempts = 0;
      this.advance(endpoint, row.seq);
      return true;
    }
    endpoint.attempts += 1;
    endpoint.failingSince ??= at;
    const now = Date.now();
    if (outcome.status === 410) endpoint.pause = 'gone';
    else if (now - endpoint.failingSince >= this.settings.retryWindowMs) endpoint.pause = 'retry_window';
    else {
      const { retryFirstMs, retryMaxMs, retryWindowMs } = this.settings;
      const windowLeft = endpoint.failingSince + retryWindowMs - now;
      const asked = Math.min(retryAfterMs(outcome.retryAfter, now), Math.max(0, windowLeft));
      const delay = Math.max(retryDelay(endpoint.attempts, retryFirstMs, retryMaxMs), asked);
      endpoint.retry = setTimeout(() => {
        endpoint.retry = undefined;
        if (!endpoint.busy) void this.run(endpoint);
      }, delay);
    }
    this.flushSoon(true);
    return false;
  }

  private async sendOneOff(endpoint: Endpoint, request: OneOffRequest): Promise<void> {
    endpoint.lastRequest = request.id;
    let body: string;
    let type = 'webhook.test';
    if (request.kind === 'test') {
      body = JSON.stringify({
        id: request.message_id,
        type,
        org_id: endpoint.row.org_id,
        occurred_at: formatTimestamp(Date.now()),
        data: { webhook_id: endpoint.row.id },
      });
    } else {
      const row = this.statements.event.get(endpoint.row.org_id, request.event_seq) as EventRow | undefined;
      if (row === undefined) {
        endpoint.done.push(request.id);
        endpoint.dirty = true;
        this.flushSoon(true);
        return;
      }
      body = envelopeJson(row);
      type = row.type;
    }
    const { at, sending } = this.post(endpoint, request.message_id, body);
    const outcome = await sending;
    this.logAttempt(
      endpoint,
      { kind: request.kind, message_id: request.message_id, event_seq: request.event_seq, event_type: type, attempt: 1, attempted_at: at },
      outcome,
    );
    endpoint.done.push(request.id);
    this.flushSoon(true);
  }

  /** Records what is not yet recorded: at once (failures, one-off sends) or after a short wait that gathers successes. */
  private flushSoon(now: boolean): void {
    if (this.stopped && !now) return;
    const pendingLog = [...this.endpoints.values()].reduce((n, e) => n + e.log.length, 0);
    if (now || pendingLog >= FLUSH_AT) {
      clearTimeout(this.flushTimer);
      this.flushTimer = undefined;
      void this.flush();
      return;
    }
    this.flushTimer ??= setTimeout(() => {
      this.flushTimer = undefined;
      void this.flush();
    }, this.settings.flushEveryMs ?? 50);
  }

  private async flush(): Promise<void> {
    while (this.flushing !== undefined) await this.flushing;
    const items: EndpointProgress[] = [];
    for (const e of this.endpoints.values()) {
      if (!e.dirty) continue;
      items.push({
        id: e.row.id,
        epoch: e.epoch,
        cursor: e.cursor,
        failingSince: e.failingSince,
        attempts: e.attempts,
        pause: e.pause,
        log: e.log,
        done: e.done,
      });
      e.log = [];
      e.done = [];
      e.dirty = false;
    }
    if (items.length === 0) return;
    this.flushing = this.submit(items).catch(() => undefined);
    try {
      await this.flushing;
    } finally {
      this.flushing = undefined;
    }
  }

  /** Position of an endpoint in memory (tests, bench). */
  cursorOf(id: number): number | undefined {
    return this.endpoints.get(id)?.cursor;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.flushTimer);
    for (const e of this.endpoints.values()) clearTimeout(e.retry);
    // An attempt in flight may still finish within its deadline; what it leaves unrecorded is sent again at the next start.
    const deadline = Date.now() + 2_000;
    while ([...this.endpoints.values()].some((e) => e.busy) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
    await this.flush();
    this.sender.close();
    this.reader.close();
  }
}

/** A new message id for a test delivery. */
export const testMessageId = () => `msg_test_${randomUUID()}`;
