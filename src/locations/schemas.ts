import { Type, type Static } from '@sinclair/typebox';
import type { FieldError } from '../errors/catalog.js';
import { pagingParams, type QuerySpec } from '../http/query.js';
import { ReadOnlyEchoProperties } from '../masterdata/echo.js';
import { masterListParams } from '../masterdata/filters.js';
import { bodyWindowErrors } from '../masterdata/rules.js';
import { tagListErrors, TagRequest } from '../masterdata/tags.js';
import {
  DataEnvelope,
  Description,
  ExternalKey,
  ListEnvelope,
  Name,
  Nullable,
  NullableId,
  NullableResponseTimestamp,
  NullableTimestamp,
  RequiredTimestamp,
  TagView,
  Timestamp,
} from '../masterdata/fields.js';

/** LocationView: every field always present; no metadata, no path or depth. */
export const LocationView = Type.Object(
  {
    id: Type.Integer({ format: 'int64' }),
    external_key: Type.String(),
    name: Type.String(),
    description: Nullable(Type.String()),
    parent_id: Nullable(Type.Integer({ format: 'int64' })),
    parent_external_key: Nullable(Type.String()),
    is_active: Type.Boolean(),
    valid_from: Timestamp,
    valid_to: NullableResponseTimestamp,
    created_at: Timestamp,
    updated_at: Timestamp,
    deleted_at: NullableResponseTimestamp,
    tags: Type.Array(TagView),
  },
  { additionalProperties: false, 'x-component': 'Location' },
);
export type LocationView = Static<typeof LocationView>;

/** Fields writable on create and on PATCH, all optional there (name is required on create). */
const optionalWritable = {
  description: Type.Optional(Description),
  is_active: Type.Optional(Type.Boolean()),
  parent_id: Type.Optional(NullableId),
  parent_external_key: Type.Optional(Nullable(ExternalKey)),
  valid_from: Type.Optional(RequiredTimestamp),
  valid_to: Type.Optional(NullableTimestamp),
};

/** POST body. `metadata` is not declared, so it is unknown_field like any undeclared key (locations carry no metadata). */
export const CreateLocationBody = Type.Object(
  {
    external_key: Type.Optional(ExternalKey),
    name: Name,
    ...optionalWritable,
    tags: Type.Optional(Type.Array(TagRequest)),
  },
  { additionalProperties: false, 'x-component': 'LocationCreate' },
);
export type CreateLocationBody = Static<typeof CreateLocationBody>;

/** PATCH body: the writable fields plus the read-only echoes of 4.7 (checked against the row). */
export const PatchLocationBody = Type.Object(
  {
    name: Type.Optional(Name),
    ...optionalWritable,
    ...ReadOnlyEchoProperties,
  },
  { additionalProperties: false, 'x-component': 'LocationPatch' },
);
export type PatchLocationBody = Static<typeof PatchLocationBody>;

export const RenameBody = Type.Object({ external_key: ExternalKey }, { additionalProperties: false, 'x-component': 'RenameRequest' });

export const LocationEnvelope = DataEnvelope(LocationView);
export const LocationList = ListEnvelope(LocationView);
export const RenameResult = Type.Object(
  {
    data: LocationView,
    descendant_count_affected: Type.Integer({ minimum: 0 }),
  },
  { 'x-component': 'LocationRenameResult' },
);

export const LIST_SORT_FIELDS = ['external_key', 'name', 'created_at'] as const;

export const listQuery: QuerySpec = {
  ...masterListParams(LIST_SORT_FIELDS, 'external_key'),
  parent_id: { kind: 'id', repeatable: true, description: 'Any-of filter on parent_id; not together with parent_external_key.' },
  parent_external_key: {
    kind: 'external_key',
    repeatable: true,
    description: 'Any-of filter on the parent external_key; not together with parent_id.',
  },
};

/** Body checks reported with the schema's failures (tag_type rule, valid window on the body alone). */
export const createErrors = (body: Record<string, unknown>, now: number): FieldError[] => [
  ...tagListErrors(body),
  ...bodyWindowErrors(body, now),
];
export const patchErrors = (body: Record<string, unknown>): FieldError[] => bodyWindowErrors(body);

/** The tree endpoints page with limit/offset in a fixed order; `sort` is refused. */
const { limit, offset } = pagingParams([], '');
export const treeQuery: QuerySpec = {
  limit,
  offset,
  sort: { kind: 'reject', message: 'sort parameter not supported on this endpoint' },
};
