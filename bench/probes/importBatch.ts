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
import os from 'node:os';
import fs from 'node:fs';
import { parseArgs } from 'node:util';
import { closeImportFile, type ImportFile, importJob, openImportFile, rawInsert, threadCounters } from '../lib/importSides.js';
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

interface Side {
  file: ImportFile;
  cpuUs: number[];
  threadUs: number[];
  block: (from: number, to: number) => void;
}

const open = (name: string, textIndex = TEXT_INDEX !== 'off') => openImportFile(name, { textIndex });

/** `--mode upsert`: the rows are created first (not measured), then the measured job re-imports them unchanged. */
function batchCommand(file: ImportFile): Side {
  if (MODE === 'upsert') {
    const create = importJob(file, 'create');
    for (let from = 1; from <= ROWS; from += BATCH) create(from, Math.min(from + BATCH, ROWS + 1));
    const finished = file.writer.writer
      .prepare("UPDATE bulk_jobs SET status = 'completed' WHERE org_id = ? AND status = 'processing'")
      .run(file.orgId);
    if (finished.changes !== 1) throw new Error('the create job was not processing');
  }
  return { file, cpuUs: [], threadUs: [], block: importJob(file, MODE) };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;
const ceilingFile = await open('raw insert (the ceiling)');
const sides: Side[] = [
  { file: ceilingFile, cpuUs: [], threadUs: [], block: rawInsert(ceilingFile) },
  batchCommand(await open('bulk.assets.apply')),
];
if (TEXT_INDEX === 'both') sides.push(batchCommand(await open('bulk.assets.apply without the text index triggers', false)));
const loadBefore = os.loadavg();
const started = performance.now();
try {
  for (let from = 1, turn = 0; from <= ROWS; from += BATCH, turn++) {
    for (let k = 0; k < sides.length; k++) {
      const side = sides[(k + turn) % sides.length]!;
      const to = Math.min(from + BATCH, ROWS + 1);
      const cpu = process.cpuUsage();
      const thread = threadCounters().cpuUs;
      side.block(from, to);
      side.threadUs.push((threadCounters().cpuUs - thread) / (to - from));
      const used = process.cpuUsage(cpu);
      side.cpuUs.push((used.user + used.system) / (to - from));
    }
  }
  for (const side of sides.slice(1)) {
    const counts = side.file.writer.writer
      .prepare("SELECT created, updated, unchanged FROM bulk_jobs WHERE org_id = ? AND status = 'processing'")
      .get(side.file.orgId) as { created: number; updated: number; unchanged: number };
    if (counts[MODE === 'create' ? 'created' : 'unchanged'] !== ROWS) throw new Error(`${side.file.name}: ${JSON.stringify(counts)}`);
  }
} finally {
  for (const side of sides) closeImportFile(side.file);
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
      s.file.name,
      { thread_mean: r1(perRow(s)), thread_median_of_blocks: r1(median(s.threadUs)), process_mean: r1(mean(s.cpuUs)) },
    ]),
  ),
  batch_vs_ceiling_thread_cpu: Math.round((perRow(batch) / perRow(ceiling)) * 100) / 100,
  rows_per_thread_cpu_second: Object.fromEntries(sides.map((s) => [s.file.name, Math.round(1e6 / perRow(s))])),
  ...(sides[2] === undefined ? {} : { text_index_us_per_row: r1(perRow(batch) - perRow(sides[2])) }),
};
const text = JSON.stringify(result, null, 2);
if (values.out !== undefined) fs.writeFileSync(values.out, `${text}\n`);
process.stdout.write(`${text}\n`);
