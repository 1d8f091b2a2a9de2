import { ApiError } from '../errors/catalog.js';
import type { Route } from '../http/route.js';
import { pageJson } from './read.js';
import { EventPage } from './schemas.js';
import { EVENT_SCOPES, EVENT_TYPES } from './types.js';
import { Type } from '@sinclair/typebox';
import { DataEnvelope } from '../masterdata/fields.js';
import { fieldError, throwIfInvalid } from '../errors/catalog.js';
import { formatTimestamp } from '../wire/timestamps.js';
import { compileFilter, shardSubtrees } from './filters.js';
import { eventsAfter, lastSeq } from './read.js';
import { mintTicket, TICKET_TTL_MS } from './tickets.js';
import { sseSink } from './hub.js';

const StreamTicket = Type.Object(
  {
    ticket: Type.String({
      description:
        'Pass as `?ticket=` to GET /api/v1/events/stream or to the events WebSocket (GET /api/v1/events/ws, docs/events-websocket.md), once, within its validity.',
    }),
    expires_at: Type.String({ format: 'date-time' }),
  },
  { additionalProperties: false, 'x-component': 'StreamTicket' },
);

const StreamTicketRequest = Type.Object(
  {},
  {
    additionalProperties: false,
    'x-component': 'StreamTicketRequest',
    description: 'Empty: the ticket carries the scopes of the key that asks for it.',
  },
);

/** The body of an event stream (text, frames as described), for the OpenAPI document. */
const SseBody = Type.String({
  'x-component': 'EventStreamBody',
  description: 'Server-Sent Events frames, each carrying one `Event` as its data',
});

/** Where a stream starts: Last-Event-ID (a reconnect), else `after`, else the head (new events only). */
function streamStart(lastEventId: string, after: number | undefined, head: number): number {
  if (lastEventId !== '') {
    if (!/^\d{1,15}$/.test(lastEventId))
      throwIfInvalid([fieldError('Last-Event-ID', 'invalid_value', 'Last-Event-ID must be an event seq')]);
    return Number(lastEventId);
  }
  return after ?? head;
}

/** The scopes of `scopes` that show events; 403 when none does. */
export function eventScopes(scopes: ReadonlySet<string>): ReadonlySet<string> {
  if (!EVENT_SCOPES.some((s) => scopes.has(s)))
    throw new ApiError('forbidden', `This API key lacks the required scope: one of ${EVENT_SCOPES.join(', ')}`);
  return scopes;
}

/** The event log's read surface (pages for reconciliation). */
export function eventRoutes(): Route[] {
  return [
    {
      method: 'GET',
      path: '/api/v1/events',
      operationId: 'listEvents',
      summary: "Pages of the organization's event log, in sequence order, after a sequence",
      tag: 'Events',
      // Any one of tracking:read, assets:read, locations:read; each event shows to the keys with its own scope.
      scopes: [],
      query: {
        after: {
          kind: 'integer',
          min: 0,
          max: Number.MAX_SAFE_INTEGER,
          default: 0,
          description: "Events with a sequence above this one (0: from the oldest held). Pass the previous page's `next_after`.",
        },
        limit: { kind: 'integer', min: 1, max: 1000, default: 100, description: 'Most events per page (default 100, max 1000).' },
      },
      responses: {
        200: {
          description:
            'Events after `after`, oldest first: those of types the key may see (asset.moved: tracking:read; asset.* and tags of assets: assets:read; location.* and tags of locations: locations:read)',
          schema: EventPage,
        },
      },
      handler: (ctx) => {
        const scopes = eventScopes(ctx.principal.scopes);
        const slice = eventsAfter(ctx.shard, ctx.principal.orgId, ctx.query.after as number, ctx.query.limit as number);
        return { status: 200, text: pageJson(slice, scopes), contentType: 'application/json' };
      },
    },
    {
      method: 'GET',
      path: '/api/v1/events/stream',
      operationId: 'streamEvents',
      summary:
        'Server-Sent Events: each event as `id: <seq>`, `event: <type>`, `data: <Event>`; reconnects resume with Last-Event-ID. Browsers authenticate with `?ticket=` (POST /api/v1/events/tickets)',
      tag: 'Events',
      scopes: [],
      ticketAuth: true,
      query: {
        after: {
          kind: 'integer',
          min: 0,
          max: Number.MAX_SAFE_INTEGER,
          description: 'Start after this sequence (Last-Event-ID wins when sent; neither: new events only).',
        },
        type: { kind: 'enum', values: EVENT_TYPES, repeatable: true, description: 'Only these event types (repeatable).' },
        asset_id: { kind: 'id', repeatable: true, description: 'Only events of these assets (moves, changes, their tags).' },
        location_id: {
          kind: 'id',
          description:
            'Only events at this location or below it: moves from or to the subtree, its locations (deletions included; soft-deleted descendants count) and their tags.',
        },
        ticket: { kind: 'token', description: 'A stream ticket, instead of the Authorization header (browsers).' },
      },
      responses: {
        200: {
          description:
            'A Server-Sent Events stream: one frame per event, `id: <seq>`, `event: <type>`, `data: <Event>` (the `Event` schema). It starts after the `Last-Event-ID` request header (what EventSource sends on a reconnect), else after `after`, else at the head. The last frame of a stream the server ends is `event: close` with `data: {"reason","resume_after"}`; reasons: slow_consumer, unauthorized (key revoked or expired), cursor_expired, shutdown. Reconnect with Last-Event-ID = resume_after. A comment line every 5 s keeps an idle stream open.',
          streamed: { mediaTypes: ['text/event-stream'], schema: SseBody },
        },
      },
      handler: (ctx) => {
        const scopes = eventScopes(ctx.principal.scopes);
        const { orgId } = ctx.principal;
        const head = lastSeq(ctx.shard, orgId);
        const cursor = streamStart(ctx.headers.lastEventId, ctx.query.after as number | undefined, head);
        // A cursor already past retention is refused before the stream opens (410 with the oldest held).
        eventsAfter(ctx.shard, orgId, cursor, 1);
        const filter = compileFilter(
          {
            types: ctx.query.type as string[] | undefined,
            assetIds: ctx.query.asset_id as number[] | undefined,
            locationId: ctx.query.location_id as number | undefined,
          },
          shardSubtrees(ctx.shard, orgId),
        );
        const principal = { ...ctx.principal, scopes };
        return { status: 200, events: (raw) => ctx.streams!.add(ctx.shard, principal, filter, cursor, sseSink(raw)) };
      },
    },
    {
      method: 'POST',
      path: '/api/v1/events/tickets',
      operationId: 'createStreamTicket',
      summary: `A single-use ticket for one event stream, valid ${TICKET_TTL_MS / 1000} s (browsers: EventSource cannot send the key)`,
      tag: 'Events',
      scopes: [],
      body: { schema: StreamTicketRequest, contentType: 'application/json' },
      responses: { 201: { description: "The ticket; the stream it opens has this key's scopes", schema: DataEnvelope(StreamTicket) } },
      handler: async (ctx) => {
        eventScopes(ctx.principal.scopes);
        const { ticket, expires } = await mintTicket(ctx.shard, ctx.principal);
        return { status: 201, body: { data: { ticket, expires_at: formatTimestamp(expires) } } };
      },
    },
  ];
}
