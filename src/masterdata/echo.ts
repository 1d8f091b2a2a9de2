import { Type } from '@sinclair/typebox';
import { fieldError, type FieldError } from '../errors/catalog.js';
import { formatNullableTimestamp, formatTimestamp } from '../wire/timestamps.js';
import { NullableTimestamp, RequiredTimestamp, TagView } from './fields.js';
import { requestTime } from './rules.js';

/**
 * The read-only fields a PATCH body may echo unchanged: spread into a PATCH schema so a
 * verbatim GET-to-PATCH echo validates; `takeReadOnlyEchoes` then judges them against the row.
 */
export const ReadOnlyEchoProperties = {
  id: Type.Optional(
    Type.Integer({
      format: 'int64',
      'x-int64': true,
      description: 'Read-only echo: dropped when equal to the current value, else read_only.',
    }),
  ),
  external_key: Type.Optional(
    Type.String({ description: 'Read-only echo: dropped when equal, else invalid_context (use the rename endpoint).' }),
  ),
  created_at: Type.Optional({ ...RequiredTimestamp, description: 'Read-only echo, compared by instant: else read_only.' }),
  updated_at: Type.Optional({
    ...RequiredTimestamp,
    description:
      'Optimistic-concurrency token: when sent it must equal the current value (by instant), else read_only. Omit to skip the check.',
  }),
  deleted_at: Type.Optional({ ...NullableTimestamp, description: 'Read-only echo, compared by instant: else read_only.' }),
  tags: Type.Optional(
    Type.Array(Type.Unknown(), {
      'x-openapi': {
        type: 'array',
        // Documented inline: the published Tag is the response form, open to additive fields.
        items: { ...TagView, 'x-component': undefined },
        description:
          'Read-only echo, compared as a set by tag id and content (order ignored): else invalid_context (use the tags sub-resource).',
      },
    }),
  ),
};

export const READ_ONLY_ECHO_FIELDS = Object.keys(ReadOnlyEchoProperties);

/** The current values the echoes are compared with. */
export interface EchoTarget {
  id: number;
  external_key: string;
  created_at: number;
  updated_at: number;
  deleted_at: number | null;
  tags: TagView[];
}

function sameTagSet(sent: unknown[], current: TagView[]): boolean {
  if (sent.length !== current.length) return false;
  const byId = new Map(current.map((t) => [t.id, t]));
  const seen = new Set<number>();
  for (const item of sent) {
    if (item === null || typeof item !== 'object' || Array.isArray(item)) return false;
    const tag = item as Record<string, unknown>;
    if (Object.keys(tag).length !== 3) return false;
    const match = typeof tag.id === 'number' ? byId.get(tag.id) : undefined;
    if (match === undefined || seen.has(match.id) || tag.tag_type !== match.tag_type || tag.value !== match.value) return false;
    seen.add(match.id);
  }
  return true;
}

/**
 * Splits a schema-valid PATCH body into its writable part: echoes equal to the row are dropped,
 * differing ones are reported (id/created_at/updated_at/deleted_at read_only, external_key and tags
 * invalid_context). Returns the body without any echo field.
 */
export function takeReadOnlyEchoes(body: Record<string, unknown>, current: EchoTarget, errors: FieldError[]): Record<string, unknown> {
  const writable: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(body)) if (!READ_ONLY_ECHO_FIELDS.includes(key)) writable[key] = value;

  if (body.id !== undefined && body.id !== current.id) {
    errors.push(fieldError('id', 'read_only', `id is read-only; the value sent differs from the current id ${current.id}`));
  }
  if (body.external_key !== undefined && body.external_key !== current.external_key) {
    errors.push(fieldError('external_key', 'invalid_context', 'external_key cannot be changed by PATCH; use the rename endpoint'));
  }
  if (body.created_at !== undefined && requestTime(body.created_at) !== current.created_at) {
    errors.push(
      fieldError(
        'created_at',
        'read_only',
        `created_at is read-only; the value sent differs from the current value ${formatTimestamp(current.created_at)}`,
      ),
    );
  }
  if (body.updated_at !== undefined && requestTime(body.updated_at) !== current.updated_at) {
    errors.push(
      fieldError(
        'updated_at',
        'read_only',
        `updated_at ${String(body.updated_at)} does not match the current value ${formatTimestamp(current.updated_at)}: the record changed since it was read; re-read it or omit updated_at`,
      ),
    );
  }
  if (body.deleted_at !== undefined && requestTime(body.deleted_at) !== current.deleted_at) {
    errors.push(
      fieldError(
        'deleted_at',
        'read_only',
        `deleted_at is read-only; the value sent differs from the current value ${formatNullableTimestamp(current.deleted_at)}`,
      ),
    );
  }
  if (body.tags !== undefined && !sameTagSet(body.tags as unknown[], current.tags)) {
    errors.push(fieldError('tags', 'invalid_context', 'tags cannot be changed by PATCH; use the tags sub-resource'));
  }
  return writable;
}
