import type { Knex } from 'knex';

export const name = '011_bulk_jobs';

/**
 * Bulk import jobs (src/bulk): one row per job, written only by recorded shard commands (begin,
 * each applied batch, finish), so a replay of the shard's records rebuilds them like any other table
 * and a batch's data and the job's counts commit in one transaction. Row errors are kept per job up
 * to a bound (BULK_LIMITS.errorsKept); `failed` counts them all.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE TABLE bulk_jobs (
      job_id TEXT PRIMARY KEY,
      org_id INTEGER NOT NULL,
      kind TEXT NOT NULL,
      mode TEXT NOT NULL,
      dry_run INTEGER NOT NULL,
      atomic INTEGER NOT NULL,
      format TEXT NOT NULL,
      status TEXT NOT NULL,
      idempotency_key TEXT,
      total INTEGER,
      processed INTEGER NOT NULL DEFAULT 0,
      failed INTEGER NOT NULL DEFAULT 0,
      created INTEGER NOT NULL DEFAULT 0,
      updated INTEGER NOT NULL DEFAULT 0,
      unchanged INTEGER NOT NULL DEFAULT 0,
      tags_created INTEGER NOT NULL DEFAULT 0,
      applied_through_row INTEGER NOT NULL DEFAULT 0,
      errors_dropped INTEGER NOT NULL DEFAULT 0,
      detail TEXT,
      created_at INTEGER NOT NULL,
      updated_at INTEGER NOT NULL,
      finished_at INTEGER
    )`);
  await knex.raw('CREATE INDEX bulk_jobs_org ON bulk_jobs (org_id, kind, status)');
  await knex.raw(
    'CREATE UNIQUE INDEX bulk_jobs_idempotency ON bulk_jobs (org_id, kind, idempotency_key) WHERE idempotency_key IS NOT NULL',
  );
  await knex.raw(`
    CREATE TABLE bulk_job_errors (
      job_id TEXT NOT NULL,
      seq INTEGER NOT NULL,
      row INTEGER NOT NULL,
      field TEXT NOT NULL,
      code TEXT NOT NULL,
      message TEXT NOT NULL,
      PRIMARY KEY (job_id, seq)
    ) WITHOUT ROWID`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP TABLE bulk_job_errors');
  await knex.raw('DROP TABLE bulk_jobs');
}
