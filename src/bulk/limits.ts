/**
 * The documented limits of bulk jobs (README, "Bulk import and export"). A body is read as a stream
 * in bounded chunks (never whole), so its limit is about how long one job may hold its org's import
 * slot, not about memory; atomic jobs and location imports keep their rows until the end (an atomic
 * job commits in one transaction; a location file is ordered as a tree first), so they have a row limit.
 */
export const BULK_LIMITS = {
  /** Largest import body: 1 GiB (1,000,000 assets with a tag each are about 60 MB of CSV). */
  maxBodyBytes: 1024 * 1024 * 1024,
  /** Rows per applied batch (one shard command, one transaction, one record). */
  batchRows: 1000,
  /** At most this many bytes of rows per batch, whatever their count (a record must fit a journal entry). */
  batchBytes: 256 * 1024,
  /** Rows an atomic job or a location import may hold (kept in memory until the body ends). */
  maxHeldRows: 100_000,
  /** Row errors kept per job; `failed_rows` counts every failed row, `errors_truncated` says when some were not kept. */
  errorsKept: 10_000,
  /** A finished job is kept this long (7 days), then forgotten at the org's next import. */
  jobRetentionMs: 7 * 24 * 3600 * 1000,
  /** The upload may pause this long between chunks before the job fails (408 if nothing was answered yet). */
  idleMs: 30_000,
  /** Bytes of body held before the socket is paused while batches apply. */
  highWaterBytes: 1024 * 1024,
  /**
   * The shard writer's page cache while a job of the shard runs (trackd's connections: 64 MiB), so
   * that the q text index's segment merges find their pages in it (bulk/writerCache.ts). Memory
   * taken only as pages are used, given back when the shard's last job ends.
   */
  writerCacheMb: 512,
} as const;
