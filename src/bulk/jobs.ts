import { conflict, notFound } from '../errors/domain.js';
import { writerStatements } from '../masterdata/keys.js';
import { shardCommand } from '../shards/commands.js';
import type { Shard } from '../shards/shard.js';
import type { ShardWriter } from '../shards/writer.js';
import type { Db } from '../storage/sqlite.js';
import { formatNullableTimestamp, formatTimestamp } from '../wire/timestamps.js';
import { BULK_LIMITS } from './limits.js';
import { restoreWriterCache } from './writerCache.js';

/**
 * Bulk import jobs as shard state (table bulk_jobs, migration 011). Every change to a job is a
 * recorded shard command, so a replay or the journal rebuilds jobs like any other table, and a
 * batch's rows and the job's counts commit in one transaction: whatever the process went through,
 * the counts say exactly what the data holds.
 */

export type BulkKind = 'assets' | 'locations';
export type BulkMode = 'create' | 'upsert';
export type BulkFormat = 'csv' | 'ndjson';
export type JobStatus = 'pending' | 'processing' | 'completed' | 'failed';

/** One row error as the job reports it: the 1-based data row (a CSV header is not a row), the field, the code and why. */
export interface RowError {
  row: number;
  field: string;
  error: string;
  message: string;
}

export interface JobOptions {
  kind: BulkKind;
  mode: BulkMode;
  dryRun: boolean;
  atomic: boolean;
  format: BulkFormat;
}

interface JobRow {
  job_id: string;
  org_id: number;
  kind: BulkKind;
  mode: BulkMode;
  dry_run: number;
  atomic: number;
  format: BulkFormat;
  status: JobStatus;
  idempotency_key: string | null;
  total: number | null;
  processed: number;
  failed: number;
  created: number;
  updated: number;
  unchanged: number;
  tags_created: number;
  applied_through_row: number;
  errors_dropped: number;
  detail: string | null;
  created_at: number;
  updated_at: number;
  finished_at: number | null;
}

/** The job status document (TrakRF's fields, plus created/updated/unchanged and what the counts rest on). */
export interface JobView {
  job_id: string;
  kind: BulkKind;
  status: JobStatus;
  mode: BulkMode;
  dry_run: boolean;
  atomic: boolean;
  format: BulkFormat;
  total_rows: number | null;
  processed_rows: number;
  failed_rows: number;
  created: number;
  updated: number;
  unchanged: number;
  tags_created: number;
  applied_through_row: number;
  detail: string | null;
  errors: RowError[];
  errors_truncated: boolean;
  created_at: string;
  updated_at: string;
  completed_at: string | null;
  expires_at: string | null;
}

const JOB_SQL = 'SELECT * FROM bulk_jobs WHERE org_id = ? AND job_id = ?';
const ERRORS_SQL = 'SELECT row, field, code AS error, message FROM bulk_job_errors WHERE job_id = ? ORDER BY seq LIMIT ?';

function toView(row: JobRow, errors: RowError[]): JobView {
  return {
    job_id: row.job_id,
    kind: row.kind,
    status: row.status,
    mode: row.mode,
    dry_run: row.dry_run === 1,
    atomic: row.atomic === 1,
    format: row.format,
    total_rows: row.total,
    processed_rows: row.processed,
    failed_rows: row.failed,
    created: row.created,
    updated: row.updated,
    unchanged: row.unchanged,
    tags_created: row.tags_created,
    applied_through_row: row.applied_through_row,
    detail: row.detail,
    errors,
    errors_truncated: row.errors_dropped > 0,
    created_at: formatTimestamp(row.created_at),
    updated_at: formatTimestamp(row.updated_at),
    completed_at: formatNullableTimestamp(row.finished_at),
    expires_at: row.finished_at === null ? null : formatTimestamp(row.finished_at + BULK_LIMITS.jobRetentionMs),
  };
}

function readJob(db: Db, orgId: number, jobId: string): JobView | undefined {
  const row = db.prepare(JOB_SQL).get(orgId, jobId) as JobRow | undefined;
  if (row === undefined) return undefined;
  const errors = db.prepare(ERRORS_SQL).all(jobId, BULK_LIMITS.errorsKept) as RowError[];
  return toView(row, errors);
}

/** GET .../bulk/{job_id}: the job of the caller's organization, else 404 (another org's job is not found). */
export function getJob(shard: Shard, orgId: number, kind: BulkKind, jobId: string): JobView {
  const job = readJob(shard.reader, orgId, jobId);
  if (job === undefined || job.kind !== kind) throw notFound(`bulk job ${jobId} not found`);
  return job;
}

/** The job an Idempotency-Key already started, if any (read side, before the body is read). */
export function jobByIdempotencyKey(shard: Shard, orgId: number, kind: BulkKind, key: string): string | undefined {
  const row = shard.reader
    .prepare('SELECT job_id FROM bulk_jobs WHERE org_id = ? AND kind = ? AND idempotency_key = ?')
    .get(orgId, kind, key) as { job_id: string } | undefined;
  return row?.job_id;
}

/** Forgets the organization's jobs finished longer ago than the retention (inside a recorded command: a function of its now). */
function purgeExpired(shard: ShardWriter, orgId: number): void {
  const statements = writerStatements(shard);
  const horizon = shard.now - BULK_LIMITS.jobRetentionMs;
  const expired = statements
    .get('SELECT job_id FROM bulk_jobs WHERE org_id = ? AND finished_at IS NOT NULL AND finished_at < ?')
    .pluck()
    .all(orgId, horizon) as string[];
  for (const jobId of expired) {
    statements.get('DELETE FROM bulk_job_errors WHERE job_id = ?').run(jobId);
    statements.get('DELETE FROM bulk_jobs WHERE job_id = ?').run(jobId);
  }
}

export interface BeginArgs extends JobOptions {
  orgId: number;
  jobId: string;
  idempotencyKey: string | null;
}

/**
 * Starts a job: the same Idempotency-Key of the same org and kind answers the job it started
 * (`existing`); a job of the same org and kind still processing refuses a second one (409).
 */
const beginCommand = shardCommand(
  'bulk.begin',
  (shard, args: BeginArgs): { jobId: string; existing: boolean } =>
    shard.transaction(() => {
      const statements = writerStatements(shard);
      purgeExpired(shard, args.orgId);
      if (args.idempotencyKey !== null) {
        const same = statements
          .get('SELECT job_id FROM bulk_jobs WHERE org_id = ? AND kind = ? AND idempotency_key = ?')
          .get(args.orgId, args.kind, args.idempotencyKey) as { job_id: string } | undefined;
        if (same !== undefined) return { jobId: same.job_id, existing: true };
      }
      const running = statements
        .get("SELECT job_id FROM bulk_jobs WHERE org_id = ? AND kind = ? AND status IN ('pending', 'processing')")
        .get(args.orgId, args.kind) as { job_id: string } | undefined;
      if (running !== undefined) {
        throw conflict(`a bulk import of ${args.kind} is already running for this organization (job ${running.job_id}); one at a time`);
      }
      statements
        .get(
          `INSERT INTO bulk_jobs (job_id, org_id, kind, mode, dry_run, atomic, format, status, idempotency_key, created_at, updated_at)
           VALUES (?, ?, ?, ?, ?, ?, ?, 'processing', ?, ?, ?)`,
        )
        .run(
          args.jobId,
          args.orgId,
          args.kind,
          args.mode,
          args.dryRun ? 1 : 0,
          args.atomic ? 1 : 0,
          args.format,
          args.idempotencyKey,
          shard.now,
          shard.now,
        );
      return { jobId: args.jobId, existing: false };
    }),
  'scans',
);

export function beginJob(shard: Shard, args: BeginArgs): Promise<{ jobId: string; existing: boolean }> {
  return shard.send(beginCommand, args);
}

/** What one batch did, added to its job's counts in the batch's own transaction. */
export interface BatchOutcome {
  processed: number;
  created: number;
  updated: number;
  unchanged: number;
  tagsCreated: number;
  /** Rows that failed (each may carry several errors). */
  failedRows: number;
  errors: RowError[];
  /** The last row of the batch: every row up to it has been judged, and applied unless it failed. */
  throughRow: number;
}

/** The job a batch belongs to, still processing, else the batch is refused (its job was abandoned or finished). */
export function processingJob(shard: ShardWriter, orgId: number, jobId: string): JobRow {
  const row = writerStatements(shard).get(JOB_SQL).get(orgId, jobId) as JobRow | undefined;
  if (row === undefined || row.status !== 'processing') throw conflict(`bulk job ${jobId} is not processing`);
  return row;
}

/** Adds a batch's outcome to its job (writer side, inside the batch's transaction). */
export function recordOutcome(shard: ShardWriter, jobId: string, outcome: BatchOutcome): void {
  const statements = writerStatements(shard);
  const kept = statements.get('SELECT count(*) FROM bulk_job_errors WHERE job_id = ?').pluck().get(jobId) as number;
  const insert = statements.get('INSERT INTO bulk_job_errors (job_id, seq, row, field, code, message) VALUES (?, ?, ?, ?, ?, ?)');
  let seq = kept;
  for (const e of outcome.errors) {
    if (seq >= BULK_LIMITS.errorsKept) break;
    insert.run(jobId, seq++, e.row, e.field, e.error, e.message);
  }
  statements
    .get(
      `UPDATE bulk_jobs SET processed = processed + ?, failed = failed + ?, created = created + ?, updated = updated + ?,
         unchanged = unchanged + ?, tags_created = tags_created + ?, applied_through_row = max(applied_through_row, ?),
         errors_dropped = errors_dropped + ?, updated_at = ?
       WHERE job_id = ?`,
    )
    .run(
      outcome.processed,
      outcome.failedRows,
      outcome.created,
      outcome.updated,
      outcome.unchanged,
      outcome.tagsCreated,
      outcome.throughRow,
      Math.max(0, outcome.errors.length - (seq - kept)),
      shard.now,
      jobId,
    );
}

export interface FinishArgs {
  orgId: number;
  jobId: string;
  /** Rows the body held (known once it was read to its end; null when it never was). */
  total: number | null;
  status: 'completed' | 'failed';
  detail: string | null;
}

/**
 * Planner statistics after a job, so that plans are not those of the shard's open. SQLite plans
 * with the bound values against STAT4 samples, and an org the samples never saw looks empty (an
 * import into a new org is exactly that: bench/results/bulk-503-evidence.json). A job that created
 * at least a tenth of its table's rows re-analyzes that table and the tags (a full ANALYZE: a
 * limited one keeps no STAT4 samples and misjudges the org index); `optimize` then covers tables
 * never analyzed or grown tenfold (the event log), and is a no-op otherwise.
 */
function refreshStatistics(shard: ShardWriter, kind: BulkKind, created: number): void {
  const rows = shard.writer.prepare(`SELECT count(*) FROM ${kind}`).pluck().get() as number;
  if (created > 0 && created * 10 >= rows) shard.writer.exec(`ANALYZE ${kind}; ANALYZE tags`);
  shard.writer.pragma('optimize=0x10002');
}

const finishCommand = shardCommand(
  'bulk.finish',
  (shard, { orgId, jobId, total, status, detail }: FinishArgs): void => {
    const job = processingJob(shard, orgId, jobId);
    writerStatements(shard)
      .get('UPDATE bulk_jobs SET status = ?, total = ?, detail = ?, updated_at = ?, finished_at = ? WHERE job_id = ?')
      .run(status, total, detail, shard.now, shard.now, jobId);
    if (job.dry_run === 0) refreshStatistics(shard, job.kind, job.created);
    restoreWriterCache(shard, hasRunningJobs(shard));
  },
  'scans',
);

export function finishJob(shard: Shard, args: FinishArgs): Promise<void> {
  // No deadline: a job's end must be recorded however long its shard's queue, or the job would stay
  // 'processing' and hold the org's import slot until a restart (seen when a batch was refused as late).
  return shard.send(finishCommand, args, {});
}

/**
 * At an actor's start: a job still processing belonged to a process that is gone (only a live
 * process of this data directory drives jobs, and its shards start before it takes requests). It
 * cannot resume (the body is the client's; no copy is kept), so it is failed with what its counts
 * already say, which every committed batch kept equal to the data: an asset job applies in file
 * order (every row up to applied_through_row judged and applied unless reported, none after it); a
 * location job in tree order (its counts, not a row range, say what applied); a dry run, or an
 * atomic job whose one transaction had not committed, left nothing.
 */
const INTERRUPTED = "'interrupted (the server stopped while the job ran): '";
const abandonCommand = shardCommand(
  'bulk.abandonInterrupted',
  (shard, _args: Record<string, never>): number => {
    const abandoned = writerStatements(shard)
      .get(
        `UPDATE bulk_jobs SET status = 'failed', updated_at = ?, finished_at = ?,
           detail = ${INTERRUPTED} || CASE
             WHEN dry_run = 1 THEN 'a dry run writes nothing'
             WHEN atomic = 1 AND processed = 0 THEN 'an atomic job applies in one transaction, which had not committed: nothing was applied; re-run the file'
             WHEN kind = 'locations' THEN processed || ' rows were judged in tree order (parents first): created, updated, unchanged and failed_rows are what the data holds; re-run the file in upsert mode to apply the rest'
             ELSE 'rows 1 to ' || applied_through_row || ' were judged (applied unless listed in errors), later rows were not; re-run the file in upsert mode to apply the rest'
           END
         WHERE status IN ('pending', 'processing')`,
      )
      .run(shard.now, shard.now).changes;
    restoreWriterCache(shard, false);
    return abandoned;
  },
  'scans',
);

/** The abandon command's message for an actor's start (run on the actor, recorded like any command). */
export const ABANDON_INTERRUPTED = abandonCommand.name;

/** Whether any job of the shard is pending or processing. */
function hasRunningJobs(shard: ShardWriter): boolean {
  return (
    writerStatements(shard).get("SELECT EXISTS (SELECT 1 FROM bulk_jobs WHERE status IN ('pending', 'processing'))").pluck().get() === 1
  );
}

/** Whether the shard holds jobs left processing (checked before sending the abandon, so that an idle start records nothing). */
export const hasInterruptedJobs = hasRunningJobs;
