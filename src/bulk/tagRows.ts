import { fieldError, type FieldError } from '../errors/catalog.js';
import { writerStatements } from '../masterdata/keys.js';
import type { TagView } from '../masterdata/fields.js';
import type { TagRequestBody } from '../masterdata/tags.js';
import type { ShardWriter } from '../shards/writer.js';
import type { RowContext } from './batch.js';

export type OwnerColumn = 'asset_id' | 'location_id';

const HOLDER = 'SELECT id, asset_id, location_id FROM tags WHERE org_id = ? AND tag_type = ? AND value = ? AND deleted_at IS NULL';

interface Holder {
  id: number;
  asset_id: number | null;
  location_id: number | null;
}

/**
 * The tag rule of a row: each (tag_type, value) is free among the org's live tags, or already held
 * by this very row (`ownerId`, upsert). A tag held by another asset or location is never moved: the
 * row fails (conflict), so no tag ends up on a row its file did not name.
 */
export function tagsFree(
  shard: ShardWriter,
  orgId: number,
  column: OwnerColumn,
  ownerId: number | undefined,
  tags: TagRequestBody[],
): FieldError[] {
  const holder = writerStatements(shard).get(HOLDER);
  const errors: FieldError[] = [];
  tags.forEach((tag, i) => {
    const held = holder.get(orgId, tag.tag_type, tag.value) as Holder | undefined;
    if (held === undefined || (ownerId !== undefined && held[column] === ownerId)) return;
    errors.push(
      fieldError(
        `tags[${i}]`,
        'conflict',
        `a tag with tag_type '${tag.tag_type}' and value '${tag.value}' already exists in this organization`,
      ),
    );
  });
  return errors;
}

/**
 * The owner's live tags. `+org_id` keeps the org out of SQLite's index choice: with the planner
 * statistics of a shard holding data when it opened (the writer's `optimize` at open), it searched
 * tags_live_natural_key on org_id alone, every live tag of the org for each row, instead of the
 * owner's index. An upsert of 100,000 assets into such a shard ran 1,000-row batches for seconds
 * each, until one waited past its deadline (503; bench/results/bulk-503-evidence.json).
 */
export const liveTagsSql = (column: OwnerColumn) =>
  `SELECT id, tag_type, value FROM tags WHERE ${column} = ? AND +org_id = ? AND deleted_at IS NULL`;

/**
 * Makes the owner's live tags the row's: inserts those it lacks and (`replace`, upsert of an
 * existing row) detaches those the row no longer lists. Runs after `tagsFree` passed. `inserted`:
 * the new tags as views, in id order (what a read of a new row's tags gives).
 */
export function applyTagSet(
  shard: ShardWriter,
  context: RowContext,
  column: OwnerColumn,
  ownerId: number,
  tags: TagRequestBody[],
  replace: boolean,
): { created: number; changed: boolean; inserted: TagView[] } {
  const statements = writerStatements(shard);
  let created = 0;
  let detached = 0;
  const wanted = new Set(tags.map((t) => `${t.tag_type}\u0000${t.value}`));
  if (replace) {
    const live = statements.get(liveTagsSql(column)).all(ownerId, context.orgId) as { id: number; tag_type: string; value: string }[];
    const detach = statements.get('UPDATE tags SET deleted_at = ? WHERE id = ?');
    for (const tag of live) {
      const key = `${tag.tag_type}\u0000${tag.value}`;
      if (wanted.delete(key)) continue;
      detach.run(shard.now, tag.id);
      detached++;
    }
  }
  const insert = statements.get(`INSERT INTO tags (id, org_id, tag_type, value, ${column}, created_at) VALUES (?, ?, ?, ?, ?, ?)`);
  const inserted: TagView[] = [];
  for (const tag of tags) {
    if (!wanted.delete(`${tag.tag_type}\u0000${tag.value}`)) continue;
    const id = context.nextId('tag');
    insert.run(id, context.orgId, tag.tag_type, tag.value, ownerId, shard.now);
    inserted.push({ id, tag_type: tag.tag_type, value: tag.value });
    created++;
  }
  return { created, changed: created > 0 || detached > 0, inserted };
}
