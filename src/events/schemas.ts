import { Type } from '@sinclair/typebox';
import { AssetView } from '../assets/schemas.js';
import { LocationView } from '../locations/schemas.js';
import { Id, TagView, Timestamp } from '../masterdata/fields.js';
import { EVENT_TYPES } from './types.js';

/** A location or asset as events name it: id and external key. */
export const EventRef = Type.Object({ id: Id, external_key: Type.String() }, { additionalProperties: false, 'x-component': 'EventRef' });

/** `asset.moved`: the asset's current location changed (its first placement has `from: null`). */
export const AssetMovedData = Type.Object(
  {
    asset: EventRef,
    from: Type.Union([EventRef, Type.Null()]),
    to: EventRef,
    observed_at: Timestamp,
    entered: Type.Array(EventRef, { description: 'Locations entered along the tree, outermost first (the `to` location last).' }),
    left: Type.Array(EventRef, { description: 'Locations left along the tree, innermost first (the `from` location first).' }),
  },
  { additionalProperties: false, 'x-component': 'AssetMovedData' },
);

/** `asset.created` and `asset.updated` (patch, rename): the asset as the write left it. */
export const AssetEventData = Type.Object({ asset: AssetView }, { additionalProperties: false, 'x-component': 'AssetEventData' });
/** `asset.deleted`. */
export const AssetDeletedData = Type.Object({ asset: EventRef }, { additionalProperties: false, 'x-component': 'AssetDeletedData' });
/** `location.created` and `location.updated` (patch, rename): the location as the write left it. */
export const LocationEventData = Type.Object(
  { location: LocationView },
  { additionalProperties: false, 'x-component': 'LocationEventData' },
);
/** `location.deleted`. */
export const LocationDeletedData = Type.Object(
  { location: EventRef },
  { additionalProperties: false, 'x-component': 'LocationDeletedData' },
);
/** `tag.attached` and `tag.detached` (tags given in a create come inside the created event instead). */
export const TagEventData = Type.Object(
  { tag: TagView, owner_type: Type.Union([Type.Literal('asset'), Type.Literal('location')]), owner_id: Id },
  { additionalProperties: false, 'x-component': 'TagEventData' },
);

/**
 * One event of an organization's log. `seq` is the organization's own sequence: gapless in commit
 * order (a key that may not see some types sees gaps where those were); `id` is unique and stable
 * (the `Nats-Msg-Id` on the EVENTS stream).
 */
export const EventSchema = Type.Object(
  {
    id: Type.String(),
    seq: Type.Integer({ minimum: 1 }),
    type: Type.Union(EVENT_TYPES.map((t) => Type.Literal(t))),
    org_id: Id,
    occurred_at: Timestamp,
    data: Type.Union([AssetMovedData, AssetEventData, AssetDeletedData, LocationEventData, LocationDeletedData, TagEventData]),
  },
  { additionalProperties: false, 'x-component': 'Event' },
);

export const EventPage = Type.Object(
  {
    data: Type.Array(EventSchema),
    next_after: Type.Integer({ minimum: 0, description: 'The `after` of the next page (the last sequence this page covered).' }),
    last_seq: Type.Integer({ minimum: 0, description: "The organization's last sequence when the page was read." }),
  },
  { additionalProperties: false, 'x-component': 'EventPage' },
);
