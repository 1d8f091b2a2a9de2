import { ApiError, fieldError, type FieldError } from '../errors/catalog.js';
import { EVENT_SCOPES, scopeOf } from '../events/types.js';
import type { RequestContext, Route } from '../http/route.js';
import { DataEnvelope } from '../masterdata/fields.js';
import type { Services } from '../services.js';
import type { Shard } from '../shards/shard.js';
import { shardState } from '../shards/state.js';
import { AddressPolicy } from './addresses.js';
import {
  createWebhook,
  deleteWebhook,
  patchWebhook,
  replayWebhook,
  requestSend,
  rotateSecret,
  type WebhookSettingsArgs,
} from './commands.js';
import { testMessageId } from './dispatcher.js';
import {
  CreateWebhookBody,
  DeliveryList,
  PatchWebhookBody,
  ReplayBody,
  RotateSecretBody,
  NoFieldsBody,
  SecretEnvelope,
  SendAccepted,
  WebhookCreated,
  WebhookList,
  WebhookView,
  type WebhookFilters,
} from './schemas.js';
import { encryptSecret, newSecret, secretsKey } from './secrets.js';
import { deliveryView, webhookReads, webhookView, type DeliveryRow, type WebhookRow } from './store.js';

const READ = ['webhooks:read'];
const WRITE = ['webhooks:write'];
const TAG = 'Webhooks';
const COLLECTION = '/api/v1/webhooks';
const ITEM = `${COLLECTION}/{webhook_id}`;
const DEFAULT_PREVIOUS_VALID_SECONDS = 86_400;

const reads = shardState((shard: Shard) => webhookReads(shard.reader));

function ownRow(ctx: RequestContext): WebhookRow {
  const id = ctx.params.webhook_id!;
  const row = reads(ctx.shard).byId.get(ctx.principal.orgId, id) as WebhookRow | undefined;
  if (row === undefined) throw new ApiError('not_found', `webhook ${id} not found`);
  return row;
}

/** A receiver URL's own problems (scheme, user info), before its address is judged. */
function urlErrors(body: Record<string, unknown>): FieldError[] {
  if (typeof body.url !== 'string') return [];
  let url: URL;
  try {
    url = new URL(body.url);
  } catch {
    return [fieldError('url', 'invalid_value', 'url must be an absolute http or https URL')];
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return [fieldError('url', 'invalid_value', 'url must use http or https')];
  if (url.username !== '' || url.password !== '') return [fieldError('url', 'invalid_value', 'url must not carry user info')];
  return [];
}

/**
 * The scopes the key lends the endpoint: its event scopes. Each type subscribed must be visible
 * with them (a webhooks:write key cannot subscribe to what it may not read).
 */
function lentScopes(ctx: RequestContext, types: readonly string[]): string[] {
  const scopes = EVENT_SCOPES.filter((s) => ctx.principal.scopes.has(s));
  for (const type of types) {
    const needs = type.startsWith('tag.') ? ['assets:read', 'locations:read'] : [scopeOf(type, {})];
    if (!needs.some((s) => scopes.includes(s)))
      throw new ApiError('forbidden', `This API key lacks the required scope for ${type} events: ${needs.join(' or ')}`);
  }
  return scopes;
}

export function webhookRoutes(services: Services): Route[] {
  // Built at the first request: building the routes reads no service (the client generator builds them without any).
  let policy: AddressPolicy | undefined;
  let key: Promise<Buffer> | undefined;
  const encrypt = async (orgId: number, secret: string) =>
    encryptSecret(await (key ??= secretsKey(services.config.DATA_DIR)), orgId, secret);
  const checkAddress = async (url: string) => {
    policy ??= new AddressPolicy(services.config.WEBHOOK_ALLOWED_CIDRS);
    const refusal = await policy.hostRefusal(new URL(url).hostname);
    if (refusal !== undefined) throw ApiError.validation([fieldError('url', 'invalid_value', `url refused: ${refusal}`)]);
  };
  const settingsOf = (ctx: RequestContext): Partial<WebhookSettingsArgs> => {
    const b = ctx.body;
    const types = b.event_types as string[] | undefined;
    return {
      url: b.url as string | undefined,
      description: b.description as string | null | undefined,
      eventTypes: types,
      filters: b.filters as WebhookFilters | undefined,
      scopes: types === undefined ? undefined : lentScopes(ctx, types),
    };
  };

  return [
    {
      method: 'GET',
      path: COLLECTION,
      operationId: 'listWebhooks',
      summary: "The organization's webhook endpoints",
      tag: TAG,
      scopes: READ,
      responses: { 200: { description: 'Every endpoint of the organization, by id', schema: WebhookList } },
      handler: (ctx) => ({
        status: 200,
        body: { data: (reads(ctx.shard).ofOrg.all(ctx.principal.orgId) as WebhookRow[]).map(webhookView) },
      }),
    },
    {
      method: 'POST',
      path: COLLECTION,
      operationId: 'createWebhook',
      summary: 'Register a webhook endpoint (its signing secret is in the answer, once)',
      tag: TAG,
      scopes: WRITE,
      body: { schema: CreateWebhookBody, contentType: 'application/json', check: urlErrors },
      responses: {
        201: { description: 'The endpoint and its secret', schema: WebhookCreated },
        409: { description: 'The organization has the most endpoints allowed' },
      },
      handler: async (ctx) => {
        const settings = settingsOf(ctx) as WebhookSettingsArgs;
        await checkAddress(settings.url);
        const secret = newSecret();
        const view = await ctx.shard.send(createWebhook, {
          ...settings,
          description: settings.description ?? null,
          filters: settings.filters ?? {},
          orgId: ctx.principal.orgId,
          secret: await encrypt(ctx.principal.orgId, secret),
          after: ctx.body.after as number | undefined,
        });
        return { status: 201, body: { data: { ...view, secret } }, headers: { Location: `${COLLECTION}/${view.id}` } };
      },
    },
    {
      method: 'GET',
      path: ITEM,
      operationId: 'getWebhook',
      summary: 'A webhook endpoint',
      tag: TAG,
      scopes: READ,
      responses: { 200: { description: 'The endpoint', schema: DataEnvelope(WebhookView) } },
      handler: (ctx) => ({ status: 200, body: { data: webhookView(ownRow(ctx)) } }),
    },
    {
      method: 'PATCH',
      path: ITEM,
      operationId: 'updateWebhook',
      summary: 'Merge-patch an endpoint: URL, description, event types, filters, status (`active` resumes a paused endpoint)',
      tag: TAG,
      scopes: WRITE,
      body: { schema: PatchWebhookBody, contentType: 'application/merge-patch+json', check: urlErrors },
      responses: { 200: { description: 'The endpoint', schema: DataEnvelope(WebhookView) } },
      handler: async (ctx) => {
        const settings = settingsOf(ctx);
        if (settings.url !== undefined) await checkAddress(settings.url);
        const args = {
          ...settings,
          orgId: ctx.principal.orgId,
          id: ctx.params.webhook_id!,
          status: ctx.body.status as 'active' | 'paused' | undefined,
        };
        return { status: 200, body: { data: await ctx.shard.send(patchWebhook, args) } };
      },
    },
    {
      method: 'DELETE',
      path: ITEM,
      operationId: 'deleteWebhook',
      summary: 'Delete an endpoint and its delivery log',
      tag: TAG,
      scopes: WRITE,
      responses: { 204: { description: 'Deleted' } },
      handler: async (ctx) => {
        await ctx.shard.send(deleteWebhook, { orgId: ctx.principal.orgId, id: ctx.params.webhook_id! });
        return { status: 204 };
      },
    },
    {
      method: 'POST',
      path: `${ITEM}/rotate-secret`,
      operationId: 'rotateWebhookSecret',
      summary: 'A new signing secret; the previous one keeps signing beside it for a while (both signatures sent)',
      tag: TAG,
      scopes: WRITE,
      body: { schema: RotateSecretBody, contentType: 'application/json' },
      responses: { 200: { description: 'The new secret, shown this once', schema: SecretEnvelope } },
      handler: async (ctx) => {
        const secret = newSecret();
        const seconds = (ctx.body.previous_valid_for_seconds as number | undefined) ?? DEFAULT_PREVIOUS_VALID_SECONDS;
        await ctx.shard.send(rotateSecret, {
          orgId: ctx.principal.orgId,
          id: ctx.params.webhook_id!,
          secret: await encrypt(ctx.principal.orgId, secret),
          previousValidMs: seconds * 1000,
        });
        return { status: 200, body: { data: { secret } } };
      },
    },
    {
      method: 'POST',
      path: `${ITEM}/replay`,
      operationId: 'replayWebhook',
      summary: 'Move the cursor: every matching event after `after` is delivered again, in order',
      tag: TAG,
      scopes: WRITE,
      body: { schema: ReplayBody, contentType: 'application/json' },
      responses: {
        200: { description: 'The endpoint with its new cursor', schema: DataEnvelope(WebhookView) },
        410: { description: '`after` is older than the oldest event held (cursor_expired)' },
      },
      handler: async (ctx) => {
        const args = { orgId: ctx.principal.orgId, id: ctx.params.webhook_id!, after: ctx.body.after as number };
        return { status: 200, body: { data: await ctx.shard.send(replayWebhook, args) } };
      },
    },
    {
      method: 'POST',
      path: `${ITEM}/test`,
      operationId: 'testWebhook',
      summary: 'Send a `webhook.test` event once (paused endpoints too); its attempt shows in the delivery log',
      tag: TAG,
      scopes: WRITE,
      body: { schema: NoFieldsBody, contentType: 'application/json' },
      responses: { 202: { description: 'Queued for the dispatcher', schema: SendAccepted } },
      handler: async (ctx) => {
        const args = { orgId: ctx.principal.orgId, id: ctx.params.webhook_id!, kind: 'test' as const, messageId: testMessageId() };
        return { status: 202, body: { data: { message_id: await ctx.shard.send(requestSend, args) } } };
      },
    },
    {
      method: 'GET',
      path: `${ITEM}/deliveries`,
      operationId: 'listWebhookDeliveries',
      summary: "The endpoint's delivery log, newest attempt first (the last 1,000 kept)",
      tag: TAG,
      scopes: READ,
      query: {
        before: {
          kind: 'integer',
          min: 1,
          max: Number.MAX_SAFE_INTEGER,
          default: Number.MAX_SAFE_INTEGER,
          description: "Attempts older than this delivery id (a page's `next_before`).",
        },
        limit: { kind: 'integer', min: 1, max: 200, default: 50, description: 'Most attempts per page (default 50, max 200).' },
      },
      responses: { 200: { description: 'Attempts, newest first', schema: DeliveryList } },
      handler: (ctx) => {
        const row = ownRow(ctx);
        const limit = ctx.query.limit as number;
        const before = ctx.query.before as number;
        const rows = reads(ctx.shard).deliveries.all(row.id, before, limit) as DeliveryRow[];
        const next = rows.length === limit ? rows[rows.length - 1]!.id : null;
        return { status: 200, body: { data: rows.map(deliveryView), next_before: next } };
      },
    },
    {
      method: 'POST',
      path: `${ITEM}/deliveries/{delivery_id}/redeliver`,
      operationId: 'redeliverWebhookDelivery',
      summary: "Send a logged attempt's message once more (same `webhook-id`), out of the cursor's order",
      tag: TAG,
      scopes: WRITE,
      body: { schema: NoFieldsBody, contentType: 'application/json' },
      responses: {
        202: { description: 'Queued for the dispatcher', schema: SendAccepted },
        410: { description: 'The event is no longer held (cursor_expired)' },
      },
      handler: async (ctx) => {
        const args = {
          orgId: ctx.principal.orgId,
          id: ctx.params.webhook_id!,
          kind: 'redelivery' as const,
          messageId: '',
          deliveryId: ctx.params.delivery_id!,
        };
        return { status: 202, body: { data: { message_id: await ctx.shard.send(requestSend, args) } } };
      },
    },
  ];
}
