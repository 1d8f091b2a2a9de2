import { Type, type Static } from '@sinclair/typebox';
import { Id, Nullable, NullableResponseTimestamp, Timestamp } from '../../masterdata/fields.js';

/** A row of the asset-locations report: every field present, null-check semantics. */
export const AssetLocationItem = Type.Object(
  {
    asset_id: Id,
    asset_external_key: Type.String(),
    location_id: Nullable(Id),
    location_external_key: Nullable(
      Type.String({ description: 'null when the location is soft-deleted (the report shows current state)' }),
    ),
    asset_last_seen: Timestamp,
    asset_deleted_at: NullableResponseTimestamp,
  },
  { additionalProperties: false, 'x-component': 'AssetLocation' },
);
export type AssetLocationItem = Static<typeof AssetLocationItem>;
