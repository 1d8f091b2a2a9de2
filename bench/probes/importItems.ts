/**
 * Where a create import's row goes on the shard thread, statement by statement (issue 16): the
 * `bulk.assets.apply` command of one job (the import ceiling's rows: an asset with one rfid tag,
 * 1,000 per batch) applied into a fresh shard file in this process, with every better-sqlite3
 * statement's run/get/all timed and summed by its SQL (the triggers a statement fires fall on it),
 * the batch command's own time beside them (the rest is JavaScript: checks, views, JSON, ids).
 * Microseconds per row, over the last `--window` rows too (a row's cost grows with the tables).
 *
 *   node dist/bench/probes/importItems.js [--rows 100000] [--window 20000] [--out FILE]
 */
import fs from 'node:fs';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { closeImportFile, importJob, openImportFile, tagValue, threadCounters } from '../lib/importSides.js';
import { machine } from '../lib/processes.js';

const { values } = parseArgs({
  options: {
    rows: { type: 'string' },
    window: { type: 'string' },
    batch: { type: 'string' },
    'fts-config': { type: 'string' },
    'no-timing': { type: 'boolean' },
    optimize: { type: 'boolean' },
    'text-index-at-end': { type: 'boolean' },
    out: { type: 'string' },
  },
});
const ROWS = Number(values.rows ?? 100_000);
const WINDOW = Number(values.window ?? 20_000);
const BATCH = Number(values.batch ?? 1000);
/** FTS5 configuration options set on both text indexes before the rows, `name=value;...` (automerge, crisismerge, pgsz, usermerge). */
const FTS_CONFIG = (values['fts-config'] ?? '').split(';').filter((option) => option !== '');

/**
 * `--text-index-at-end`: what a job-long text index would cost (README, "Where an import row's time
 * goes"): the rows go in without the q text index triggers, and the index of all of them is then
 * built in one statement from the view its triggers write from (its time reported apart).
 */
const TEXT_AT_END = values['text-index-at-end'] === true;
const file = await openImportFile('items', { textIndex: !TEXT_AT_END });
for (const option of FTS_CONFIG) {
  const [name, value] = option.split('=');
  for (const text of ['assets_text', 'locations_text'])
    file.writer.writer.exec(`INSERT INTO ${text} (${text}, rank) VALUES ('${name}', ${Number(value)})`);
}
const spent = new Map<string, { us: number; calls: number; windowUs: number }>();
let inWindow = false;
let recording = true;
const statementProto = Object.getPrototypeOf(file.writer.writer.prepare('SELECT 1')) as Record<string, unknown>;
function record(source: string, us: number): void {
  let entry = spent.get(source);
  if (entry === undefined) {
    entry = { us: 0, calls: 0, windowUs: 0 };
    spent.set(source, entry);
  }
  entry.us += us;
  entry.calls++;
  if (inWindow) entry.windowUs += us;
}
for (const method of values['no-timing'] ? [] : (['run', 'get', 'all'] as const)) {
  const original = statementProto[method] as (...args: unknown[]) => unknown;
  statementProto[method] = function timed(this: { source: string }, ...args: unknown[]) {
    const start = performance.now();
    const value = original.apply(this, args);
    if (recording) record(this.source, (performance.now() - start) * 1000);
    return value;
  };
}

const apply = importJob(file, 'create');
let batchUs = 0;
let windowBatchUs = 0;
const cpuBefore = threadCounters().cpuUs;
let windowCpuBefore = 0;
for (let from = 0; from < ROWS; from += BATCH) {
  if (!inWindow && from >= ROWS - WINDOW) {
    inWindow = true;
    windowCpuBefore = threadCounters().cpuUs;
  }
  const start = performance.now();
  apply(from, Math.min(ROWS, from + BATCH));
  const us = (performance.now() - start) * 1000;
  batchUs += us;
  if (inWindow) windowBatchUs += us;
}
const cpuUs = threadCounters().cpuUs - cpuBefore;
const windowCpuUs = threadCounters().cpuUs - windowCpuBefore;
recording = false;
let textIndexBuildMs = 0;
let textIndexBuildCpuUs = 0;
if (TEXT_AT_END) {
  const start = performance.now();
  const cpu = threadCounters().cpuUs;
  file.writer.writer.transaction(() => {
    file.writer.writer.exec('INSERT INTO assets_text (rowid, body) SELECT id, body FROM assets_text_source');
  })();
  textIndexBuildMs = Math.round(performance.now() - start);
  textIndexBuildCpuUs = threadCounters().cpuUs - cpu;
}

/** What the index then costs a q: the text index's MATCH of a rare phrase (one row's tag) and of a common one, CPU us per query. */
function qCost(phrases: string[]): number {
  const match = file.writer.writer.prepare('SELECT count(*) FROM assets_text WHERE assets_text MATCH ?').pluck();
  for (const phrase of phrases.slice(0, 50)) match.get(`"${phrase}"`);
  const before = threadCounters().cpuUs;
  for (const phrase of phrases) match.get(`"${phrase}"`);
  return Math.round(((threadCounters().cpuUs - before) / phrases.length) * 10) / 10;
}
const pick = (n: number) => Array.from({ length: n }, (_, i) => Math.floor(((i * 7919) % n) * (ROWS / n)));
const segments = file.writer.writer.prepare('SELECT count(DISTINCT segid) FROM assets_text_idx').pluck().get() as number;
const textIndex = {
  segments,
  rare_q_cpu_us: qCost(pick(2000).map((i) => tagValue(i))),
  common_q_cpu_us: qCost(Array.from({ length: 20 }, (_, i) => `Asset ${(i % 9) + 1}${i}`)),
  optimize_ms: 0,
  segments_after_optimize: 0,
  rare_q_cpu_us_after_optimize: 0,
};
if (values.optimize) {
  const start = performance.now();
  file.writer.writer.exec("INSERT INTO assets_text (assets_text) VALUES ('optimize')");
  textIndex.optimize_ms = Math.round(performance.now() - start);
  textIndex.segments_after_optimize = file.writer.writer
    .prepare('SELECT count(DISTINCT segid) FROM assets_text_idx')
    .pluck()
    .get() as number;
  textIndex.rare_q_cpu_us_after_optimize = qCost(pick(2000).map((i) => tagValue(i)));
}
closeImportFile(file);

const perRow = (us: number, rows: number) => Math.round((us / rows) * 10) / 10;
const statements = [...spent.entries()]
  .sort((a, b) => b[1].us - a[1].us)
  .map(([sql, e]) => ({
    sql: sql.replace(/\s+/g, ' ').slice(0, 140),
    calls: e.calls,
    us_per_row: perRow(e.us, ROWS),
    last_window_us_per_row: perRow(e.windowUs, WINDOW),
  }));
const sqlUs = [...spent.values()].reduce((s, e) => s + e.us, 0);
const sqlWindowUs = [...spent.values()].reduce((s, e) => s + e.windowUs, 0);
const result = {
  probe: 'importItems',
  command: `node dist/bench/probes/importItems.js ${process.argv.slice(2).join(' ')}`,
  batch: BATCH,
  fts_config: FTS_CONFIG,
  machine: machine(),
  rows: ROWS,
  window_rows: WINDOW,
  thread_cpu_us_per_row: perRow(cpuUs, ROWS),
  last_window_thread_cpu_us_per_row: perRow(windowCpuUs, WINDOW),
  batch_command_us_per_row: perRow(batchUs, ROWS),
  last_window_batch_command_us_per_row: perRow(windowBatchUs, WINDOW),
  text_index: textIndex,
  ...(TEXT_AT_END ? { text_index_built_at_end: { ms: textIndexBuildMs, cpu_us_per_row: perRow(textIndexBuildCpuUs, ROWS) } } : {}),
  statements_us_per_row: perRow(sqlUs, ROWS),
  javascript_us_per_row: perRow(batchUs - sqlUs, ROWS),
  last_window_javascript_us_per_row: perRow(windowBatchUs - sqlWindowUs, WINDOW),
  statements,
};
if (values.out !== undefined) fs.writeFileSync(values.out, `${JSON.stringify(result, null, 2)}\n`);
process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
