/**
 * Why an import's row costs more the larger the org (issue 16): the import ceiling's rows (an asset
 * with one rfid tag) put into fresh shard files up to --rows, 1,000 per transaction, the files
 * taking turns batch by batch so that a shared machine's drift falls on all alike; per block of
 * --block rows and per file, this thread's CPU per row and what it read: minor page faults (the
 * memory-mapped part of the file, first touch), read calls and their bytes (pages outside the map,
 * and every page read from the WAL).
 *
 *   node dist/bench/probes/importGrowth.js [--rows 1000000] [--block 100000] [--files batch:64,batch:512,raw:64,raw-no-text:64] [--out FILE]
 *
 * A file is `how:cache MiB`: `batch` the shard's `bulk.assets.apply` command of a create job (what
 * an import's shard thread runs), `raw` the bench's raw insert ceiling, `-no-text` without the q
 * text index triggers; the writer's cache_size set to that many MiB (trackd's is 64). More settings
 * may follow, each `:key=value`: `mmap` (the writer's mmap_size in MiB; trackd's is 256), or one of
 * the q text index's FTS5 options (`automerge`, `crisismerge`, `pgsz`) set on the fresh file.
 */
import fs from 'node:fs';
import os from 'node:os';
import { parseArgs } from 'node:util';
import { closeImportFile, type ImportFile, importJob, openImportFile, rawInsert, threadCounters } from '../lib/importSides.js';
import { machine } from '../lib/processes.js';

const { values } = parseArgs({
  options: { rows: { type: 'string' }, block: { type: 'string' }, files: { type: 'string' }, out: { type: 'string' } },
});
const ROWS = Number(values.rows ?? 1_000_000);
const BLOCK = Number(values.block ?? 100_000);
const BATCH = 1000;
const SPECS = (values.files ?? 'batch:64,batch:512,raw:64,raw-no-text:64').split(',');

type Counters = ReturnType<typeof threadCounters>;
interface Side {
  spec: string;
  file: ImportFile;
  apply: (from: number, to: number) => void;
  /** Per block: the counters' sums over its batches. */
  blocks: Counters[];
}

async function open(spec: string): Promise<Side> {
  const [how, mib, ...settings] = spec.split(':') as [string, string | undefined, ...string[]];
  if (!['batch', 'batch-no-text', 'raw', 'raw-no-text'].includes(how) || !(Number(mib) > 0)) throw new Error(`--files: ${spec}?`);
  const file = await openImportFile(spec, { textIndex: !how.endsWith('-no-text') });
  const db = file.writer.writer;
  db.pragma(`cache_size = -${Number(mib) * 1024}`);
  for (const setting of settings) {
    const [key, value] = setting.split('=') as [string, string];
    if (key === 'mmap') db.pragma(`mmap_size = ${Number(value) * 1024 * 1024}`);
    else if (['automerge', 'crisismerge', 'pgsz'].includes(key)) {
      for (const table of ['assets_text', 'locations_text'])
        db.exec(`INSERT INTO ${table} (${table}, rank) VALUES ('${key}', ${Number(value)})`);
    } else throw new Error(`--files: ${setting}?`);
  }
  const apply = how.startsWith('batch') ? importJob(file, 'create') : rawInsert(file);
  return { spec, file, apply, blocks: [] };
}

const sides: Side[] = [];
for (const spec of SPECS) sides.push(await open(spec));
const loadBefore = os.loadavg();
const started = performance.now();
const processBlocks: number[] = [];
const fileBytes: Record<string, number> = {};
try {
  let processCpu = process.cpuUsage();
  for (let from = 1, turn = 0; from <= ROWS; from += BATCH, turn++) {
    const to = Math.min(from + BATCH, ROWS + 1);
    const block = Math.floor((from - 1) / BLOCK);
    for (let k = 0; k < sides.length; k++) {
      const side = sides[(k + turn) % sides.length]!;
      const before = threadCounters();
      side.apply(from, to);
      const after = threadCounters();
      const sum = (side.blocks[block] ??= { cpuUs: 0, minorFaults: 0, readCalls: 0, readBytes: 0 });
      for (const key of Object.keys(sum) as (keyof Counters)[]) sum[key] += after[key] - before[key];
    }
    if (to > ROWS || (to - 1) % BLOCK === 0) {
      const used = process.cpuUsage(processCpu);
      processBlocks.push(used.user + used.system);
      processCpu = process.cpuUsage();
    }
  }
  for (const side of sides) {
    const main = side.file.writer.writer.name;
    fileBytes[side.spec] = fs.statSync(main).size + (fs.existsSync(`${main}-wal`) ? fs.statSync(`${main}-wal`).size : 0);
  }
} finally {
  for (const side of sides) closeImportFile(side.file);
}
const r1 = (x: number) => Math.round(x * 10) / 10;
const r2 = (x: number) => Math.round(x * 100) / 100;
const result = {
  generated_at: new Date().toISOString(),
  command: `node dist/bench/probes/importGrowth.js ${process.argv.slice(2).join(' ')}`,
  machine: {
    ...machine(),
    load_average_before: loadBefore.map(r1),
    load_average_after: os.loadavg().map(r1),
  },
  rows: ROWS,
  block_rows: BLOCK,
  wall_seconds: r1((performance.now() - started) / 1000),
  file_mb_at_end: Object.fromEntries(Object.entries(fileBytes).map(([k, v]) => [k, Math.round(v / 1e6)])),
  note: 'per row of each block of each file, this thread only (the background checkpointer is in process_cpu_us_per_row, all files together)',
  per_block: sides.map((side) => ({
    file: side.spec,
    thread_cpu_us_per_row: side.blocks.map((b) => r1(b.cpuUs / BLOCK)),
    minor_faults_per_row: side.blocks.map((b) => r2(b.minorFaults / BLOCK)),
    read_calls_per_row: side.blocks.map((b) => r2(b.readCalls / BLOCK)),
    read_kb_per_row: side.blocks.map((b) => r2(b.readBytes / 1024 / BLOCK)),
  })),
  process_cpu_us_per_row_all_files: processBlocks.map((us) => r1(us / BLOCK)),
};
const text = JSON.stringify(result, null, 2);
if (values.out !== undefined) fs.writeFileSync(values.out, `${text}\n`);
process.stdout.write(`${text}\n`);
