import type { Knex } from 'knex';

export const name = '015_q_count_outside';

/**
 * The rows of an organization that a list's default scope leaves out and no index listed yet: the
 * soft-deleted ones, and the live inactive ones (for `is_active=true`). With the other orgs' rows
 * (`<table>_org_key`) and the live rows outside their validity window (migration 008) they are the
 * rows a text index count of `q` must not count (src/masterdata/textCounts.ts). Both are partial:
 * a write pays for them only when its row is (or was) deleted or inactive.
 */
const INDEXES = [
  'assets_deleted ON assets (org_id) WHERE deleted_at IS NOT NULL',
  'assets_live_inactive ON assets (org_id) WHERE deleted_at IS NULL AND is_active = 0',
  'locations_deleted ON locations (org_id) WHERE deleted_at IS NOT NULL',
  'locations_live_inactive ON locations (org_id) WHERE deleted_at IS NULL AND is_active = 0',
];

export async function up(knex: Knex): Promise<void> {
  for (const index of INDEXES) await knex.raw(`CREATE INDEX ${index}`);
}

export async function down(knex: Knex): Promise<void> {
  for (const index of INDEXES) await knex.raw(`DROP INDEX ${index.split(' ')[0]}`);
}
