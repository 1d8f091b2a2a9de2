import { ApiError, fieldError } from '../errors/catalog.js';
import { shardCommand } from '../shards/commands.js';
import { shardState } from '../shards/state.js';
import type { ShardWriter } from '../shards/writer.js';
import { MAX_WEBHOOKS_PER_ORG, type WebhookFilters, type WebhookView } from './schemas.js';
import type { StoredSecret } from './secrets.js';
import { parseSecrets, webhookReads, webhookView, type DeliveryRow, type WebhookRow } from './store.js';

/**
 * Webhook writes, each one recorded shard command. The API's (create, patch, delete, rotate,
 * replay, ask for a one-off send) carry what they decided on the HTTP thread (the encrypted
 * secret, the key's scopes); the dispatcher's progress carries each attempt's outcome, so that a
 * replay of the records writes the same rows and the cursors travel with the shard.
 */

/** Attempts kept in the delivery log per endpoint (the oldest dropped first). */
export const DELIVERY_LOG_KEPT = 1000;
/** One-off sends (tests, redeliveries) that may wait per endpoint. */
export const MAX_PENDING_REQUESTS = 100;

const statements = shardState((shard: ShardWriter) => {
  const db = shard.writer;
  return {
    ...webhookReads(db),
    location: db.prepare('SELECT 1 FROM locations WHERE org_id = ? AND id = ? AND deleted_at IS NULL').pluck(),
    insert: db.prepare(
      `INSERT INTO webhooks (id, org_id, url, description, event_types, filters, scopes, secrets, status, cursor, created_at, updated_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'active', ?, ?, ?)`,
    ),
    settings: db.prepare(
      `UPDATE webhooks SET url = ?, description = ?, event_types = ?, filters = ?, scopes = ?, updated_at = ? WHERE id = ?`,
    ),
    status: db.prepare(
      `UPDATE webhooks SET status = ?, paused_reason = ?, failing_since = NULL, attempts = 0, cursor_epoch = cursor_epoch + ?, updated_at = ?
       WHERE id = ?`,
    ),
    secrets: db.prepare('UPDATE webhooks SET secrets = ?, updated_at = ? WHERE id = ?'),
    replay: db.prepare(
      'UPDATE webhooks SET cursor = ?, cursor_epoch = cursor_epoch + 1, failing_since = NULL, attempts = 0, updated_at = ? WHERE id = ?',
    ),
    remove: db.prepare('DELETE FROM webhooks WHERE id = ?'),
    removeDeliveries: db.prepare('DELETE FROM webhook_deliveries WHERE webhook_id = ?'),
    removeRequests: db.prepare('DELETE FROM webhook_requests WHERE webhook_id = ?'),
    pending: db.prepare('SELECT count(*) FROM webhook_requests WHERE webhook_id = ?').pluck(),
    request: db.prepare('INSERT INTO webhook_requests (webhook_id, kind, message_id, event_seq, created_at) VALUES (?, ?, ?, ?, ?)'),
    requestDone: db.prepare('DELETE FROM webhook_requests WHERE id = ?'),
    eventHeld: db.prepare('SELECT 1 FROM events WHERE org_id = ? AND seq = ?').pluck(),
    progress: db.prepare('UPDATE webhooks SET cursor = ?, failing_since = ?, attempts = ? WHERE id = ? AND cursor_epoch = ?'),
    pause: db.prepare(
      `UPDATE webhooks SET status = 'paused', paused_reason = ?, updated_at = ? WHERE id = ? AND cursor_epoch = ? AND status = 'active'`,
    ),
    logAttempt: db.prepare(
      `INSERT INTO webhook_deliveries (webhook_id, kind, message_id, event_seq, event_type, attempt, attempted_at, status, error, latency_ms, response_excerpt)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    ),
    trimLog: db.prepare(
      `DELETE FROM webhook_deliveries WHERE webhook_id = ? AND id <= (
         SELECT id FROM webhook_deliveries WHERE webhook_id = ? ORDER BY id DESC LIMIT 1 OFFSET ${DELIVERY_LOG_KEPT})`,
    ),
    exists: db.prepare('SELECT 1 FROM webhooks WHERE id = ?').pluck(),
  };
});

type Statements = ReturnType<typeof statements>;

function ownRow(s: Statements, orgId: number, id: number): WebhookRow {
  const row = s.byId.get(orgId, id) as WebhookRow | undefined;
  if (row === undefined) throw new ApiError('not_found', `webhook ${id} not found`);
  return row;
}

function checkLocation(s: Statements, orgId: number, filters: WebhookFilters): void {
  if (filters.location_id !== undefined && s.location.get(orgId, filters.location_id) === undefined)
    throw ApiError.validation([
      fieldError('filters.location_id', 'fk_not_found', `location ${filters.location_id} does not exist`, { value: filters.location_id }),
    ]);
}

/** The org's head, and 410 when `after` is older than the oldest event held (like the events cursor). */
function checkCursor(s: Statements, orgId: number, after: number, field: string): void {
  const head = (s.head.get(orgId) as number | undefined) ?? 0;
  if (after > head)
    throw ApiError.validation([
      fieldError(field, 'too_large', `${field} must not be past the organization's last sequence (${head})`, { max: head }),
    ]);
  const oldest = (s.oldest.get(orgId) as number | null) ?? head + 1;
  if (after + 1 < oldest)
    throw new ApiError(
      'cursor_expired',
      `events after ${after} are no longer held (retention); the oldest available event is ${oldest}: use after=${oldest - 1} or later`,
      { headers: { 'Trackd-Oldest-Seq': String(oldest) } },
    );
}

const view = (s: Statements, orgId: number, id: number): WebhookView => webhookView(ownRow(s, orgId, id));

export interface WebhookSettingsArgs {
  url: string;
  description: string | null;
  eventTypes: string[];
  filters: WebhookFilters;
  /** The event scopes of the key that set the event types: deliveries carry only events those show. */
  scopes: string[];
}

export const createWebhook = shardCommand(
  'webhooks.create',
  (shard, a: WebhookSettingsArgs & { orgId: number; secret: string; after: number | undefined }): WebhookView => {
    const s = statements(shard);
    if ((s.countOfOrg.get(a.orgId) as number) >= MAX_WEBHOOKS_PER_ORG)
      throw ApiError.conflict(`an organization may register at most ${MAX_WEBHOOKS_PER_ORG} webhooks; delete one first`);
    checkLocation(s, a.orgId, a.filters);
    const head = (s.head.get(a.orgId) as number | undefined) ?? 0;
    if (a.after !== undefined) checkCursor(s, a.orgId, a.after, 'after');
    const id = shard.nextId('webhook');
    const secrets: StoredSecret[] = [{ enc: a.secret, expires_at: null }];
    s.insert.run(
      id,
      a.orgId,
      a.url,
      a.description,
      JSON.stringify(a.eventTypes),
      JSON.stringify(a.filters),
      JSON.stringify(a.scopes),
      JSON.stringify(secrets),
      a.after ?? head,
      shard.now,
      shard.now,
    );
    return view(s, a.orgId, id);
  },
  'scans',
);

export const patchWebhook = shardCommand(
  'webhooks.patch',
  (shard, a: Partial<WebhookSettingsArgs> & { orgId: number; id: number; status?: 'active' | 'paused' }): WebhookView => {
    const s = statements(shard);
    const row = ownRow(s, a.orgId, a.id);
    const filters = a.filters ?? (JSON.parse(row.filters) as WebhookFilters);
    checkLocation(s, a.orgId, filters);
    s.settings.run(
      a.url ?? row.url,
      a.description === undefined ? row.description : a.description,
      a.eventTypes === undefined ? row.event_types : JSON.stringify(a.eventTypes),
      JSON.stringify(filters),
      a.scopes === undefined ? row.scopes : JSON.stringify(a.scopes),
      shard.now,
      a.id,
    );
    if (a.status === 'paused' && row.status === 'active') s.status.run('paused', 'manual', 0, shard.now, a.id);
    // Resuming starts a new run at the cursor: the failure count restarts, the dispatcher reloads its position.
    if (a.status === 'active' && row.status === 'paused') s.status.run('active', null, 1, shard.now, a.id);
    return view(s, a.orgId, a.id);
  },
  'scans',
);

export const deleteWebhook = shardCommand(
  'webhooks.delete',
  (shard, a: { orgId: number; id: number }): void => {
    const s = statements(shard);
    ownRow(s, a.orgId, a.id);
    s.remove.run(a.id);
    s.removeDeliveries.run(a.id);
    s.removeRequests.run(a.id);
  },
  'scans',
);

export const rotateSecret = shardCommand(
  'webhooks.rotateSecret',
  (shard, a: { orgId: number; id: number; secret: string; previousValidMs: number }): void => {
    const s = statements(shard);
    const row = ownRow(s, a.orgId, a.id);
    const until = shard.now + a.previousValidMs;
    const kept = parseSecrets(row)
      .map((old) => ({ enc: old.enc, expires_at: old.expires_at === null ? until : Math.min(old.expires_at, until) }))
      .filter((old) => old.expires_at > shard.now);
    s.secrets.run(JSON.stringify([{ enc: a.secret, expires_at: null }, ...kept.slice(0, 4)]), shard.now, a.id);
  },
  'scans',
);

export const replayWebhook = shardCommand(
  'webhooks.replay',
  (shard, a: { orgId: number; id: number; after: number }): WebhookView => {
    const s = statements(shard);
    ownRow(s, a.orgId, a.id);
    checkCursor(s, a.orgId, a.after, 'after');
    s.replay.run(a.after, shard.now, a.id);
    return view(s, a.orgId, a.id);
  },
  'scans',
);

/** A one-off send: a test event (`messageId` new), or a redelivery of a logged attempt's message. */
export const requestSend = shardCommand(
  'webhooks.requestSend',
  (shard, a: { orgId: number; id: number; kind: 'test' | 'redelivery'; messageId: string; deliveryId?: number }): string => {
    const s = statements(shard);
    ownRow(s, a.orgId, a.id);
    if ((s.pending.get(a.id) as number) >= MAX_PENDING_REQUESTS)
      throw ApiError.conflict(`webhook ${a.id} already has ${MAX_PENDING_REQUESTS} sends waiting; try again when they are made`);
    let messageId = a.messageId;
    let seq: number | null = null;
    if (a.kind === 'redelivery') {
      const logged = s.delivery.get(a.id, a.deliveryId) as DeliveryRow | undefined;
      if (logged === undefined) throw new ApiError('not_found', `delivery ${a.deliveryId} of webhook ${a.id} not found`);
      messageId = logged.message_id;
      seq = logged.event_seq;
      if (seq !== null && s.eventHeld.get(a.orgId, seq) === undefined)
        throw new ApiError('cursor_expired', `event ${seq} is no longer held (retention): it cannot be delivered again`);
    }
    s.request.run(a.id, a.kind, messageId, seq, shard.now);
    return messageId;
  },
  'scans',
);

/** One attempt as the dispatcher logs it. */
export type Attempt = Omit<DeliveryRow, 'id' | 'webhook_id'>;

export interface EndpointProgress {
  id: number;
  /** The cursor epoch the dispatcher worked under: a replay or resume since makes its cursor and failure state moot. */
  epoch: number;
  cursor: number;
  failingSince: number | null;
  attempts: number;
  pause?: 'gone' | 'retry_window';
  log: Attempt[];
  /** One-off requests made (their rows removed). */
  done: number[];
}

/** The dispatcher's progress for several endpoints at once (its batches of successes, each failure at once). */
export const recordProgress = shardCommand(
  'webhooks.progress',
  (shard, { items }: { items: EndpointProgress[] }): void => {
    const s = statements(shard);
    for (const p of items) {
      for (const request of p.done) s.requestDone.run(request);
      if (s.exists.get(p.id) === undefined) continue;
      s.progress.run(p.cursor, p.failingSince, p.attempts, p.id, p.epoch);
      if (p.pause !== undefined) s.pause.run(p.pause, shard.now, p.id, p.epoch);
      for (const a of p.log)
        s.logAttempt.run(
          p.id,
          a.kind,
          a.message_id,
          a.event_seq,
          a.event_type,
          a.attempt,
          a.attempted_at,
          a.status,
          a.error,
          a.latency_ms,
          a.response_excerpt,
        );
      if (p.log.length > 0) s.trimLog.run(p.id, p.id);
    }
  },
  'scans',
);
