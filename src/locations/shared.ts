import { ApiError, fieldError, type FieldError } from '../errors/catalog.js';
import { parseTimestamp } from '../http/timestamps.js';
import type { TagView } from '../masterdata/fields.js';
import type { Shard } from '../shards/shard.js';
import type { Db } from '../storage/sqlite.js';

/*
 * INTERIM: master-data rules shared with assets (read-only echoes, key minting, valid window, tag
 * inserts). The assets branch is landing the shared versions in src/masterdata/; these move there.
 */

/** `updated_at` strictly advances on every accepted write, even within one millisecond. */
export function nextUpdatedAt(previous: number): number {
  return Math.max(Date.now(), previous + 1);
}

export function checkValidWindow(validFrom: number, validTo: number | null): FieldError[] {
  if (validTo === null || validTo > validFrom) return [];
  return [fieldError('valid_to', 'invalid_value', 'valid_to must be later than valid_from')];
}

/** Lowest unused `<PREFIX>-NNNN` slot among live rows (not a counter: freed slots are reused). */
export function mintExternalKey(db: Db, table: 'assets' | 'locations', orgId: number, prefix: string): string {
  const keys = db
    .prepare(`SELECT external_key FROM ${table} WHERE org_id = ? AND deleted_at IS NULL AND external_key GLOB ?`)
    .pluck()
    .all(orgId, `${prefix}-[0-9][0-9][0-9][0-9]*`) as string[];
  const used = new Set<number>();
  for (const key of keys) {
    const digits = key.slice(prefix.length + 1);
    if (/^\d+$/.test(digits) && String(Number(digits)).padStart(4, '0') === digits) used.add(Number(digits));
  }
  let slot = 1;
  while (used.has(slot)) slot++;
  return `${prefix}-${String(slot).padStart(4, '0')}`;
}

function sameInstant(echo: unknown, current: string | null): boolean {
  if (echo === null || current === null) return echo === current;
  if (typeof echo !== 'string') return false;
  const parsed = parseTimestamp(echo);
  return parsed !== undefined && parsed.ms === Date.parse(current);
}

function canonicalTag(tag: unknown): string {
  if (tag === null || typeof tag !== 'object' || Array.isArray(tag)) return JSON.stringify(tag);
  const entries = Object.entries(tag as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return JSON.stringify(entries);
}

function sameTagSet(echo: unknown, current: TagView[]): boolean {
  if (!Array.isArray(echo) || echo.length !== current.length) return false;
  const a = echo.map(canonicalTag).sort();
  const b = current.map(canonicalTag).sort();
  return a.every((x, i) => x === b[i]);
}

interface Current {
  id: number;
  external_key: string;
  created_at: string;
  updated_at: string;
  deleted_at: string | null;
  tags: TagView[];
}

/** Interface 4.7 rule 5: matching echoes are dropped (deleted from `body`), differing ones rejected. */
export function checkReadOnlyEchoes(body: Record<string, unknown>, current: Current): FieldError[] {
  const errors: FieldError[] = [];
  const drop = (field: string) => delete body[field];
  if (Object.hasOwn(body, 'id')) {
    if (body.id === current.id) drop('id');
    else errors.push(fieldError('id', 'read_only', 'id is read-only and differs from the current value'));
  }
  for (const field of ['created_at', 'deleted_at'] as const) {
    if (!Object.hasOwn(body, field)) continue;
    if (sameInstant(body[field], current[field])) drop(field);
    else errors.push(fieldError(field, 'read_only', `${field} is read-only and differs from the current value`));
  }
  if (Object.hasOwn(body, 'updated_at')) {
    if (sameInstant(body.updated_at, current.updated_at)) drop('updated_at');
    else
      errors.push(
        fieldError('updated_at', 'read_only', `updated_at does not match the current value ${current.updated_at}: the record changed since it was read; re-read it or omit updated_at`),
      );
  }
  if (Object.hasOwn(body, 'external_key')) {
    if (body.external_key === current.external_key) drop('external_key');
    else errors.push(fieldError('external_key', 'invalid_context', 'external_key cannot be changed by PATCH; use the rename operation'));
  }
  if (Object.hasOwn(body, 'tags')) {
    if (sameTagSet(body.tags, current.tags)) drop('tags');
    else errors.push(fieldError('tags', 'invalid_context', 'tags cannot be changed by PATCH; use the tags sub-resource'));
  }
  return errors;
}

/** Inserts tags for a new record; a live (tag_type, value) already in the organization is 409. */
export function insertTags(
  shard: Shard,
  db: Db,
  orgId: number,
  owner: { asset_id?: number; location_id?: number },
  tags: Array<{ tag_type: string; value: string }>,
  now: number,
): TagView[] {
  const exists = db.prepare('SELECT 1 FROM tags WHERE org_id = ? AND tag_type = ? AND value = ? AND deleted_at IS NULL').pluck();
  const insert = db.prepare('INSERT INTO tags (id, org_id, tag_type, value, asset_id, location_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)');
  const out: TagView[] = [];
  for (const t of tags) {
    if (exists.get(orgId, t.tag_type, t.value) !== undefined) {
      throw ApiError.conflict(`tag (${t.tag_type}, '${t.value}') is already attached to a live record of this organization`);
    }
    const id = shard.nextId('tag');
    insert.run(id, orgId, t.tag_type, t.value, owner.asset_id ?? null, owner.location_id ?? null, now);
    out.push({ id, tag_type: t.tag_type, value: t.value });
  }
  return out;
}
