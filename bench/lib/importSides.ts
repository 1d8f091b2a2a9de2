import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ulid } from 'ulid';
import { assetBatchCommand } from '../../src/bulk/assetRows.js';
import type { BatchArgs } from '../../src/bulk/batch.js';
import { ControlPlane } from '../../src/control/controlPlane.js';
import { pauseTextIndex, resumeTextIndex } from '../../src/masterdata/textIndex.js';
import { scanPlacement } from '../../src/scans/placement.js';
import '../../src/shards/commandIndex.js';
import { ShardGenerations } from '../../src/shards/generations.js';
import { ShardWriter } from '../../src/shards/writer.js';

/**
 * The in-process import probes' files (importBatch.ts, importGrowth.ts): a fresh shard file with an
 * org, and the two ways of putting the import ceiling's rows (an asset with one rfid tag) into it:
 * the bench's raw insert and the shard's batch command of a job.
 */

/** The tag value of row `i` (the bench's CSV and the probes alike). */
export const tagValue = (i: number) => `E2${String(i).padStart(22, '0')}`;

export interface ImportFile {
  name: string;
  dir: string;
  control: ControlPlane;
  writer: ShardWriter;
  orgId: number;
}

/** A fresh shard file; `textIndex: false` drops the q text index triggers (and so the batch's rewrite work). */
export async function openImportFile(name: string, options: { textIndex?: boolean } = {}): Promise<ImportFile> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'trackd-import-probe-'));
  const control = await ControlPlane.open(dir);
  const org = await control.createOrg('probe', 1);
  const writer = await ShardWriter.open(dir, 0, control, new ShardGenerations(), { placement: scanPlacement });
  if (options.textIndex === false) {
    const triggers = writer.writer
      .prepare("SELECT name FROM sqlite_master WHERE type = 'trigger' AND name LIKE '%text%'")
      .pluck()
      .all() as string[];
    for (const trigger of triggers) writer.writer.exec(`DROP TRIGGER ${trigger}`);
  }
  return { name, dir, control, writer, orgId: org.id };
}

export function closeImportFile(file: ImportFile): void {
  file.writer.close();
  file.control.close();
  fs.rmSync(file.dir, { recursive: true, force: true });
}

/** The bench's import ceiling: rows [from, to) inserted in one transaction, the text index paused and rewritten. */
export function rawInsert(file: ImportFile): (from: number, to: number) => void {
  const db = file.writer.writer;
  const asset = db.prepare(
    'INSERT INTO assets (id, org_id, external_key, name, description, is_active, metadata, valid_from, valid_to, created_at, updated_at) VALUES (?, ?, ?, ?, NULL, 1, ?, ?, NULL, ?, ?)',
  );
  const tag = db.prepare('INSERT INTO tags (id, org_id, tag_type, value, asset_id, created_at) VALUES (?, ?, ?, ?, ?, ?)');
  return (from, to) => {
    const now = Date.now();
    db.transaction(() => {
      pauseTextIndex(file.writer);
      for (let i = from; i < to; i++) {
        asset.run(i, file.orgId, `BULK-${i}`, `Asset ${i}`, '{}', now, now, now);
        tag.run(i, file.orgId, 'rfid', tagValue(i), i, now);
      }
      resumeTextIndex(file.writer);
    })();
  };
}

let serial = 0;
/** A job of `mode` on the file's org: a function applying rows [from, to) as its next batch (`bulk.assets.apply`). */
export function importJob(file: ImportFile, mode: 'create' | 'upsert'): (from: number, to: number) => void {
  const jobId = ulid();
  const begun = file.writer.execute({
    id: ++serial,
    name: 'bulk.begin',
    now: Date.now(),
    args: { orgId: file.orgId, jobId, idempotencyKey: null, kind: 'assets', mode, dryRun: false, atomic: false, format: 'csv' },
  });
  if (begun.error !== undefined) throw new Error(`bulk.begin: ${JSON.stringify(begun.error)}`);
  let processed = 0;
  return (from, to) => {
    const rows: BatchArgs['rows'] = [];
    for (let i = from; i < to; i++) {
      rows.push({ row: i, body: { external_key: `BULK-${i}`, name: `Asset ${i}`, tags: [{ tag_type: 'rfid', value: tagValue(i) }] } });
    }
    const args: BatchArgs = {
      orgId: file.orgId,
      jobId,
      mode,
      dryRun: false,
      atomic: false,
      rows,
      errors: [],
      failedRows: 0,
      throughRow: to - 1,
      processedBefore: processed,
    };
    const answer = file.writer.execute({ id: ++serial, name: assetBatchCommand.name, now: Date.now(), args });
    if (answer.error !== undefined) throw new Error(`batch: ${JSON.stringify(answer.error)}`);
    processed += rows.length;
  };
}

/** This thread's counters (Linux): CPU microseconds, minor page faults, read syscalls and the bytes they returned. */
export function threadCounters(): { cpuUs: number; minorFaults: number; readCalls: number; readBytes: number } {
  const io = fs.readFileSync('/proc/thread-self/io', 'utf8');
  const field = (name: string) => Number(new RegExp(`^${name}: (\\d+)$`, 'm').exec(io)?.[1] ?? 0);
  const stat = fs.readFileSync('/proc/thread-self/stat', 'utf8');
  // Fields after the command's closing parenthesis: state is field 3, minflt field 10.
  const after = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return {
    cpuUs: Number(fs.readFileSync('/proc/thread-self/schedstat', 'utf8').split(' ')[0]) / 1000,
    minorFaults: Number(after[7]),
    readCalls: field('syscr'),
    readBytes: field('rchar'),
  };
}
