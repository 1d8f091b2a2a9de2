import { monotonicFactory } from 'ulid';
import { ApiError, fieldError } from '../errors/catalog.js';
import { DomainError } from '../errors/domain.js';
import { asApiError } from '../errors/envelope.js';
import type { Reply, RequestContext } from '../http/route.js';
import type { UploadStream } from '../http/upload.js';
import type { ShardCommand } from '../shards/commands.js';
import type { Shard } from '../shards/shard.js';
import type { BatchArgs } from './batch.js';
import { RowJudge, type JudgedRow } from './judge.js';
import {
  beginJob,
  finishJob,
  jobByIdempotencyKey,
  type BatchOutcome,
  type BulkFormat,
  type BulkKind,
  type BulkMode,
  type RowError,
} from './jobs.js';
import { BULK_LIMITS } from './limits.js';
import { orderTree } from './locationOrder.js';
import { rowReader, type SourceRow } from './rowSource.js';

const nextJobId = monotonicFactory();

/** Batches sent to the shard and not yet answered: the next waits, so the upload waits (and pauses its socket). */
const BATCHES_IN_FLIGHT = 2;
/** How long a batch the shard refuses as unavailable (nothing changed) is sent again before the job fails with it. */
const BATCH_RETRY_MS = 60_000;

export const FORMATS: Record<string, BulkFormat> = { 'text/csv': 'csv', 'application/x-ndjson': 'ndjson' };

/** The 202 of an accepted import (also the answer to a repeated Idempotency-Key). */
function accepted(kind: BulkKind, jobId: string): Reply {
  const statusUrl = `/api/v1/${kind}/bulk/${jobId}`;
  return { status: 202, body: { status: 'accepted', job_id: jobId, status_url: statusUrl }, headers: { Location: statusUrl } };
}

/** Printable ASCII, 1 to 255 characters (the usual form: a UUID). */
const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,255}$/;

function idempotencyKey(header: string): string | null {
  if (header === '') return null;
  if (!IDEMPOTENCY_KEY.test(header)) {
    throw ApiError.validation([
      fieldError('Idempotency-Key', 'invalid_value', 'Idempotency-Key must be 1 to 255 printable ASCII characters without spaces'),
    ]);
  }
  return header;
}

interface JobPlan {
  shard: Shard;
  orgId: number;
  jobId: string;
  kind: BulkKind;
  mode: BulkMode;
  dryRun: boolean;
  atomic: boolean;
  command: ShardCommand<BatchArgs, BatchOutcome>;
}

/** A batch being filled: rows in file order, with the errors of the rows of its range that failed before the shard. */
class PendingBatch {
  rows: BatchArgs['rows'] = [];
  errors: RowError[] = [];
  failedRows = 0;
  throughRow = 0;
  bytes = 0;

  add(judged: JudgedRow): void {
    if ('errors' in judged) {
      this.failedRows++;
      this.errors.push(...judged.errors);
    } else {
      this.rows.push({ row: judged.row, body: judged.body });
      this.bytes += judged.size;
    }
    this.throughRow = judged.row;
  }

  get count(): number {
    return this.rows.length + this.failedRows;
  }
}

/**
 * Sends a job's batches to its shard in order (each a recorded command whose transaction applies
 * its rows and adds its outcome to the job), at most BATCHES_IN_FLIGHT at a time.
 */
class BatchSender {
  private readonly inFlight: Promise<unknown>[] = [];
  private failure: unknown;
  /** The last batch sent, settled (applied, or failed for good): a batch sent again waits for the one before it. */
  private previous: Promise<unknown> = Promise.resolve();
  /** Rows of the batches sent so far (each batch says how many the job must have processed before it). */
  private sentRows = 0;

  constructor(private readonly plan: JobPlan) {}

  async send(batch: PendingBatch, throughRow = batch.throughRow): Promise<void> {
    if (this.failure !== undefined) throw this.failure;
    const { plan } = this;
    const processedBefore = this.sentRows;
    this.sentRows += batch.count;
    const args: BatchArgs = {
      orgId: plan.orgId,
      jobId: plan.jobId,
      mode: plan.mode,
      dryRun: plan.dryRun,
      atomic: plan.atomic,
      rows: batch.rows,
      errors: batch.errors,
      failedRows: batch.failedRows,
      throughRow,
      processedBefore,
    };
    const applied = this.apply(args, this.previous);
    this.previous = applied.catch(() => undefined);
    const sent = applied.catch((err: unknown) => {
      this.failure ??= err;
    });
    this.inFlight.push(sent);
    if (this.inFlight.length >= BATCHES_IN_FLIGHT) await this.inFlight.shift();
    // Reads served by this HTTP thread run between two batches: a body's rows are parsed and judged in
    // synchronous stretches, and without this a shard that keeps up would never let them in.
    else await new Promise((resolve) => setImmediate(resolve));
    if (this.failure !== undefined) throw this.failure;
  }

  /**
   * One batch applied, sent again while the shard answers unavailable (nothing changed: no ids in
   * hand yet, a journal catching up, the batch before it not applied yet), each time once the batch
   * before it has settled and the answer's Retry-After has passed, for up to BATCH_RETRY_MS.
   */
  private async apply(args: BatchArgs, previous: Promise<unknown>): Promise<unknown> {
    const giveUpAt = Date.now() + BATCH_RETRY_MS;
    for (;;) {
      try {
        // No deadline: a batch waits behind its own job's previous one (BATCHES_IN_FLIGHT bounds what
        // a job queues), and the job is its only waiter. With the 10 s deadline a loaded machine
        // failed whole imports with 503 (a bench run: a batch waited 17.7 s behind its predecessor).
        return await this.plan.shard.send(this.plan.command, args, {});
      } catch (err) {
        if (!(err instanceof DomainError) || err.kind !== 'unavailable' || Date.now() > giveUpAt || this.failure !== undefined) throw err;
        await previous;
        await new Promise((resolve) => setTimeout(resolve, (err.retryAfterSeconds ?? 1) * 1000));
        if (this.failure !== undefined) throw err;
      }
    }
  }

  async drain(): Promise<void> {
    await Promise.all(this.inFlight.splice(0));
    if (this.failure !== undefined) throw this.failure;
  }
}

/**
 * Reads the rows of an upload: those the chunks already held (`first`), then the rest of the body,
 * each judged by the create rules; `onRow` gets them in file order and may wait (backpressure).
 */
async function readRows(
  upload: UploadStream,
  reader: ReturnType<typeof rowReader>,
  first: SourceRow[],
  judge: RowJudge,
  onRow: (row: JudgedRow) => Promise<void> | void,
): Promise<number> {
  let rows = 0;
  const take = async (source: SourceRow[]) => {
    for (const row of source) {
      rows++;
      const waited = onRow(judge.judge(row));
      if (waited !== undefined) await waited;
    }
  };
  await take(first);
  for await (const chunk of upload) await take(reader.push(chunk));
  await take(reader.end());
  return rows;
}

/** Runs a job whose rows apply as they arrive (assets, not atomic): batches of the file in order. */
async function streamJob(plan: JobPlan, read: (onRow: (row: JudgedRow) => Promise<void> | void) => Promise<number>): Promise<number> {
  const sender = new BatchSender(plan);
  let batch = new PendingBatch();
  const total = await read((row) => {
    batch.add(row);
    if (batch.count < BULK_LIMITS.batchRows && batch.bytes < BULK_LIMITS.batchBytes) return;
    const full = batch;
    batch = new PendingBatch();
    return sender.send(full);
  });
  if (batch.count > 0) await sender.send(batch);
  await sender.drain();
  return total;
}

/**
 * Runs a job whose rows are held until the body ends (atomic jobs: one batch, one transaction;
 * locations: ordered parents first, then in batches). Applied-through-row counts only file-ordered
 * batches, so here it is the last row once everything applied.
 */
async function heldJob(plan: JobPlan, read: (onRow: (row: JudgedRow) => void) => Promise<number>): Promise<number> {
  const held: JudgedRow[] = [];
  const total = await read((row) => {
    if (held.length >= BULK_LIMITS.maxHeldRows) {
      throw new ApiError(
        'payload_too_large',
        `${plan.atomic ? 'an atomic job' : 'a location import'} takes at most ${BULK_LIMITS.maxHeldRows} rows (its rows are kept until the body ends)`,
      );
    }
    held.push(row);
  });
  const ordered = plan.kind === 'locations' ? orderTree(held) : held;
  const sender = new BatchSender(plan);
  let batch = new PendingBatch();
  for (const row of ordered) {
    batch.add(row);
    // Atomic and dry-run jobs judge every row in one batch: later rows see what earlier ones would do.
    if (!plan.atomic && !plan.dryRun && (batch.count >= BULK_LIMITS.batchRows || batch.bytes >= BULK_LIMITS.batchBytes)) {
      await sender.send(batch, 0);
      batch = new PendingBatch();
    }
  }
  if (batch.count > 0 || plan.atomic) await sender.send(batch, plan.kind === 'locations' ? 0 : total);
  await sender.drain();
  return total;
}

function detailOf(err: unknown): string {
  const apiError = asApiError(err);
  return apiError.type === 'internal_error' ? `the job stopped: ${(err as Error).message}` : apiError.detail;
}

/**
 * POST /api/v1/{kind}/bulk: starts a job, reads the body as a stream (applying batches as they fill,
 * or holding the rows when the job needs them all first) and answers 202 once the body was read;
 * the job finishes in the background (its last batches, then its status), polled at its status_url.
 */
export async function startImport(ctx: RequestContext, kind: BulkKind, command: ShardCommand<BatchArgs, BatchOutcome>): Promise<Reply> {
  const upload = ctx.upload!;
  const format = FORMATS[(ctx.headers.contentType.split(';')[0] ?? '').trim().toLowerCase()]!;
  const mode = ctx.query.mode as BulkMode;
  const dryRun = ctx.query.dry_run === true;
  const atomic = ctx.query.atomic === true;
  const orgId = ctx.principal.orgId;
  const key = idempotencyKey(ctx.headers.idempotencyKey);
  if (key !== null) {
    const known = jobByIdempotencyKey(ctx.shard, orgId, kind, key);
    if (known !== undefined) return accepted(kind, known);
  }
  // The columns first (a CSV header): a file the job could not read answers 400 without a job.
  const reader = rowReader(format, kind);
  const first: SourceRow[] = [];
  const chunks = upload[Symbol.asyncIterator]();
  while (!reader.ready) {
    const next = await chunks.next();
    if (next.done) break;
    first.push(...reader.push(next.value));
  }
  if (!reader.ready) first.push(...reader.end());
  const begun = await beginJob(ctx.shard, { orgId, jobId: nextJobId(ctx.now), idempotencyKey: key, kind, mode, dryRun, atomic, format });
  if (begun.existing) return accepted(kind, begun.jobId);
  const plan: JobPlan = { shard: ctx.shard, orgId, jobId: begun.jobId, kind, mode, dryRun, atomic, command };
  const judge = new RowJudge(kind, mode, ctx.now);

  let bodyRead!: (err?: unknown) => void;
  const readDone = new Promise<unknown>((resolve) => {
    bodyRead = resolve;
  });
  const read = async (onRow: (row: JudgedRow) => Promise<void> | void) => {
    try {
      const total = await readRows(upload, reader, first, judge, onRow);
      bodyRead();
      return total;
    } catch (err) {
      bodyRead(err);
      throw err;
    }
  };
  const run = atomic || kind === 'locations' ? heldJob(plan, read) : streamJob(plan, read);
  void run
    .then(
      (total) => finishJob(ctx.shard, { orgId, jobId: plan.jobId, total, status: 'completed', detail: null }),
      (err: unknown) => finishJob(ctx.shard, { orgId, jobId: plan.jobId, total: null, status: 'failed', detail: detailOf(err) }),
    )
    .catch(() => {
      // The shard is gone (shutting down): its next start fails the job with what its counts say.
    });
  const failure = await readDone;
  if (failure !== undefined) {
    const apiError = asApiError(failure);
    throw new ApiError(apiError.type, `${apiError.detail} (bulk job ${plan.jobId} stopped there; its status says what was applied)`, {
      fields: apiError.fields,
      headers: apiError.headers,
    });
  }
  return accepted(kind, plan.jobId);
}
