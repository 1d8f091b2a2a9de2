import { Type, type Static } from '@sinclair/typebox';
import { Id, Nullable, Timestamp, TagView } from '../../masterdata/fields.js';

/** The location joined to a history event, with its live tags embedded. */
export const HistoryLocation = Type.Object(
  {
    id: Id,
    external_key: Type.String(),
    name: Type.String(),
    parent_id: Nullable(Id),
    is_active: Type.Boolean(),
    tags: Type.Array(TagView),
  },
  { additionalProperties: false },
);

/**
 * A visit of the asset at a location: it starts at event_observed_at and
 * was last seen at last_seen_at after read_count scans. `location` is null when the location is
 * soft-deleted or not currently effective; `location_id` always names it.
 */
export const HistoryEvent = Type.Object(
  {
    asset_id: Id,
    location_id: Id,
    event_observed_at: Timestamp,
    last_seen_at: Timestamp,
    read_count: Type.Integer({ minimum: 1 }),
    location: Nullable(HistoryLocation),
  },
  { additionalProperties: false, 'x-component': 'HistoryEvent' },
);
export type HistoryEvent = Static<typeof HistoryEvent>;
