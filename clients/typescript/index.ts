/**
 * A typed client of trackd's REST API: openapi-fetch over the types generated from the served
 * OpenAPI document (schema.d.ts). Every path, parameter, body and answer is typed by name.
 *
 *   const api = trackdClient('http://127.0.0.1:8080', token);
 *   const { data, error } = await api.GET('/api/v1/assets/{asset_id}', { params: { path: { asset_id: 1 } } });
 */
import createClient, { type Client } from 'openapi-fetch';
import type { components, paths } from './schema.js';

export type { components, paths };
type Schemas = components['schemas'];
export type Asset = Schemas['Asset'];
export type AssetCreate = Schemas['AssetCreate'];
export type AssetPatch = Schemas['AssetPatch'];
export type Location = Schemas['Location'];
export type Tag = Schemas['Tag'];
export type AssetLocation = Schemas['AssetLocation'];
export type HistoryEvent = Schemas['HistoryEvent'];
export type ErrorEnvelope = Schemas['ErrorEnvelope'];
export type FieldError = Schemas['FieldError'];

/** PATCH bodies are JSON Merge Patch: pass this as the request's headers. */
export const MERGE_PATCH = { 'Content-Type': 'application/merge-patch+json' } as const;

export function trackdClient(baseUrl: string, token: string): Client<paths> {
  return createClient<paths>({ baseUrl, headers: { Authorization: `Bearer ${token}` } });
}
