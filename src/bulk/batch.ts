import { DomainError, unavailable } from '../errors/domain.js';
import type { FieldError } from '../errors/catalog.js';
import { eventLogOf } from '../events/log.js';
import { withTextIndexPaused } from '../masterdata/textIndex.js';
import { shardCommand, type ShardCommand } from '../shards/commands.js';
import type { ShardWriter } from '../shards/writer.js';
import { processingJob, recordOutcome, type BatchOutcome, type BulkMode, type RowError } from './jobs.js';
import { raiseWriterCache } from './writerCache.js';

/** A row that passed the stateless rules, on its way to the shard: its number in the file and its create body. */
export interface BatchRow {
  row: number;
  body: Record<string, unknown>;
}

/** One applied batch of a job: rows to judge against the shard's data, and the rows of its range that already failed on the way. */
export interface BatchArgs {
  orgId: number;
  jobId: string;
  mode: BulkMode;
  dryRun: boolean;
  /** All or nothing: any failed row (here or before) and nothing of the batch is kept. */
  atomic: boolean;
  rows: BatchRow[];
  /** Errors of rows in this batch's range that failed before reaching the shard (syntax, the create rules, duplicates in the file). */
  errors: RowError[];
  /** Rows of the range that failed before reaching the shard. */
  failedRows: number;
  throughRow: number;
  /**
   * The job's processed rows once every batch sent before this one applied. The batch is refused
   * when the job holds another count: an earlier batch was refused (late: 503) while this one was
   * already on its way, and applying it would leave rows before its range unjudged. Absent in
   * records written before it existed.
   */
  processedBefore?: number;
}

/** What one row did, or the field errors that refused it. */
export type RowResult = { outcome: 'created' | 'updated' | 'unchanged'; tagsCreated: number } | { errors: FieldError[] };

/** Applies one row on the writer (inside the batch's transaction): checks first, then writes, so a refused row wrote nothing. */
export type RowApplier = (shard: ShardWriter, context: RowContext, body: Record<string, unknown>) => RowResult;

export interface RowContext {
  orgId: number;
  mode: BulkMode;
  /** Draws an id: the shard's own, or (dry run, rolled back) a negative stand-in that wastes none. */
  nextId(entity: 'asset' | 'location' | 'tag'): number;
}

/** Thrown inside the batch's inner transaction to undo its rows (dry run, a failed atomic batch). */
class Undo extends Error {}

/** A refused row's field errors as row errors; a DomainError thrown by a shared rule becomes its fields, or a conflict on `body`. */
export function rowErrors(row: number, errors: FieldError[]): RowError[] {
  return errors.map((e) => ({ row, field: e.field, error: e.code, message: e.message }));
}

function judge(apply: RowApplier, shard: ShardWriter, context: RowContext, body: Record<string, unknown>): RowResult {
  try {
    return apply(shard, context, body);
  } catch (err) {
    // Unavailable (no ids in hand yet, ...) is no verdict on the row: the batch fails whole, nothing changed, and is sent again.
    if (!(err instanceof DomainError) || err.kind === 'unavailable') throw err;
    if (err.fields !== undefined) return { errors: err.fields };
    return { errors: [{ field: 'body', code: err.kind === 'conflict' ? 'conflict' : 'invalid_value', message: err.detail }] };
  }
}

/**
 * The batch command of a kind: judges and applies its rows in file order, then adds the outcome to
 * the job, all in one transaction (so the job's counts are always what the data holds). A dry run
 * applies inside an inner transaction and undoes it, so later rows of the batch see earlier ones.
 */
export function batchCommand(name: string, apply: RowApplier): ShardCommand<BatchArgs, BatchOutcome> {
  return shardCommand(
    name,
    (shard, args: BatchArgs): BatchOutcome =>
      shard.transaction(() => {
        const job = processingJob(shard, args.orgId, args.jobId);
        const count = args.rows.length + args.failedRows;
        if (args.processedBefore !== undefined && job.processed === args.processedBefore + count && count > 0)
          // This very batch, sent again after an answer that did not say (a journal append that timed out): applied already.
          return {
            processed: count,
            created: 0,
            updated: 0,
            unchanged: 0,
            tagsCreated: 0,
            failedRows: 0,
            errors: [],
            throughRow: args.throughRow,
          };
        if (args.processedBefore !== undefined && job.processed !== args.processedBefore) {
          throw unavailable(
            `bulk job ${args.jobId}: an earlier batch was not applied (${job.processed} rows processed, ${args.processedBefore} expected); this one waits for it, nothing was changed`,
            1,
          );
        }
        raiseWriterCache(shard);
        let standIn = 0;
        const context: RowContext = {
          orgId: args.orgId,
          mode: args.mode,
          nextId: (entity) => (args.dryRun ? --standIn : shard.nextId(entity)),
        };
        const outcome: BatchOutcome = {
          processed: args.rows.length + args.failedRows,
          created: 0,
          updated: 0,
          unchanged: 0,
          tagsCreated: 0,
          failedRows: args.failedRows,
          errors: [...args.errors],
          throughRow: args.throughRow,
        };
        const applyRows = () =>
          // The q text index is rewritten once for the batch's rows, not by a trigger per row (migration 016);
          // the org's event head written once for the batch's events (its rollback undoes both).
          withTextIndexPaused(shard, () =>
            eventLogOf(shard).withHeldHeads(() => {
              for (const { row, body } of args.rows) {
                const result = judge(apply, shard, context, body);
                if ('errors' in result) {
                  outcome.failedRows++;
                  outcome.errors.push(...rowErrors(row, result.errors));
                } else {
                  outcome[result.outcome]++;
                  outcome.tagsCreated += result.tagsCreated;
                }
              }
              if (args.dryRun || (args.atomic && outcome.failedRows > 0)) throw new Undo();
            }),
          );
        // Only a batch that may be undone runs its rows in a savepoint: inside one, SQLite copies each
        // page a statement changes into the statement journal and keeps it there (it cannot truncate it
        // on release), about 15 us of CPU per imported row (README, "Bulk import and export").
        if (!args.dryRun && !args.atomic) applyRows();
        else {
          try {
            shard.transaction(applyRows);
          } catch (err) {
            if (!(err instanceof Undo)) throw err;
            if (!args.dryRun) Object.assign(outcome, { created: 0, updated: 0, unchanged: 0, tagsCreated: 0 });
          }
        }
        outcome.errors.sort((a, b) => a.row - b.row);
        recordOutcome(shard, args.jobId, outcome);
        return { ...outcome, errors: [] };
      }),
    'any',
    // Its transaction is the outermost one outside a journal's round (never a savepoint in a round of
    // single writes): the rows above then run without a savepoint around them.
    { ownsTransaction: true },
  );
}

/** Whether any field of `next` differs from the stored row's (an upsert row equal to the stored one writes nothing). */
export function differs<T extends object>(next: T, stored: T): boolean {
  return (Object.keys(next) as (keyof T)[]).some((field) => next[field] !== stored[field]);
}
