import { throwIfInvalid, type FieldError } from '../errors/catalog.js';
import { shardCommand } from '../shards/commands.js';
import type { RowEffects } from '../shards/generations.js';
import type { Shard } from '../shards/shard.js';
import type { ShardWriter } from '../shards/writer.js';
import type { StatementCache } from '../storage/sqlite.js';
import { takeReadOnlyEchoes } from '../masterdata/echo.js';
import { applyMasterFilters, masterPage, type TagMatch } from '../masterdata/filters.js';
import { writerStatements } from '../masterdata/keys.js';
import { orgQuery, type Page } from '../masterdata/list.js';
import { claimExternalKey, notFound, renameRow, softDeleteRow } from '../masterdata/rows.js';
import { checkValidityWindow, nextUpdatedAt, requestTime } from '../masterdata/rules.js';
import { insertTags, parseTagsJson, tagsJsonColumn, type TagOwner, type TagRequestBody } from '../masterdata/tags.js';
import { masterColumns, masterView, type MasterRow } from '../masterdata/view.js';
import type { AssetView } from './schemas.js';
import { eventLogOf } from '../events/log.js';

export const ASSET_TAGS: TagOwner = { table: 'assets', column: 'asset_id', noun: 'asset' };

const assetRow = (id: number): RowEffects => ({ table: 'assets', ids: [id] });

interface AssetRow extends MasterRow {
  metadata: string;
}

function toView(row: AssetRow): AssetView {
  return { ...masterView(row), metadata: JSON.parse(row.metadata) as Record<string, unknown> };
}

/** One point query: the live asset with its live tags (by-id reads skip the temporal rule). */
const BY_ID_SQL =
  `SELECT ${masterColumns('a').join(', ')}, a.metadata, ${tagsJsonColumn('a', 'asset_id')} ` +
  'FROM assets a WHERE a.id = ? AND a.org_id = ? AND a.deleted_at IS NULL';

function readRow(statements: StatementCache, orgId: number, id: number): AssetRow | undefined {
  return statements.get(BY_ID_SQL).get(id, orgId) as AssetRow | undefined;
}

/** GET /assets/{id}: the hottest read, on the shard's read-only connection, one prepared statement. */
export function getAsset(shard: Shard, orgId: number, id: number): AssetView {
  const row = readRow(shard.readerStatements, orgId, id);
  if (row === undefined) throw notFound('assets', id);
  return toView(row);
}

const SORT_COLUMNS = { external_key: 'a.external_key', name: 'a.name', created_at: 'a.created_at', updated_at: 'a.updated_at' };

export function listAssets(shard: Shard, orgId: number, query: Record<string, unknown>, now: number): Page<AssetView> {
  const build = (tagMatch: TagMatch) => applyMasterFilters(orgQuery('assets', 'a', orgId), 'a', orgId, query, now, 'asset_id', tagMatch);
  return masterPage(shard, build, {
    table: 'assets',
    alias: 'a',
    orgId,
    tagColumn: 'asset_id',
    query,
    columns: SORT_COLUMNS,
    extraSelect: ['a.metadata'],
    toView,
    now,
    indexedSorts: Object.keys(SORT_COLUMNS),
  });
}

/** Writer-side re-read after a write, in the same mailbox command. */
function readWritten(shard: ShardWriter, orgId: number, id: number): AssetView {
  return toView(readRow(writerStatements(shard), orgId, id)!);
}

/** Records an asset's created or updated event with the asset as this transaction left it (bulk rows too). */
export function recordAssetEvent(shard: ShardWriter, orgId: number, id: number, type: 'asset.created' | 'asset.updated'): void {
  eventLogOf(shard).append(orgId, type, { asset: readWritten(shard, orgId, id) });
}

/** The asset as a write left it, with its asset.updated event. */
function updated(shard: ShardWriter, orgId: number, id: number): AssetView {
  const view = readWritten(shard, orgId, id);
  eventLogOf(shard).append(orgId, 'asset.updated', { asset: view });
  return view;
}

export interface AssetCreateBody {
  external_key?: string;
  name: string;
  description?: string | null;
  is_active?: boolean;
  metadata?: Record<string, unknown>;
  valid_from?: string;
  valid_to?: string | null;
  tags?: TagRequestBody[];
}

/** The INSERT of a new asset row (created_at = updated_at = the command's now): single creates and imports. */
export function insertAssetRow(
  shard: ShardWriter,
  row: {
    id: number;
    orgId: number;
    key: string;
    body: AssetCreateBody | Record<string, unknown>;
    validFrom: number;
    validTo: number | null;
  },
): void {
  const { body } = row;
  writerStatements(shard)
    .get(
      'INSERT INTO assets (id, org_id, external_key, name, description, is_active, metadata, valid_from, valid_to, created_at, updated_at) ' +
        'VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
    )
    .run(
      row.id,
      row.orgId,
      row.key,
      body.name,
      body.description ?? null,
      body.is_active === false ? 0 : 1,
      JSON.stringify(body.metadata ?? {}),
      row.validFrom,
      row.validTo,
      shard.now,
      shard.now,
    );
}

const createCommand = shardCommand(
  'assets.create',
  (shard, { orgId, body }: { orgId: number; body: AssetCreateBody }): AssetView =>
    shard.transaction(() => {
      const now = shard.now;
      const validFrom = requestTime(body.valid_from) ?? now;
      const validTo = requestTime(body.valid_to) ?? null;
      const errors: FieldError[] = [];
      checkValidityWindow(validFrom, validTo, errors);
      throwIfInvalid(errors);
      const key = claimExternalKey(shard, 'assets', orgId, body.external_key);
      const id = shard.nextId('asset');
      // Tags first: the asset's insert then writes its q text index row once (migration 013).
      insertTags(shard, orgId, ASSET_TAGS, id, body.tags ?? [], now);
      insertAssetRow(shard, { id, orgId, key, body, validFrom, validTo });
      const view = readWritten(shard, orgId, id);
      eventLogOf(shard).append(orgId, 'asset.created', { asset: view });
      return view;
    }),
  { table: 'assets', ids: [] },
);

export function createAsset(shard: Shard, orgId: number, body: AssetCreateBody): Promise<AssetView> {
  return shard.send(createCommand, { orgId, body });
}

const PATCHED_COLUMNS = ['name', 'description', 'is_active', 'metadata', 'valid_from', 'valid_to'] as const;
type PatchedColumn = (typeof PATCHED_COLUMNS)[number];

/** RFC 7396 merge patch of the writable fields, after the read-only echo rules; all-or-nothing. */
const patchCommand = shardCommand(
  'assets.patch',
  (shard, { orgId, id, body }: { orgId: number; id: number; body: Record<string, unknown> }): AssetView => {
    const row = readRow(writerStatements(shard), orgId, id);
    if (row === undefined) throw notFound('assets', id);
    const errors: FieldError[] = [];
    const patch = takeReadOnlyEchoes(body, { ...row, tags: parseTagsJson(row.tags_json) }, errors);
    const has = (field: string) => Object.hasOwn(patch, field);
    const validFrom = has('valid_from') ? (requestTime(patch.valid_from) as number) : row.valid_from;
    const validTo = has('valid_to') ? (requestTime(patch.valid_to) as number | null) : row.valid_to;
    checkValidityWindow(validFrom, validTo, errors);
    throwIfInvalid(errors);
    const next: Record<PatchedColumn, unknown> = {
      name: has('name') ? patch.name : row.name,
      description: has('description') ? patch.description : row.description,
      is_active: has('is_active') ? (patch.is_active ? 1 : 0) : row.is_active,
      metadata: has('metadata') ? JSON.stringify(patch.metadata) : row.metadata,
      valid_from: validFrom,
      valid_to: validTo,
    };
    // Only the columns whose value changes are set: SQLite rewrites the entry of every index that
    // holds a column named in SET, changed or not (7 of the assets' indexes, each on a random page
    // for a random asset, and the scan positions' liveness trigger), which a description patch paid
    // in b-tree work and WAL pages at its commit (README, "Single node since the cluster work").
    const changed = PATCHED_COLUMNS.filter((column) => next[column] !== row[column]);
    writerStatements(shard)
      .get(`UPDATE assets SET ${changed.map((column) => `${column} = ?, `).join('')}updated_at = ? WHERE id = ? AND org_id = ?`)
      .run(...changed.map((column) => next[column]), nextUpdatedAt(row.updated_at, shard.now), id, orgId);
    return updated(shard, orgId, id);
  },
  ({ id }) => assetRow(id),
);

export function patchAsset(shard: Shard, orgId: number, id: number, body: Record<string, unknown>): Promise<AssetView> {
  return shard.send(patchCommand, { orgId, id, body });
}

const renameCommand = shardCommand(
  'assets.rename',
  (shard, { orgId, id, externalKey }: { orgId: number; id: number; externalKey: string }): AssetView => {
    if (!renameRow(shard, 'assets', orgId, id, externalKey, shard.now)) return readWritten(shard, orgId, id);
    return updated(shard, orgId, id);
  },
  ({ id }) => assetRow(id),
);

export function renameAsset(shard: Shard, orgId: number, id: number, externalKey: string): Promise<AssetView> {
  return shard.send(renameCommand, { orgId, id, externalKey });
}

const deleteCommand = shardCommand(
  'assets.delete',
  (shard, { orgId, id }: { orgId: number; id: number }): void => {
    const key = softDeleteRow(shard, 'assets', orgId, id, shard.now);
    eventLogOf(shard).append(orgId, 'asset.deleted', { asset: { id, external_key: key } });
  },
  ({ id }) => assetRow(id),
);

export function deleteAsset(shard: Shard, orgId: number, id: number): Promise<void> {
  return shard.send(deleteCommand, { orgId, id });
}
