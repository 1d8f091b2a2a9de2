import { Type, type Static } from '@sinclair/typebox';
import { fieldError, type FieldError } from '../errors/catalog.js';
import { ReadOnlyEchoProperties } from '../masterdata/echo.js';
import {
  Description,
  ExternalKey,
  Name,
  Nullable,
  NullableResponseTimestamp,
  NullableTimestamp,
  RequiredTimestamp,
  TagView,
  Timestamp,
} from '../masterdata/fields.js';
import { bodyWindowErrors, metadataErrors } from '../masterdata/rules.js';
import { tagListErrors, TagRequest } from '../masterdata/tags.js';

export const AssetView = Type.Object(
  {
    id: Type.Integer({ format: 'int64' }),
    external_key: Type.String(),
    name: Type.String(),
    description: Nullable(Type.String()),
    is_active: Type.Boolean(),
    metadata: Type.Object({}, { additionalProperties: true }),
    valid_from: Timestamp,
    valid_to: NullableResponseTimestamp,
    created_at: Timestamp,
    updated_at: Timestamp,
    deleted_at: NullableResponseTimestamp,
    tags: Type.Array(TagView),
  },
  { additionalProperties: false, 'x-component': 'Asset' },
);
export type AssetView = Static<typeof AssetView>;

/** Free-form JSON object; scalars, arrays and null are invalid_value (decode-stage type mismatch). */
const Metadata = Type.Object(
  {},
  { additionalProperties: true, description: `Free-form JSON object, replaced whole on PATCH; {} is empty.` },
);

const INGESTION_ONLY =
  "is read-only: an asset's location is derived from scans that arrive through the fixed-reader pipeline or handheld submission, never from the asset API";

/** Declared so they are read_only on presence (server-owned fields sent back), not unknown_field. */
const LocationFieldsRejected = {
  location_id: Type.Optional(
    Type.Unsafe<unknown>({ readOnly: true, description: `Rejected on presence (read_only): location_id ${INGESTION_ONLY}.` }),
  ),
  location_external_key: Type.Optional(
    Type.Unsafe<unknown>({ readOnly: true, description: `Rejected on presence (read_only): location_external_key ${INGESTION_ONLY}.` }),
  ),
};

function locationFieldErrors(body: Record<string, unknown>): FieldError[] {
  return (['location_id', 'location_external_key'] as const)
    .filter((field) => Object.hasOwn(body, field))
    .map((field) => fieldError(field, 'read_only', `${field} ${INGESTION_ONLY}`));
}

export const AssetCreate = Type.Object(
  {
    external_key: Type.Optional(ExternalKey),
    name: Name,
    description: Type.Optional(Description),
    is_active: Type.Optional(Type.Boolean({ default: true })),
    metadata: Type.Optional(Metadata),
    valid_from: Type.Optional({ ...RequiredTimestamp, description: 'Start of the effective window (default: now).' }),
    valid_to: Type.Optional({
      ...NullableTimestamp,
      description: 'End of the effective window (null: open-ended); must be later than valid_from.',
    }),
    tags: Type.Optional(Type.Array(TagRequest, { maxItems: 100 })),
    ...LocationFieldsRejected,
  },
  { additionalProperties: false, 'x-component': 'AssetCreate' },
);

export function assetCreateErrors(body: Record<string, unknown>, now: number): FieldError[] {
  return [...metadataErrors(body), ...tagListErrors(body), ...locationFieldErrors(body), ...bodyWindowErrors(body, now)];
}

export const AssetPatch = Type.Object(
  {
    name: Type.Optional(Name),
    description: Type.Optional(Description),
    is_active: Type.Optional(Type.Boolean()),
    metadata: Type.Optional(Metadata),
    valid_from: Type.Optional(RequiredTimestamp),
    valid_to: Type.Optional(NullableTimestamp),
    ...ReadOnlyEchoProperties,
    ...LocationFieldsRejected,
  },
  { additionalProperties: false, 'x-component': 'AssetPatch' },
);

export function assetPatchErrors(body: Record<string, unknown>): FieldError[] {
  return [...metadataErrors(body), ...locationFieldErrors(body), ...bodyWindowErrors(body)];
}

export const RenameBody = Type.Object({ external_key: ExternalKey }, { additionalProperties: false, 'x-component': 'RenameRequest' });

export const RenameResult = Type.Object(
  {
    data: AssetView,
    descendant_count_affected: Type.Integer({ description: 'Always 0 for assets.' }),
  },
  { 'x-component': 'AssetRenameResult' },
);
