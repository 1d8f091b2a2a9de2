import { DomainError } from '../errors/domain.js';
import { fieldError, type FieldError } from '../errors/catalog.js';
import { insertLocationRow, recordLocationEvent } from '../locations/commands.js';
import { assertNoCycle, resolveParent } from '../locations/parent.js';
import { writeStatements, type LocationRow } from '../locations/store.js';
import { mintExternalKey, writerStatements } from '../masterdata/keys.js';
import { checkValidityWindow, nextUpdatedAt, requestTime } from '../masterdata/rules.js';
import type { TagRequestBody } from '../masterdata/tags.js';
import type { ShardWriter } from '../shards/writer.js';
import { batchCommand, differs, type RowContext, type RowResult } from './batch.js';
import { applyTagSet, tagsFree } from './tagRows.js';

/**
 * A location row of an import, on the writer: the parent rules of a single create (parent_id or
 * parent_external_key, fk_not_found, ambiguous_fields), or in upsert mode those of a PATCH (a move
 * into the location's own subtree is a conflict). Rows arrive parents first (locationOrder.ts), so a
 * parent created by an earlier row of the file resolves like any stored one.
 */

const UPDATE =
  'UPDATE locations SET name = ?, description = ?, is_active = ?, parent_id = ?, valid_from = ?, valid_to = ?, updated_at = ? WHERE id = ?';

function create(shard: ShardWriter, context: RowContext, body: Record<string, unknown>, key: string | undefined): RowResult {
  const now = shard.now;
  const errors: FieldError[] = [];
  const parent = resolveParent(writeStatements(shard), context.orgId, body, undefined, errors);
  const validFrom = requestTime(body.valid_from) ?? now;
  const validTo = requestTime(body.valid_to) ?? null;
  checkValidityWindow(validFrom, validTo, errors);
  const tags = (body.tags as TagRequestBody[] | undefined) ?? [];
  errors.push(...tagsFree(shard, context.orgId, 'location_id', undefined, tags));
  if (errors.length > 0) return { errors };
  const id = context.nextId('location');
  const locationKey = key ?? mintExternalKey(shard, 'locations', context.orgId);
  insertLocationRow(shard, {
    id,
    orgId: context.orgId,
    key: locationKey,
    body,
    parentId: parent.change ? parent.parentId : null,
    validFrom,
    validTo,
  });
  // After the insert: the batch's text index rewrite then knows the location had no index row (migration 016).
  const tagsCreated = applyTagSet(shard, context, 'location_id', id, tags, false).created;
  recordLocationEvent(shard, context.orgId, id, 'location.created');
  return { outcome: 'created', tagsCreated };
}

function change(shard: ShardWriter, context: RowContext, body: Record<string, unknown>, stored: LocationRow): RowResult {
  const stmts = writeStatements(shard);
  const has = (field: string) => body[field] !== undefined;
  const errors: FieldError[] = [];
  const parent = resolveParent(stmts, context.orgId, body, stored, errors);
  const next = {
    name: body.name as string,
    description: has('description') ? (body.description as string | null) : stored.description,
    is_active: has('is_active') ? (body.is_active ? 1 : 0) : stored.is_active,
    parent_id: parent.change ? parent.parentId : stored.parent_id,
    valid_from: has('valid_from') ? (requestTime(body.valid_from) as number) : stored.valid_from,
    valid_to: has('valid_to') ? (requestTime(body.valid_to) as number | null) : stored.valid_to,
  };
  checkValidityWindow(next.valid_from, next.valid_to, errors);
  const tags = body.tags as TagRequestBody[] | undefined;
  if (tags !== undefined) errors.push(...tagsFree(shard, context.orgId, 'location_id', stored.id, tags));
  if (errors.length === 0 && next.parent_id !== stored.parent_id) {
    try {
      assertNoCycle(stmts, context.orgId, stored.id, next.parent_id);
    } catch (err) {
      if (!(err instanceof DomainError)) throw err;
      errors.push(fieldError(has('parent_id') ? 'parent_id' : 'parent_external_key', 'conflict', err.detail));
    }
  }
  if (errors.length > 0) return { errors };
  const fieldsChanged = differs(next, stored);
  if (fieldsChanged) {
    writerStatements(shard)
      .get(UPDATE)
      .run(
        next.name,
        next.description,
        next.is_active,
        next.parent_id,
        next.valid_from,
        next.valid_to,
        nextUpdatedAt(stored.updated_at, shard.now),
        stored.id,
      );
  }
  const tagged = tags === undefined ? { created: 0, changed: false } : applyTagSet(shard, context, 'location_id', stored.id, tags, true);
  if (fieldsChanged || tagged.changed) recordLocationEvent(shard, context.orgId, stored.id, 'location.updated');
  return { outcome: fieldsChanged || tagged.changed ? 'updated' : 'unchanged', tagsCreated: tagged.created };
}

export function applyLocationRow(shard: ShardWriter, context: RowContext, body: Record<string, unknown>): RowResult {
  const stmts = writeStatements(shard);
  const key = body.external_key as string | undefined;
  const storedId = key === undefined ? undefined : (stmts.liveIdByKey.get(context.orgId, key) as number | undefined);
  if (storedId === undefined) return create(shard, context, body, key);
  if (context.mode === 'create') {
    return {
      errors: [fieldError('external_key', 'conflict', `external_key '${key}' is already used by a live location of this organization`)],
    };
  }
  return change(shard, context, body, stmts.liveById.get(context.orgId, storedId) as LocationRow);
}

export const locationBatchCommand = batchCommand('bulk.locations.apply', applyLocationRow);
