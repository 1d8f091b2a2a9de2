import type { AssetView } from '../assets/schemas.js';
import { insertAssetRow, recordAssetEvent } from '../assets/store.js';
import { eventLogOf } from '../events/log.js';
import { fieldError, type FieldError } from '../errors/catalog.js';
import { mintExternalKey, writerStatements } from '../masterdata/keys.js';
import { checkValidityWindow, nextUpdatedAt, requestTime } from '../masterdata/rules.js';
import type { TagRequestBody } from '../masterdata/tags.js';
import type { ShardWriter } from '../shards/writer.js';
import { formatNullableTimestamp, formatTimestamp } from '../wire/timestamps.js';
import { batchCommand, differs, type RowContext, type RowResult } from './batch.js';
import { applyTagSet, tagsFree } from './tagRows.js';

/**
 * An asset row of an import, on the writer: the rules of a single create (key free among live
 * rows, tags free in the org, valid_to after valid_from), or in upsert mode a change of the live
 * asset holding the row's external_key. A row equal to the stored asset writes nothing and keeps
 * its updated_at.
 */

interface StoredAsset {
  id: number;
  name: string;
  description: string | null;
  is_active: number;
  metadata: string;
  valid_from: number;
  valid_to: number | null;
  updated_at: number;
}

const LIVE_BY_KEY =
  'SELECT id, name, description, is_active, metadata, valid_from, valid_to, updated_at FROM assets WHERE org_id = ? AND external_key = ? AND deleted_at IS NULL';
const UPDATE =
  'UPDATE assets SET name = ?, description = ?, is_active = ?, metadata = ?, valid_from = ?, valid_to = ?, updated_at = ? WHERE id = ?';

const OWNER = { column: 'asset_id' } as const;

function create(shard: ShardWriter, context: RowContext, body: Record<string, unknown>, key: string | undefined): RowResult {
  const now = shard.now;
  const validFrom = requestTime(body.valid_from) ?? now;
  const validTo = requestTime(body.valid_to) ?? null;
  const errors: FieldError[] = [];
  checkValidityWindow(validFrom, validTo, errors);
  const tags = (body.tags as TagRequestBody[] | undefined) ?? [];
  errors.push(...tagsFree(shard, context.orgId, OWNER.column, undefined, tags));
  if (errors.length > 0) return { errors };
  const id = context.nextId('asset');
  const assetKey = key ?? mintExternalKey(shard, 'assets', context.orgId);
  insertAssetRow(shard, { id, orgId: context.orgId, key: assetKey, body, validFrom, validTo });
  // After the insert: the batch's text index rewrite then knows the asset had no index row (migration 016).
  const tagged = applyTagSet(shard, context, OWNER.column, id, tags, false);
  // The event's asset is what this row just inserted (the view a re-read would give, without the read).
  const at = formatTimestamp(now);
  const asset: AssetView = {
    id,
    external_key: assetKey,
    name: body.name as string,
    description: (body.description as string | null | undefined) ?? null,
    is_active: body.is_active !== false,
    valid_from: formatTimestamp(validFrom),
    valid_to: formatNullableTimestamp(validTo),
    created_at: at,
    updated_at: at,
    deleted_at: null,
    tags: tagged.inserted,
    metadata: (body.metadata as Record<string, unknown> | undefined) ?? {},
  };
  eventLogOf(shard).append(context.orgId, 'asset.created', { asset });
  return { outcome: 'created', tagsCreated: tagged.created };
}

function change(shard: ShardWriter, context: RowContext, body: Record<string, unknown>, stored: StoredAsset): RowResult {
  const has = (field: string) => body[field] !== undefined;
  const next = {
    name: body.name as string,
    description: has('description') ? (body.description as string | null) : stored.description,
    is_active: has('is_active') ? (body.is_active ? 1 : 0) : stored.is_active,
    metadata: has('metadata') ? JSON.stringify(body.metadata) : stored.metadata,
    valid_from: has('valid_from') ? (requestTime(body.valid_from) as number) : stored.valid_from,
    valid_to: has('valid_to') ? (requestTime(body.valid_to) as number | null) : stored.valid_to,
  };
  const errors: FieldError[] = [];
  checkValidityWindow(next.valid_from, next.valid_to, errors);
  const tags = body.tags as TagRequestBody[] | undefined;
  if (tags !== undefined) errors.push(...tagsFree(shard, context.orgId, OWNER.column, stored.id, tags));
  if (errors.length > 0) return { errors };
  const fieldsChanged = differs(next, stored);
  if (fieldsChanged) {
    writerStatements(shard)
      .get(UPDATE)
      .run(
        next.name,
        next.description,
        next.is_active,
        next.metadata,
        next.valid_from,
        next.valid_to,
        nextUpdatedAt(stored.updated_at, shard.now),
        stored.id,
      );
  }
  const tagged = tags === undefined ? { created: 0, changed: false } : applyTagSet(shard, context, OWNER.column, stored.id, tags, true);
  if (fieldsChanged || tagged.changed) recordAssetEvent(shard, context.orgId, stored.id, 'asset.updated');
  return { outcome: fieldsChanged || tagged.changed ? 'updated' : 'unchanged', tagsCreated: tagged.created };
}

export function applyAssetRow(shard: ShardWriter, context: RowContext, body: Record<string, unknown>): RowResult {
  const key = body.external_key as string | undefined;
  const stored =
    key === undefined ? undefined : (writerStatements(shard).get(LIVE_BY_KEY).get(context.orgId, key) as StoredAsset | undefined);
  if (stored === undefined) return create(shard, context, body, key);
  if (context.mode === 'create') {
    return {
      errors: [fieldError('external_key', 'conflict', `external_key '${key}' is already used by a live asset of this organization`)],
    };
  }
  return change(shard, context, body, stored);
}

export const assetBatchCommand = batchCommand('bulk.assets.apply', applyAssetRow);
