import { writerStatements } from '../masterdata/keys.js';
import { textIndexTable } from '../masterdata/textIndex.js';
import type { ShardWriter } from '../shards/writer.js';
import type { BulkKind } from './jobs.js';
import { BULK_LIMITS } from './limits.js';

/**
 * How eagerly the q text index (FTS5) merges its segments while bulk jobs run. Each batch writes
 * its rows' index as a new segment; FTS5 merges `automerge` segments of a level into one of the
 * next, so every row is rewritten once per level. At FTS5's default of 4, an import of 1,000,000
 * rows has about five levels and the merges were the part of a row's cost that grows with the
 * index; at 16 a row is rewritten about half as often (README, "The q text index's merges during a
 * job"). More segments make a `q` read search more of them, so a job that grew its table by a tenth
 * (the job that also re-analyzes it) merges its kind's index into one segment when it ends, and the
 * end of the shard's last running job sets the default back. Neither changes what the index holds, only
 * how it is laid out: no answer changes. Kept in the index's own config table, so a replay of the
 * records and a crash (the next start's abandon restores it) leave the same setting.
 */
const TABLES = [textIndexTable('assets'), textIndexTable('locations')];
const DEFAULT_AUTOMERGE = 4;

function automerge(shard: ShardWriter, table: string): number {
  const value = writerStatements(shard).get(`SELECT v FROM ${table}_config WHERE k = 'automerge'`).pluck().get();
  return value === undefined ? DEFAULT_AUTOMERGE : Number(value);
}

function setAutomerge(shard: ShardWriter, value: number): void {
  for (const table of TABLES) {
    if (automerge(shard, table) !== value)
      writerStatements(shard).get(`INSERT INTO ${table} (${table}, rank) VALUES ('automerge', ${value})`).run();
  }
}

/** Before a batch's rows: the jobs' merge setting (written once per run of jobs). */
export function raiseTextMerge(shard: ShardWriter): void {
  setAutomerge(shard, BULK_LIMITS.textIndexAutomerge);
}

/**
 * After a job ended: `merged`, the kind whose index to merge into one segment (a job large against
 * its table, whether or not another job still runs); FTS5's default once no job of the shard runs.
 */
export function restoreTextMerge(shard: ShardWriter, jobsRunning: boolean, merged?: BulkKind): void {
  if (merged !== undefined) {
    const table = textIndexTable(merged);
    writerStatements(shard).get(`INSERT INTO ${table} (${table}) VALUES ('optimize')`).run();
  }
  if (!jobsRunning) setAutomerge(shard, DEFAULT_AUTOMERGE);
}

/** The index's current merge setting (tests). */
export function textMergeSetting(shard: ShardWriter): number[] {
  return TABLES.map((table) => automerge(shard, table));
}
