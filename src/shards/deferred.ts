import { eventLogOf } from '../events/log.js';
import { pauseTextIndex, resumeTextIndex, textIndexRolledBack } from '../masterdata/textIndex.js';
import type { ShardWriter } from './writer.js';

/**
 * The writes a shard writer's transaction of several commands (a round, a journal entry applied)
 * defers to its end, done once per transaction instead of once per command or row: the q text
 * index's rows (masterdata/textIndex.ts), whose FTS5 table writes and flushes its terms as a new
 * segment at every savepoint (each command of a round has one) and statement journal it sees, and
 * the event log's heads (events/log.ts), an upsert per event otherwise. `begin` runs `deferWrites`,
 * `commit` runs `writeDeferred` before its COMMIT, and after a rollback `deferredRolledBack` forgets
 * what the rollback undid. What a transaction commits is the same as with nothing deferred. A
 * command alone does not defer: its terms make one segment either way, and the pause and rewrite
 * only added statements (README, "Single node since the cluster work").
 */
export function deferWrites(shard: ShardWriter): void {
  pauseTextIndex(shard);
  eventLogOf(shard).deferHeads();
}

/** The heads first: the text index's rewrite last, so that FTS5 flushes its terms at the COMMIT only. */
export function writeDeferred(shard: ShardWriter): void {
  eventLogOf(shard).writeHeads();
  resumeTextIndex(shard);
}

export function deferredRolledBack(shard: ShardWriter): void {
  textIndexRolledBack(shard);
  eventLogOf(shard).headsRolledBack();
}
