import type { Db } from '../storage/sqlite.js';
import { LAST_SEQ_SQL } from '../events/log.js';
import { formatTimestamp } from '../wire/timestamps.js';
import type { StoredSecret } from './secrets.js';
import type { DeliveryView, WebhookFilters, WebhookView } from './schemas.js';

/** A webhooks row as stored (migration 014). */
export interface WebhookRow {
  id: number;
  org_id: number;
  url: string;
  description: string | null;
  event_types: string;
  filters: string;
  scopes: string;
  secrets: string;
  status: 'active' | 'paused';
  paused_reason: 'gone' | 'retry_window' | 'manual' | null;
  cursor: number;
  cursor_epoch: number;
  failing_since: number | null;
  attempts: number;
  created_at: number;
  updated_at: number;
}

export interface DeliveryRow {
  id: number;
  webhook_id: number;
  kind: 'event' | 'test' | 'redelivery';
  message_id: string;
  event_seq: number | null;
  event_type: string;
  attempt: number;
  attempted_at: number;
  status: number | null;
  error: string | null;
  latency_ms: number;
  response_excerpt: string | null;
}

export const parseSecrets = (row: WebhookRow) => JSON.parse(row.secrets) as StoredSecret[];
export const parseFilters = (row: WebhookRow) => JSON.parse(row.filters) as WebhookFilters;
export const parseTypes = (row: WebhookRow) => JSON.parse(row.event_types) as string[];

export function webhookView(row: WebhookRow): WebhookView {
  return {
    id: row.id,
    url: row.url,
    description: row.description,
    event_types: parseTypes(row) as WebhookView['event_types'],
    filters: parseFilters(row),
    status: row.status,
    paused_reason: row.paused_reason,
    last_delivered_seq: row.cursor,
    failing_since: row.failing_since === null ? null : formatTimestamp(row.failing_since),
    failed_attempts: row.attempts,
    created_at: formatTimestamp(row.created_at),
    updated_at: formatTimestamp(row.updated_at),
  };
}

export function deliveryView(row: DeliveryRow): DeliveryView {
  return {
    id: row.id,
    kind: row.kind,
    message_id: row.message_id,
    event_seq: row.event_seq,
    event_type: row.event_type,
    attempt: row.attempt,
    attempted_at: formatTimestamp(row.attempted_at),
    status: row.status,
    error: row.error,
    latency_ms: row.latency_ms,
    response_excerpt: row.response_excerpt,
  };
}

/** Reads of webhook rows, on any connection (an HTTP thread's reader, the dispatcher's, the writer's). */
export function webhookReads(db: Db) {
  return {
    byId: db.prepare('SELECT * FROM webhooks WHERE org_id = ? AND id = ?'),
    ofOrg: db.prepare('SELECT * FROM webhooks WHERE org_id = ? ORDER BY id'),
    countOfOrg: db.prepare('SELECT count(*) FROM webhooks WHERE org_id = ?').pluck(),
    deliveries: db.prepare('SELECT * FROM webhook_deliveries WHERE webhook_id = ? AND id < ? ORDER BY id DESC LIMIT ?'),
    delivery: db.prepare('SELECT * FROM webhook_deliveries WHERE webhook_id = ? AND id = ?'),
    // The org's sequence so far, also inside a round (the writer's webhook commands).
    head: db.prepare(LAST_SEQ_SQL).pluck(),
    oldest: db.prepare('SELECT min(seq) FROM events WHERE org_id = ?').pluck(),
  };
}
export type WebhookReads = ReturnType<typeof webhookReads>;
