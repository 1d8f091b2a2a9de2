import { Type, type Static } from '@sinclair/typebox';
import { EVENT_TYPES } from '../events/types.js';
import { Description, Nullable, NullableResponseTimestamp, Timestamp } from '../masterdata/fields.js';

/** The most endpoints one organization may register. */
export const MAX_WEBHOOKS_PER_ORG = 20;
/** The most asset ids one endpoint's filter may name. */
export const MAX_FILTER_ASSETS = 100;

const EventTypeName = Type.Union(EVENT_TYPES.map((t) => Type.Literal(t)));
const Url = Type.String({ minLength: 1, maxLength: 2048, description: 'http or https URL of the receiver; no user info.' });

export const WebhookFilters = Type.Object(
  {
    asset_ids: Type.Optional(
      Type.Array(Type.Integer({ minimum: 1, maximum: 2147483647 }), {
        minItems: 1,
        maxItems: MAX_FILTER_ASSETS,
        uniqueItems: true,
        description: 'Only events about these assets (moves, asset and tag events of them).',
      }),
    ),
    location_id: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: 2147483647,
        description:
          "Only events within this location's subtree: moves from or to it or a descendant, its and its descendants' location and tag events (deletions included; soft-deleted descendants count).",
      }),
    ),
  },
  { additionalProperties: false },
);
export type WebhookFilters = Static<typeof WebhookFilters>;

const EventTypes = Type.Array(EventTypeName, { minItems: 1, maxItems: EVENT_TYPES.length, uniqueItems: true });

export const WebhookView = Type.Object(
  {
    id: Type.Integer({ format: 'int64' }),
    url: Type.String(),
    description: Nullable(Type.String()),
    event_types: Type.Array(EventTypeName),
    filters: WebhookFilters,
    status: Type.Union([Type.Literal('active'), Type.Literal('paused')]),
    paused_reason: Nullable(
      Type.String({
        enum: ['gone', 'retry_window', 'manual'],
        description:
          '`gone`: the receiver answered 410; `retry_window`: an event failed for the whole retry window; `manual`: set by PATCH.',
      }),
    ),
    last_delivered_seq: Type.Integer({
      minimum: 0,
      description: 'Every event up to this sequence has been delivered (2xx) or did not match.',
    }),
    failing_since: NullableResponseTimestamp,
    failed_attempts: Type.Integer({ minimum: 0, description: 'Failed attempts of the event after `last_delivered_seq`.' }),
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { additionalProperties: false, 'x-component': 'Webhook' },
);
export type WebhookView = Static<typeof WebhookView>;

export const WebhookEnvelope = Type.Object({ data: WebhookView }, { additionalProperties: false });
export const WebhookList = Type.Object({ data: Type.Array(WebhookView) }, { additionalProperties: false, 'x-component': 'WebhookList' });
export const WebhookCreated = Type.Object(
  {
    data: Type.Object(
      { ...WebhookView.properties, secret: Type.String({ description: 'The signing secret (`whsec_…`), shown this once.' }) },
      { additionalProperties: false },
    ),
  },
  { additionalProperties: false, 'x-component': 'WebhookCreated' },
);

export const CreateWebhookBody = Type.Object(
  {
    url: Url,
    description: Type.Optional(Description),
    event_types: EventTypes,
    filters: Type.Optional(WebhookFilters),
    after: Type.Optional(
      Type.Integer({
        minimum: 0,
        maximum: Number.MAX_SAFE_INTEGER,
        description: "Deliver the events after this sequence (default: the organization's last sequence now, so only new events).",
      }),
    ),
  },
  { additionalProperties: false, 'x-component': 'CreateWebhook' },
);

export const PatchWebhookBody = Type.Object(
  {
    url: Type.Optional(Url),
    description: Type.Optional(Description),
    event_types: Type.Optional(EventTypes),
    filters: Type.Optional(WebhookFilters),
    status: Type.Optional(
      Type.Union([Type.Literal('active'), Type.Literal('paused')], {
        description: '`active` resumes a paused endpoint from `last_delivered_seq` (its failure count reset); `paused` stops deliveries.',
      }),
    ),
  },
  { additionalProperties: false, minProperties: 1, 'x-component': 'PatchWebhook' },
);

export const RotateSecretBody = Type.Object(
  {
    previous_valid_for_seconds: Type.Optional(
      Type.Integer({
        minimum: 0,
        maximum: 604_800,
        description: 'How long the previous secret still signs beside the new one (default 86400; 0 drops it at once).',
      }),
    ),
  },
  { additionalProperties: false, 'x-component': 'RotateWebhookSecret' },
);
export const SecretEnvelope = Type.Object(
  {
    data: Type.Object(
      { secret: Type.String({ description: 'The new signing secret, shown this once.' }) },
      { additionalProperties: false },
    ),
  },
  { additionalProperties: false, 'x-component': 'WebhookSecret' },
);

export const ReplayBody = Type.Object(
  {
    after: Type.Integer({
      minimum: 0,
      maximum: Number.MAX_SAFE_INTEGER,
      description: 'Deliver again, in order, every matching event after this sequence (the cursor moves back, or forward to skip).',
    }),
  },
  { additionalProperties: false, 'x-component': 'ReplayWebhook' },
);

export const SendAccepted = Type.Object(
  {
    data: Type.Object(
      { message_id: Type.String({ description: 'The `webhook-id` the delivery carries; find its attempt in the delivery log.' }) },
      { additionalProperties: false },
    ),
  },
  { additionalProperties: false, 'x-component': 'WebhookSendAccepted' },
);

export const DeliveryView = Type.Object(
  {
    id: Type.Integer({ format: 'int64' }),
    kind: Type.Union([Type.Literal('event'), Type.Literal('test'), Type.Literal('redelivery')]),
    message_id: Type.String(),
    event_seq: Nullable(Type.Integer()),
    event_type: Type.String(),
    attempt: Type.Integer({ minimum: 1 }),
    attempted_at: Timestamp,
    status: Nullable(Type.Integer({ description: "The receiver's HTTP status; null when no answer came (see `error`)." })),
    error: Nullable(Type.String({ description: 'Why no status: timeout, refused address, connection error, response too large.' })),
    latency_ms: Type.Integer({ minimum: 0 }),
    response_excerpt: Nullable(Type.String({ description: 'The first 1,024 bytes of the response body.' })),
  },
  { additionalProperties: false, 'x-component': 'WebhookDelivery' },
);
export type DeliveryView = Static<typeof DeliveryView>;

export const DeliveryList = Type.Object(
  {
    data: Type.Array(DeliveryView),
    next_before: Nullable(Type.Integer({ description: 'Pass as `before` for older attempts; null at the oldest kept.' })),
  },
  { additionalProperties: false, 'x-component': 'WebhookDeliveryList' },
);

/** The body of an operation that takes no fields: `{}` (every POST carries a JSON body, interface 4.1). */
export const NoFieldsBody = Type.Object({}, { additionalProperties: false, 'x-component': 'WebhookNoFieldsBody' });
