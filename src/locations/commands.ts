import { conflict as conflictError } from '../errors/domain.js';
import { throwIfInvalid, type FieldError } from '../errors/catalog.js';
import { takeReadOnlyEchoes } from '../masterdata/echo.js';
import { writerStatements } from '../masterdata/keys.js';
import { claimExternalKey, notFound, renameRow, softDeleteRow } from '../masterdata/rows.js';
import { checkValidityWindow, nextUpdatedAt, requestTime } from '../masterdata/rules.js';
import { insertTags, parseTagsJson, type TagOwner, type TagRequestBody } from '../masterdata/tags.js';
import type { Route } from '../http/route.js';
import { shardCommand } from '../shards/commands.js';
import type { Shard } from '../shards/shard.js';
import type { ShardWriter } from '../shards/writer.js';
import { assertNoCycle, resolveParent } from './parent.js';
import type { LocationView } from './schemas.js';
import { readStatements, writeStatements, type LocationRow, type LocationStatements } from './store.js';
import { toView } from './view.js';
import { eventLogOf } from '../events/log.js';

/**
 * Location writes. Each runs as one command in the shard's mailbox, inside one transaction, so the
 * checks (key uniqueness, parent resolution, cycles, delete rules) and the write see the same state
 * and a rejected request changes nothing.
 */

export const LOCATION_TAGS: TagOwner = { table: 'locations', column: 'location_id', noun: 'location' };

function liveRow(stmts: LocationStatements, orgId: number, id: number): LocationRow {
  const row = stmts.liveById.get(orgId, id) as LocationRow | undefined;
  if (row === undefined) throw notFound('locations', id);
  return row;
}

const written = (stmts: LocationStatements, orgId: number, id: number) => toView(stmts.byId.get(orgId, id) as LocationRow);

/** Records a location's created or updated event with the location as this transaction left it (bulk rows too). */
export function recordLocationEvent(shard: ShardWriter, orgId: number, id: number, type: 'location.created' | 'location.updated'): void {
  eventLogOf(shard).append(orgId, type, { location: written(writeStatements(shard), orgId, id) });
}

interface BodyArgs {
  orgId: number;
  body: Record<string, unknown>;
}

/** The INSERT of a new location row (created_at = updated_at = the command's now): single creates and imports. */
export function insertLocationRow(
  shard: ShardWriter,
  row: {
    id: number;
    orgId: number;
    key: string;
    body: Record<string, unknown>;
    parentId: number | null;
    validFrom: number;
    validTo: number | null;
  },
): void {
  const { body } = row;
  writerStatements(shard)
    .get(
      'INSERT INTO locations (id, org_id, external_key, name, description, parent_id, is_active, valid_from, valid_to, created_at, updated_at) ' +
        'VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
    )
    .run(
      row.id,
      row.orgId,
      row.key,
      body.name,
      (body.description as string | null | undefined) ?? null,
      row.parentId,
      body.is_active === false ? 0 : 1,
      row.validFrom,
      row.validTo,
      shard.now,
      shard.now,
    );
}

const createCommand = shardCommand(
  'locations.create',
  (shard, { orgId, body }: BodyArgs): LocationView =>
    shard.transaction(() => {
      const stmts = writeStatements(shard);
      const now = shard.now;
      const errors: FieldError[] = [];
      const parent = resolveParent(stmts, orgId, body, undefined, errors);
      const validFrom = requestTime(body.valid_from) ?? now;
      const validTo = requestTime(body.valid_to) ?? null;
      checkValidityWindow(validFrom, validTo, errors);
      throwIfInvalid(errors);
      const key = claimExternalKey(shard, 'locations', orgId, body.external_key as string | undefined);
      const id = shard.nextId('location');
      // Tags first: the location's insert then writes its q text index row once (migration 013).
      insertTags(shard, orgId, LOCATION_TAGS, id, (body.tags as TagRequestBody[] | undefined) ?? [], now);
      insertLocationRow(shard, { id, orgId, key, body, parentId: parent.change ? parent.parentId : null, validFrom, validTo });
      const view = written(stmts, orgId, id);
      eventLogOf(shard).append(orgId, 'location.created', { location: view });
      return view;
    }),
  'any',
);

export function createLocation(shard: Shard, orgId: number, body: Record<string, unknown>): Promise<LocationView> {
  return shard.send(createCommand, { orgId, body });
}

/**
 * The PATCH rules that need the row: read-only echoes, parent rules, the merged validity window.
 * Failures go to `errors`; returns the writable part of the body and what it resolves to.
 */
function judgePatch(stmts: LocationStatements, orgId: number, row: LocationRow, body: Record<string, unknown>, errors: FieldError[]) {
  const patch = takeReadOnlyEchoes(body, { ...row, tags: parseTagsJson(row.tags_json) }, errors);
  const parent = resolveParent(stmts, orgId, patch, row, errors);
  const validFrom = Object.hasOwn(patch, 'valid_from') ? (requestTime(patch.valid_from) as number) : row.valid_from;
  const validTo = Object.hasOwn(patch, 'valid_to') ? (requestTime(patch.valid_to) as number | null) : row.valid_to;
  checkValidityWindow(validFrom, validTo, errors);
  return { patch, parent, validFrom, validTo };
}

const usable = (body: Record<string, unknown>, failed: Set<string>) =>
  Object.fromEntries(Object.entries(body).filter(([field]) => !failed.has(field)));

/** The create rules that need data (parent rules), for a body that already failed elsewhere (Route.body.resolve). */
export const createDataErrors: NonNullable<NonNullable<Route['body']>['resolve']> = (body, { shard, orgId }, failed) => {
  const errors: FieldError[] = [];
  resolveParent(readStatements(shard), orgId, usable(body, failed), undefined, errors);
  return errors;
};

/** The PATCH rules that need the row, for a body that already failed elsewhere (Route.body.resolve). */
export const patchDataErrors: NonNullable<NonNullable<Route['body']>['resolve']> = (body, { shard, orgId, params }, failed) => {
  const stmts = readStatements(shard);
  const row = stmts.liveById.get(orgId, params.location_id) as LocationRow | undefined;
  if (row === undefined) return [];
  const errors: FieldError[] = [];
  judgePatch(stmts, orgId, row, usable(body, failed), errors);
  return errors;
};

/** RFC 7396 merge patch of the writable fields, after the read-only echo and parent rules; all-or-nothing. */
const patchCommand = shardCommand(
  'locations.patch',
  (shard, { orgId, id, body }: BodyArgs & { id: number }): LocationView =>
    shard.transaction(() => {
      const stmts = writeStatements(shard);
      const row = liveRow(stmts, orgId, id);
      const errors: FieldError[] = [];
      const { patch, parent, validFrom, validTo } = judgePatch(stmts, orgId, row, body, errors);
      throwIfInvalid(errors);
      const has = (field: string) => Object.hasOwn(patch, field);
      const parentId = parent.change ? parent.parentId : row.parent_id;
      if (parentId !== row.parent_id) assertNoCycle(stmts, orgId, id, parentId);
      writerStatements(shard)
        .get(
          'UPDATE locations SET name = ?, description = ?, is_active = ?, parent_id = ?, valid_from = ?, valid_to = ?, updated_at = ? ' +
            'WHERE id = ? AND org_id = ?',
        )
        .run(
          has('name') ? patch.name : row.name,
          has('description') ? patch.description : row.description,
          has('is_active') ? (patch.is_active ? 1 : 0) : row.is_active,
          parentId,
          validFrom,
          validTo,
          nextUpdatedAt(row.updated_at, shard.now),
          id,
          orgId,
        );
      const view = written(stmts, orgId, id);
      eventLogOf(shard).append(orgId, 'location.updated', { location: view });
      return view;
    }),
  'any',
);

export function patchLocation(shard: Shard, orgId: number, id: number, body: Record<string, unknown>): Promise<LocationView> {
  return shard.send(patchCommand, { orgId, id, body });
}

/** Soft-deletes a leaf: live descendants are checked first, then live assets placed at it. */
const deleteCommand = shardCommand(
  'locations.delete',
  (shard, { orgId, id }: { orgId: number; id: number }): void =>
    shard.transaction(() => {
      const stmts = writeStatements(shard);
      liveRow(stmts, orgId, id);
      // Any live descendant implies a live child: a location with live children cannot be deleted,
      // and nothing can be placed under a soft-deleted one.
      if (stmts.hasLiveChild.get(orgId, id) === 1) {
        throw conflictError('location has descendant locations; delete or move them first, cascade is not supported');
      }
      if (shard.ports.placement.hasLiveAssetsAt(shard, orgId, id)) {
        throw conflictError('location has assets placed at it; they stay until scanned elsewhere or deleted, cascade is not supported');
      }
      const key = softDeleteRow(shard, 'locations', orgId, id, shard.now);
      eventLogOf(shard).append(orgId, 'location.deleted', { location: { id, external_key: key } });
    }),
  'any',
);

export function deleteLocation(shard: Shard, orgId: number, id: number): Promise<void> {
  return shard.send(deleteCommand, { orgId, id });
}

export interface RenameOutcome {
  data: LocationView;
  descendant_count_affected: number;
}

const renameCommand = shardCommand(
  'locations.rename',
  (shard, { orgId, id, key }: { orgId: number; id: number; key: string }): RenameOutcome => {
    const stmts = writeStatements(shard);
    const changed = renameRow(shard, 'locations', orgId, id, key, shard.now);
    const count = changed ? (stmts.liveDescendantCount.get({ org: orgId, id }) as number) : 0;
    const view = written(stmts, orgId, id);
    if (changed) eventLogOf(shard).append(orgId, 'location.updated', { location: view });
    return { data: view, descendant_count_affected: count };
  },
  'any',
);

export function renameLocation(shard: Shard, orgId: number, id: number, key: string): Promise<RenameOutcome> {
  return shard.send(renameCommand, { orgId, id, key });
}
