import { ApiError, throwIfInvalid, type FieldError } from '../errors/catalog.js';
import { parseTimestamp } from '../http/timestamps.js';
import type { Shard } from '../shards/shard.js';
import type { Db } from '../storage/sqlite.js';
import { checkReadOnlyEchoes, checkValidWindow, insertTags, mintExternalKey, nextUpdatedAt } from './shared.js';
import { assertNoCycle, resolveParent } from './parent.js';
import type { LocationView } from './schemas.js';
import { writeCache, writeStatements, type LocationRow, type LocationStatements } from './store.js';
import { locationTags, toView } from './view.js';
import { hasLiveAssetsAt } from '../scans/placement.js';

/**
 * Location writes. Each runs as one command in the shard's mailbox, inside one transaction, so the
 * checks (key uniqueness, parent resolution, cycles, delete rules) and the write see the same state
 * and a rejected request changes nothing.
 */

const ms = (text: string) => parseTimestamp(text)!.ms;

function viewOf(db: Db, stmts: LocationStatements, orgId: number, id: number): LocationView {
  const row = stmts.byId.get(orgId, id) as LocationRow;
  return toView(row, locationTags(db, orgId, [id]).get(id) ?? []);
}

function liveRow(stmts: LocationStatements, orgId: number, id: number): LocationRow {
  const row = stmts.liveById.get(orgId, id) as LocationRow | undefined;
  if (row === undefined) throw ApiError.notFound(`location ${id} not found`);
  return row;
}

function keyTaken(key: string): ApiError {
  return ApiError.conflict(`external_key '${key}' is already used by a live location of this organization`);
}

export function createLocation(shard: Shard, orgId: number, body: Record<string, unknown>): Promise<LocationView> {
  return shard.write((db) => {
    const stmts = writeStatements(shard);
    return db.transaction(() => {
      const now = Date.now();
      const errors: FieldError[] = [];
      const parent = resolveParent(stmts, orgId, body, undefined, errors);
      const validFrom = body.valid_from === undefined ? now : ms(body.valid_from as string);
      const validTo = body.valid_to === undefined || body.valid_to === null ? null : ms(body.valid_to as string);
      errors.push(...checkValidWindow(validFrom, validTo));
      throwIfInvalid(errors);
      let key = body.external_key as string | undefined;
      if (key !== undefined && stmts.liveIdByKey.get(orgId, key) !== undefined) throw keyTaken(key);
      key ??= mintExternalKey(db, 'locations', orgId, 'LOC');
      const id = shard.nextId('location');
      writeCache(shard).get(
        `INSERT INTO locations (id, org_id, external_key, name, description, parent_id, is_active, valid_from, valid_to, created_at, updated_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      ).run(
        id,
        orgId,
        key,
        body.name,
        (body.description as string | null | undefined) ?? null,
        parent.change ? parent.parentId : null,
        body.is_active === false ? 0 : 1,
        validFrom,
        validTo,
        now,
        now,
      );
      if (Array.isArray(body.tags)) insertTags(shard, db, orgId, { location_id: id }, body.tags as Array<{ tag_type: string; value: string }>, now);
      return viewOf(db, stmts, orgId, id);
    })();
  });
}

const WRITABLE = ['name', 'description', 'is_active', 'valid_from', 'valid_to'] as const;

export function patchLocation(shard: Shard, orgId: number, id: number, body: Record<string, unknown>): Promise<LocationView> {
  return shard.write((db) => {
    const stmts = writeStatements(shard);
    return db.transaction(() => {
      const row = liveRow(stmts, orgId, id);
      const current = toView(row, locationTags(db, orgId, [id]).get(id) ?? []);
      const errors = checkReadOnlyEchoes(body, current);
      const parent = resolveParent(stmts, orgId, body, row, errors);
      if (Object.hasOwn(body, 'valid_from') || Object.hasOwn(body, 'valid_to')) {
        const validFrom = body.valid_from === undefined ? row.valid_from : ms(body.valid_from as string);
        const validTo = body.valid_to === undefined ? row.valid_to : body.valid_to === null ? null : ms(body.valid_to as string);
        errors.push(...checkValidWindow(validFrom, validTo));
      }
      throwIfInvalid(errors);
      if (parent.change && parent.parentId !== row.parent_id) assertNoCycle(stmts, orgId, id, parent.parentId);

      const sets: string[] = [];
      const values: unknown[] = [];
      for (const field of WRITABLE) {
        if (!Object.hasOwn(body, field)) continue;
        const v = body[field];
        sets.push(`${field} = ?`);
        if (field === 'is_active') values.push(v ? 1 : 0);
        else if (field === 'valid_from' || field === 'valid_to') values.push(v === null ? null : ms(v as string));
        else values.push(v);
      }
      if (parent.change) {
        sets.push('parent_id = ?');
        values.push(parent.parentId);
      }
      sets.push('updated_at = ?');
      values.push(nextUpdatedAt(row.updated_at));
      writeCache(shard).get(`UPDATE locations SET ${sets.join(', ')} WHERE org_id = ? AND id = ?`).run(...values, orgId, id);
      return viewOf(db, stmts, orgId, id);
    })();
  });
}

export function deleteLocation(shard: Shard, orgId: number, id: number): Promise<void> {
  return shard.write((db) => {
    const stmts = writeStatements(shard);
    db.transaction(() => {
      const row = liveRow(stmts, orgId, id);
      if (stmts.hasLiveChild.get(orgId, id) === 1) {
        throw ApiError.conflict('location has descendant locations; delete or move them first, cascade is not supported');
      }
      if (hasLiveAssetsAt(db, orgId, id)) {
        throw ApiError.conflict('location has assets placed at it; they stay there until scanned elsewhere, cascade is not supported');
      }
      const now = Math.max(Date.now(), row.updated_at);
      writeCache(shard).get('UPDATE locations SET deleted_at = ?, updated_at = ? WHERE org_id = ? AND id = ?').run(now, now, orgId, id);
    })();
  });
}

export interface RenameOutcome {
  data: LocationView;
  descendant_count_affected: number;
}

export function renameLocation(shard: Shard, orgId: number, id: number, key: string): Promise<RenameOutcome> {
  return shard.write((db) => {
    const stmts = writeStatements(shard);
    return db.transaction(() => {
      const row = liveRow(stmts, orgId, id);
      if (row.external_key === key) return { data: viewOf(db, stmts, orgId, id), descendant_count_affected: 0 };
      if (stmts.liveIdByKey.get(orgId, key) !== undefined) throw keyTaken(key);
      writeCache(shard).get('UPDATE locations SET external_key = ?, updated_at = ? WHERE org_id = ? AND id = ?').run(
        key,
        nextUpdatedAt(row.updated_at),
        orgId,
        id,
      );
      const count = stmts.liveDescendantCount.get({ org: orgId, id }) as number;
      return { data: viewOf(db, stmts, orgId, id), descendant_count_affected: count };
    })();
  });
}
