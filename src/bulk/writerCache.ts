import { shardState } from '../shards/state.js';
import type { ShardWriter } from '../shards/writer.js';
import { BULK_LIMITS } from './limits.js';

/**
 * The shard writer's page cache while bulk jobs run. Each batch adds its rows to the q text index
 * (FTS5), whose segment merges read back the index's older segments; once the index outgrew the
 * writer's 64 MiB cache (about 600,000 assets with a tag) every merge read its pages from the file
 * again, and a row cost 3.4-3.8x what it did before (README, "Why a row costs more at 1,000,000
 * rows"; bench/results/import-growth-1m.json). A batch raises the cache to BULK_LIMITS.writerCacheMb;
 * the end of the shard's last running job (finished, or abandoned at a start) sets the writer's own
 * (SHARD_CACHE_MB) back; a writer configured larger keeps its own. The cache changes no answer,
 * only what SQLite keeps in memory.
 */
const raised = shardState((_shard: ShardWriter) => ({ on: false }));

/** Before a batch's rows: the job's cache (once per run of jobs). */
export function raiseWriterCache(shard: ShardWriter): void {
  const state = raised(shard);
  if (state.on || shard.cacheMb >= BULK_LIMITS.writerCacheMb) return;
  shard.writer.pragma(`cache_size = -${BULK_LIMITS.writerCacheMb * 1024}`);
  state.on = true;
}

/** After a job ended: the writer's own cache again once no job of the shard is running. */
export function restoreWriterCache(shard: ShardWriter, jobsRunning: boolean): void {
  const state = raised(shard);
  if (!state.on || jobsRunning) return;
  shard.writer.pragma(`cache_size = -${shard.cacheMb * 1024}`);
  state.on = false;
}
