import { ApiError } from '../errors/catalog.js';
import type { Route } from '../http/route.js';
import { eventsAfter, pageJson } from './read.js';
import { EventPage } from './schemas.js';
import { EVENT_SCOPES } from './types.js';

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
  ];
}
