import { Type, type Static } from '@sinclair/typebox';

const TagRead = Type.Object({
  tag_type: Type.String({ minLength: 1, maxLength: 64 }),
  value: Type.String({ minLength: 1, maxLength: 255 }),
});

const LocationById = Type.Object({ id: Type.Integer({ minimum: 1, maximum: 2147483647 }) }, { additionalProperties: false });
const LocationByKey = Type.Object(
  {
    external_key: Type.String({
      minLength: 1,
      maxLength: 255,
      pattern: '^[A-Za-z0-9-]+$',
      'x-pattern-message': 'must contain only letters, digits and hyphens',
    }),
  },
  { additionalProperties: false },
);
const LocationByTag = Type.Object(
  { tag_type: Type.String({ minLength: 1, maxLength: 64 }), value: Type.String({ minLength: 1, maxLength: 255 }) },
  { additionalProperties: false },
);

/** The body of a message on `scans.<org_id>.<source>` Unknown keys are ignored. */
export const ScanMessage = Type.Object({
  event_id: Type.String({ minLength: 1, maxLength: 64 }),
  observed_at: Type.String({ 'x-timestamp': 'required' }),
  location: Type.Union([LocationById, LocationByKey, LocationByTag]),
  reads: Type.Array(TagRead, { minItems: 1, maxItems: 1000 }),
  reader_id: Type.Optional(Type.Unknown()),
});
export type ScanMessage = Static<typeof ScanMessage>;
