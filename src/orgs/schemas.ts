import { Type, type Static } from '@sinclair/typebox';

export const OrganizationView = Type.Object(
  {
    id: Type.Integer({ format: 'int64' }),
    name: Type.String(),
    scopes: Type.Array(Type.String()),
    api_key_id: Type.String({ format: 'uuid' }),
  },
  { additionalProperties: false, 'x-component': 'Organization' },
);
export type OrganizationView = Static<typeof OrganizationView>;
