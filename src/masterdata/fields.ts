import { Type, type Static, type TSchema } from '@sinclair/typebox';

/** Schema fragments shared by assets, locations and tags (keys, effective windows, tags, timestamps). */

/** An OpenAPI 3.0 nullable schema (`nullable: true`, never a type array); ajv understands it too. */
export const Nullable = <T extends TSchema>(schema: T) => Type.Unsafe<Static<T> | null>({ ...schema, nullable: true });

export const EXTERNAL_KEY_PATTERN = '^[A-Za-z0-9-]+$';
export const ExternalKey = Type.String({
  minLength: 1,
  maxLength: 255,
  pattern: EXTERNAL_KEY_PATTERN,
  'x-pattern-message': 'must contain only letters, digits and hyphens',
});

/** No C0 controls or DEL anywhere; first and last character not whitespace. */
export const NAME_PATTERN = '^(?![\\s])[^\\u0000-\\u001f\\u007f]*(?<![\\s])$';
export const Name = Type.String({
  minLength: 1,
  maxLength: 255,
  pattern: NAME_PATTERN,
  'x-pattern-message': 'must not contain control characters or start or end with whitespace',
});

/** Multi-line allowed: tab, newline and carriage return pass; other C0 controls and DEL do not. */
export const DESCRIPTION_PATTERN = '^[^\\u0000-\\u0008\\u000b\\u000c\\u000e-\\u001f\\u007f]*$';
export const Description = Nullable(
  Type.String({
    minLength: 1,
    maxLength: 4000,
    pattern: DESCRIPTION_PATTERN,
    'x-pattern-message': 'must not contain control characters other than tab, newline and carriage return',
  }),
);

/** Request timestamps: RFC 3339 (0 to 9 fractional digits, any offset), sentinels rejected. */
export const RequiredTimestamp = Type.String({ 'x-timestamp': 'required' });
export const NullableTimestamp = Nullable(Type.String({ 'x-timestamp': 'nullable' }));

/** Response timestamps: always UTC with three fractional digits. */
export const Timestamp = Type.String({ format: 'date-time', example: '2026-11-21T10:00:00.123Z' });
export const NullableResponseTimestamp = Nullable(Timestamp);

/** Wire type int64, runtime ceiling 2^31-1: past int64 is an overflow (invalid_value), else too_small/too_large. */
export const Id = Type.Integer({ format: 'int64', minimum: 1, maximum: 2147483647, 'x-int64': true });
export const NullableId = Nullable(Id);

export const TAG_TYPES = ['rfid', 'ble', 'barcode'] as const;
export const TAG_VALUE_PATTERN = '^[^\\u0000-\\u0008\\u000b\\u000c\\u000e-\\u001f\\u007f]*$';
export const TagValue = Type.String({
  minLength: 1,
  maxLength: 255,
  pattern: TAG_VALUE_PATTERN,
  'x-pattern-message': 'must not contain control characters other than tab, newline and carriage return',
});

/** Read shape of a tag; `tag_type` is an extensible enum (unknown values pass through on read). */
export const TagView = Type.Object(
  {
    id: Type.Integer({ format: 'int64' }),
    tag_type: Type.String({ enum: [...TAG_TYPES], 'x-extensible-enum': true }),
    value: Type.String(),
  },
  { additionalProperties: false, 'x-component': 'Tag' },
);
export type TagView = Static<typeof TagView>;

/** The OpenAPI component name a schema is published under (`x-component`), if any. */
const componentOf = (schema: TSchema): string | undefined => (schema as { 'x-component'?: string })['x-component'];

/** The list envelope (data, limit, offset, total_count); published as `<Item>List` when its item is a named component. */
export const ListEnvelope = <T extends TSchema>(item: T) =>
  Type.Object(
    {
      data: Type.Array(item),
      limit: Type.Integer(),
      offset: Type.Integer(),
      total_count: Type.Integer(),
    },
    componentOf(item) === undefined ? {} : { 'x-component': `${componentOf(item)}List` },
  );

/** `{ data: item }`; published as `<Item>Response` when its item is a named component. */
export const DataEnvelope = <T extends TSchema>(item: T) =>
  Type.Object({ data: item }, componentOf(item) === undefined ? {} : { 'x-component': `${componentOf(item)}Response` });
