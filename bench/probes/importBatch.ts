/**
 * What the shard thread spends on an import batch, against the raw insert of the same rows, in one
 * process (issue 16): the bench's import ceiling (an asset with one rfid tag, 1,000 per
 * transaction, the q text index paused and rewritten per transaction; no lookups, events or job)
 * into one fresh shard file, and the `bulk.assets.apply` command of a create job (what the shard
 * thread runs per batch: the row checks, the inserts, the event-log append, the job's counts) into
 * another, in alternating blocks of 1,000 rows so that a shared machine's drift falls on both.
 * CPU time per row of this thread (`/proc/thread-self/schedstat`: the shard thread's share) and of
 * the process (the background checkpointer included).
 *
 *   node dist/bench/probes/importBatch.js [--rows 50000] [--mode create|upsert] [--text-index-triggers on|off|both] [--out FILE]
 *
 * `--text-index-triggers off` drops the q text index triggers (and so the per-batch rewrite's work)
 * from both files; `both` adds a third file, the batch command without them, to the same alternation:
 * what the import would gain from a text index that cost nothing.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { ulid } from 'ulid';
import { assetBatchCommand } from '../../src/bulk/assetRows.js';
import type { BatchArgs } from '../../src/bulk/batch.js';
import { ControlPlane } from '../../src/control/controlPlane.js';
import { pauseTextIndex, resumeTextIndex } from '../../src/masterdata/textIndex.js';
import { scanPlacement } from '../../src/scans/placement.js';
import '../../src/shards/commandIndex.js';
import { ShardGenerations } from '../../src/shards/generations.js';
import { ShardWriter } from '../../src/shards/writer.js';
import { machine } from '../lib/processes.js';

const { values } = parseArgs({
  options: { rows: { type: 'string' }, out: { type: 'string' }, 'text-index-triggers': { type: 'string' }, mode: { type: 'string' } },
});
const ROWS = Number(values.rows ?? 50_000);
const BATCH = 1000;
if (values.mode !== undefined && values.mode !== 'create' && values.mode !== 'upsert') throw new Error('--mode: create or upsert');
const MODE = (values.mode ?? 'create') as 'create' | 'upsert';
const TEXT_INDEX = values['text-index-triggers'] ?? 'on';
if (!['on', 'off', 'both'].includes(TEXT_INDEX)) throw new Error('--text-index-triggers: on, off or both');

const tagValue = (i: number) => `E2${String(i).padStart(22, '0')}`;

interface Side {
  name: string;
  dir: string;
  control: ControlPlane;
  writer: ShardWriter;
  orgId: number;
  cpuUs: number[];
  threadUs: number[];
  block: (from: number, to: number) => void;
}

async function open(name: string, textIndex = TEXT_INDEX !== 'off'): Promise<Omit<Side, 'block'>> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'trackd-import-batch-'));
  const control = await ControlPlane.open(dir);
  const org = await control.createOrg('probe', 1);
  const writer = await ShardWriter.open(dir, 0, control, new ShardGenerations(), { placement: scanPlacement });
  if (!textIndex) {
    const triggers = writer.writer
      .prepare("SELECT name FROM sqlite_master WHERE type = 'trigger' AND name LIKE '%text%'")
      .pluck()
      .all() as string[];
    for (const trigger of triggers) writer.writer.exec(`DROP TRIGGER ${trigger}`);
  }
  return { name, dir, control, writer, orgId: org.id, cpuUs: [], threadUs: [] };
}

function rawInsert(side: Omit<Side, 'block'>): Side {
  const db = side.writer.writer;
  const asset = db.prepare(
    'INSERT INTO assets (id, org_id, external_key, name, description, is_active, metadata, valid_from, valid_to, created_at, updated_at) VALUES (?, ?, ?, ?, NULL, 1, ?, ?, NULL, ?, ?)',
  );
  const tag = db.prepare('INSERT INTO tags (id, org_id, tag_type, value, asset_id, created_at) VALUES (?, ?, ?, ?, ?, ?)');
  return {
    ...side,
    block: (from, to) => {
      const now = Date.now();
      db.transaction(() => {
        pauseTextIndex(side.writer);
        for (let i = from; i < to; i++) {
          asset.run(i, side.orgId, `BULK-${i}`, `Asset ${i}`, '{}', now, now, now);
          tag.run(i, side.orgId, 'rfid', tagValue(i), i, now);
        }
        resumeTextIndex(side.writer);
      })();
    },
  };
}

let serial = 0;
/** A job of `mode` on the side's org: a function applying rows [from, to) as its next batch. */
function job(side: Omit<Side, 'block'>, mode: 'create' | 'upsert'): (from: number, to: number) => void {
  const jobId = ulid();
  const begun = side.writer.execute({
    id: ++serial,
    name: 'bulk.begin',
    now: Date.now(),
    args: { orgId: side.orgId, jobId, idempotencyKey: null, kind: 'assets', mode, dryRun: false, atomic: false, format: 'csv' },
  });
  if (begun.error !== undefined) throw new Error(`bulk.begin: ${JSON.stringify(begun.error)}`);
  let processed = 0;
  return (from, to) => {
    const rows: BatchArgs['rows'] = [];
    for (let i = from; i < to; i++) {
      rows.push({ row: i, body: { external_key: `BULK-${i}`, name: `Asset ${i}`, tags: [{ tag_type: 'rfid', value: tagValue(i) }] } });
    }
    const args: BatchArgs = {
      orgId: side.orgId,
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
    const answer = side.writer.execute({ id: ++serial, name: assetBatchCommand.name, now: Date.now(), args });
    if (answer.error !== undefined) throw new Error(`batch: ${JSON.stringify(answer.error)}`);
    processed += rows.length;
  };
}

/** `--mode upsert`: the rows are created first (not measured), then the measured job re-imports them unchanged. */
function batchCommand(side: Omit<Side, 'block'>): Side {
  if (MODE === 'upsert') {
    const create = job(side, 'create');
    for (let from = 1; from <= ROWS; from += BATCH) create(from, Math.min(from + BATCH, ROWS + 1));
    const finished = side.writer.writer
      .prepare("UPDATE bulk_jobs SET status = 'completed' WHERE org_id = ? AND status = 'processing'")
      .run(side.orgId);
    if (finished.changes !== 1) throw new Error('the create job was not processing');
  }
  return { ...side, block: job(side, MODE) };
}

/** This thread's CPU time in microseconds (Linux). */
const threadCpuUs = () => Number(fs.readFileSync('/proc/thread-self/schedstat', 'utf8').split(' ')[0]) / 1000;
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;
const sides = [rawInsert(await open('raw insert (the ceiling)')), batchCommand(await open('bulk.assets.apply'))];
if (TEXT_INDEX === 'both') sides.push(batchCommand(await open('bulk.assets.apply without the text index triggers', false)));
const loadBefore = os.loadavg();
const started = performance.now();
try {
  for (let from = 1, turn = 0; from <= ROWS; from += BATCH, turn++) {
    for (let k = 0; k < sides.length; k++) {
      const side = sides[(k + turn) % sides.length]!;
      const to = Math.min(from + BATCH, ROWS + 1);
      const cpu = process.cpuUsage();
      const thread = threadCpuUs();
      side.block(from, to);
      side.threadUs.push((threadCpuUs() - thread) / (to - from));
      const used = process.cpuUsage(cpu);
      side.cpuUs.push((used.user + used.system) / (to - from));
    }
  }
  for (const side of sides.slice(1)) {
    const counts = side.writer.writer
      .prepare("SELECT created, updated, unchanged FROM bulk_jobs WHERE org_id = ? AND status = 'processing'")
      .get(side.orgId) as { created: number; updated: number; unchanged: number };
    if (counts[MODE === 'create' ? 'created' : 'unchanged'] !== ROWS) throw new Error(`${side.name}: ${JSON.stringify(counts)}`);
  }
} finally {
  for (const side of sides) {
    side.writer.close();
    side.control.close();
    fs.rmSync(side.dir, { recursive: true, force: true });
  }
}
const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
const perRow = (side: Side) => mean(side.threadUs);
const r1 = (x: number) => Math.round(x * 10) / 10;
const [ceiling, batch] = sides as [Side, Side];
const result = {
  generated_at: new Date().toISOString(),
  command: `node dist/bench/probes/importBatch.js ${process.argv.slice(2).join(' ')}`,
  machine: {
    ...machine(),
    load_average_before: loadBefore.map((x) => Math.round(x * 10) / 10),
    load_average_after: os.loadavg().map((x) => Math.round(x * 10) / 10),
  },
  rows: ROWS,
  mode: MODE,
  text_index_triggers: TEXT_INDEX,
  wall_seconds: Math.round((performance.now() - started) / 100) / 10,
  cpu_us_per_row: Object.fromEntries(
    sides.map((s) => [
      s.name,
      { thread_mean: r1(perRow(s)), thread_median_of_blocks: r1(median(s.threadUs)), process_mean: r1(mean(s.cpuUs)) },
    ]),
  ),
  batch_vs_ceiling_thread_cpu: Math.round((perRow(batch) / perRow(ceiling)) * 100) / 100,
  rows_per_thread_cpu_second: Object.fromEntries(sides.map((s) => [s.name, Math.round(1e6 / perRow(s))])),
  ...(sides[2] === undefined ? {} : { text_index_us_per_row: r1(perRow(batch) - perRow(sides[2])) }),
};
const text = JSON.stringify(result, null, 2);
if (values.out !== undefined) fs.writeFileSync(values.out, `${text}\n`);
process.stdout.write(`${text}\n`);
