import { formatNullableTimestamp, formatTimestamp } from '../http/timestamps.js';
import type { TagView } from '../masterdata/fields.js';
import type { Db } from '../storage/sqlite.js';
import type { LocationView } from './schemas.js';
import type { LocationRow } from './store.js';

const tagStatements = new WeakMap<Db, import('better-sqlite3').Statement>();

/** Live tags of the given locations, grouped by location id, each group in id order. */
export function locationTags(db: Db, orgId: number, locationIds: number[]): Map<number, TagView[]> {
  let stmt = tagStatements.get(db);
  if (stmt === undefined) {
    stmt = db.prepare(
      `SELECT id, tag_type, value, location_id FROM tags
       WHERE org_id = ? AND location_id IN (SELECT value FROM json_each(?)) AND deleted_at IS NULL ORDER BY id`,
    );
    tagStatements.set(db, stmt);
  }
  const out = new Map<number, TagView[]>();
  if (locationIds.length === 0) return out;
  for (const t of stmt.all(orgId, JSON.stringify(locationIds)) as Array<TagView & { location_id: number }>) {
    let list = out.get(t.location_id);
    if (list === undefined) out.set(t.location_id, (list = []));
    list.push({ id: t.id, tag_type: t.tag_type, value: t.value });
  }
  return out;
}

export function toView(row: LocationRow, tags: TagView[]): LocationView {
  return {
    id: row.id,
    external_key: row.external_key,
    name: row.name,
    description: row.description,
    parent_id: row.parent_id,
    parent_external_key: row.parent_id === null ? null : row.parent_external_key,
    is_active: row.is_active === 1,
    valid_from: formatTimestamp(row.valid_from),
    valid_to: formatNullableTimestamp(row.valid_to),
    created_at: formatTimestamp(row.created_at),
    updated_at: formatTimestamp(row.updated_at),
    deleted_at: formatNullableTimestamp(row.deleted_at),
    tags,
  };
}

/** Views of rows in their given order, with their tags read in one query. */
export function toViews(db: Db, orgId: number, rows: LocationRow[]): LocationView[] {
  const tags = locationTags(
    db,
    orgId,
    rows.map((r) => r.id),
  );
  return rows.map((r) => toView(r, tags.get(r.id) ?? []));
}
