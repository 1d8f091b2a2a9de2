/**
 * Bulk import and export through the HTTP jobs (issue 16), each beside a ceiling measured in the same run:
 *
 *   node dist/bench/probes/bulk.js [--rows 1000000] [--out bench/results/bulk.json] [--cpu-prof-dir DIR]
 *
 * - import: a CSV of `rows` assets with one tag each, POSTed to /api/v1/assets/bulk of a `trackd serve`
 *   child (production settings), timed from the first byte sent to the job's `completed`; then the
 *   same file again in upsert mode (every row unchanged). Ceiling: the same rows inserted straight
 *   into a fresh shard file (same schema and indexes, one transaction per 1,000 rows, prepared
 *   statements, no validation, no HTTP, no records).
 * - reads during the import: one client reading the same org (a list page, an asset by id) back to back
 *   while the import runs, p50/p99/max; ceiling: the same reads for 10 s once the import finished.
 * - export: GET /api/v1/assets/export read to its end (NDJSON), rows/s and trackd's resident memory
 *   sampled during it against before it. Ceiling: the export's own query iterated on the shard
 *   file with each row serialized (JSON.stringify), in this process.
 * Prints one JSON document and writes it to --out.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import Database from 'better-sqlite3';
import { ControlPlane } from '../../src/control/controlPlane.js';
import { tagsJsonColumn } from '../../src/masterdata/tags.js';
import { masterColumns } from '../../src/masterdata/view.js';
import { scanPlacement } from '../../src/scans/placement.js';
import '../../src/shards/commandIndex.js';
import { ShardGenerations } from '../../src/shards/generations.js';
import { ShardWriter } from '../../src/shards/writer.js';
import { machine } from '../lib/processes.js';
import { startBenchNats, TrackdProcess } from '../lib/trackd.js';
import { ROOT } from '../lib/processes.js';

const { values } = parseArgs({ options: { rows: { type: 'string' }, out: { type: 'string' }, 'cpu-prof-dir': { type: 'string' } } });
const ROWS = Number(values.rows ?? 1_000_000);
const OUT = values.out ?? path.join(ROOT, 'bench', 'results', 'bulk.json');
const BIN = path.join(ROOT, 'bin', 'trackd.js');

const round = (x: number) => Math.round(x);

function writeCsv(file: string): number {
  const fd = fs.openSync(file, 'w');
  fs.writeSync(fd, 'external_key,name,tags\n');
  let block = '';
  for (let i = 1; i <= ROWS; i++) {
    block += `BULK-${i},Asset ${i},rfid:E2${String(i).padStart(22, '0')}\n`;
    if (block.length > 1 << 20) {
      fs.writeSync(fd, block);
      block = '';
    }
  }
  fs.writeSync(fd, block);
  fs.closeSync(fd);
  return fs.statSync(file).size;
}

function cli(dataDir: string, args: string[]): any {
  const r = spawnSync(process.execPath, [BIN, ...args], { env: { ...process.env, DATA_DIR: dataDir }, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`trackd ${args.join(' ')}: ${r.stderr}`);
  return JSON.parse(r.stdout);
}

function request(url: string, options: http.RequestOptions, body?: fs.ReadStream): Promise<http.IncomingMessage> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, options, resolve);
    req.on('error', reject);
    if (body === undefined) req.end();
    else body.pipe(req);
  });
}

async function text(res: http.IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of res) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

async function importOnce(base: string, token: string, file: string, mode: string): Promise<{ seconds: number; job: any }> {
  const started = performance.now();
  const res = await request(
    `${base}/api/v1/assets/bulk?mode=${mode}`,
    {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'text/csv', 'content-length': String(fs.statSync(file).size) },
    },
    fs.createReadStream(file, { highWaterMark: 1 << 20 }),
  );
  const accepted = JSON.parse(await text(res));
  if (res.statusCode !== 202) throw new Error(`import: ${res.statusCode} ${JSON.stringify(accepted)}`);
  for (;;) {
    const job = JSON.parse(
      await text(await request(`${base}${accepted.status_url}`, { headers: { authorization: `Bearer ${token}` } })),
    ).data;
    if (job.status === 'completed' || job.status === 'failed') return { seconds: (performance.now() - started) / 1000, job };
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Closed-loop HTTP reads on the importing org (a list page, then an asset by id), one at a time, until `stop`; each one's latency in ms. */
async function readLoop(base: string, token: string, stop: { done: boolean }): Promise<number[]> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const latencies: number[] = [];
  const paths = ['/api/v1/assets?limit=20', '/api/v1/assets/1'];
  for (let i = 0; !stop.done; i++) {
    const started = performance.now();
    await text(await request(`${base}${paths[i % 2]}`, { agent, headers: { authorization: `Bearer ${token}` } }));
    latencies.push(performance.now() - started);
  }
  agent.destroy();
  return latencies;
}

function percentiles(latencies: number[]): { reads: number; p50_ms: number; p99_ms: number; max_ms: number } {
  const sorted = [...latencies].sort((a, b) => a - b);
  const at = (q: number) => Math.round((sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0) * 10) / 10;
  return { reads: sorted.length, p50_ms: at(0.5), p99_ms: at(0.99), max_ms: at(1) };
}

/** The reads alone for `ms` (the ceiling of the reads-during-import figure, same process, same data). */
async function idleReads(base: string, token: string, ms: number): Promise<number[]> {
  const stop = { done: false };
  const timer = setTimeout(() => {
    stop.done = true;
  }, ms);
  const latencies = await readLoop(base, token, stop);
  clearTimeout(timer);
  return latencies;
}

function rssMb(pid: number): number {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+)/.exec(status)![1]) / 1024;
}

async function exportOnce(
  base: string,
  token: string,
  pid: number,
): Promise<{ seconds: number; rows: number; bytes: number; rssBeforeMb: number; rssMaxMb: number }> {
  const rssBeforeMb = rssMb(pid);
  let rssMaxMb = rssBeforeMb;
  const sampler = setInterval(() => {
    rssMaxMb = Math.max(rssMaxMb, rssMb(pid));
  }, 100);
  const started = performance.now();
  const res = await request(`${base}/api/v1/assets/export`, { headers: { authorization: `Bearer ${token}` } });
  let rows = 0;
  let bytes = 0;
  for await (const chunk of res) {
    const c = chunk as Buffer;
    bytes += c.length;
    for (let i = c.indexOf(10); i >= 0; i = c.indexOf(10, i + 1)) rows++;
  }
  clearInterval(sampler);
  return { seconds: (performance.now() - started) / 1000, rows, bytes, rssBeforeMb: round(rssBeforeMb), rssMaxMb: round(rssMaxMb) };
}

/** The import ceiling: the same rows straight into a fresh shard file. */
async function insertCeiling(dir: string): Promise<number> {
  const control = await ControlPlane.open(dir);
  const org = await control.createOrg('ceiling', 1);
  const writer = await ShardWriter.open(dir, 0, control, new ShardGenerations(), { placement: scanPlacement });
  const db = writer.writer;
  const asset = db.prepare(
    'INSERT INTO assets (id, org_id, external_key, name, description, is_active, metadata, valid_from, valid_to, created_at, updated_at) VALUES (?, ?, ?, ?, NULL, 1, ?, ?, NULL, ?, ?)',
  );
  const tag = db.prepare('INSERT INTO tags (id, org_id, tag_type, value, asset_id, created_at) VALUES (?, ?, ?, ?, ?, ?)');
  const started = performance.now();
  const now = Date.now();
  for (let from = 1; from <= ROWS; from += 1000) {
    db.transaction(() => {
      for (let i = from; i < from + 1000 && i <= ROWS; i++) {
        asset.run(i, org.id, `BULK-${i}`, `Asset ${i}`, '{}', now, now, now);
        tag.run(i, org.id, 'rfid', `E2${String(i).padStart(22, '0')}`, i, now);
      }
    })();
  }
  const seconds = (performance.now() - started) / 1000;
  writer.close();
  control.close();
  return ROWS / seconds;
}

/** The export ceiling: the export's query iterated and serialized on the shard file, in this process. */
function exportCeiling(shardFile: string): number {
  const db = new Database(shardFile, { readonly: true });
  const sql = `SELECT ${[...masterColumns('a'), 'a.metadata', tagsJsonColumn('a', 'asset_id')].join(', ')} FROM assets a WHERE a.org_id = ? AND a.deleted_at IS NULL ORDER BY a.id`;
  const started = performance.now();
  let rows = 0;
  let bytes = 0;
  for (const row of db.prepare(sql).iterate(1)) {
    bytes += JSON.stringify(row).length;
    rows++;
  }
  const seconds = (performance.now() - started) / 1000;
  db.close();
  if (rows === 0 || bytes === 0) throw new Error('export ceiling read nothing');
  return rows / seconds;
}

const work = fs.mkdtempSync(path.join(os.tmpdir(), 'trackd-bulk-bench-'));
try {
  const csv = path.join(work, 'assets.csv');
  const csvBytes = writeCsv(csv);
  const dataDir = path.join(work, 'data');
  fs.mkdirSync(dataDir);
  const nats = await startBenchNats(path.join(work, 'nats'));
  const org = cli(dataDir, ['orgs', 'create', '--name', 'bench']);
  const { token } = cli(dataDir, [
    'keys',
    'create',
    '--org',
    String(org.id),
    '--name',
    'bench',
    '--scopes',
    'assets:read,assets:write',
    '--env',
    'production',
  ]);
  const profDir = values['cpu-prof-dir'];
  const trackd = await TrackdProcess.start({
    dataDir,
    natsUrl: nats.url,
    env: { SHARDS: '1', HTTP_THREADS: '2' },
    nodeArgs: profDir === undefined ? [] : ['--cpu-prof', '--cpu-prof-dir', path.resolve(profDir)],
  });
  let first: Awaited<ReturnType<typeof importOnce>>;
  let again: Awaited<ReturnType<typeof importOnce>>;
  let exported: Awaited<ReturnType<typeof exportOnce>>;
  let duringImport: ReturnType<typeof percentiles>;
  let idle: ReturnType<typeof percentiles>;
  try {
    const stopReads = { done: false };
    const readsDuring = readLoop(trackd.url, token, stopReads);
    first = await importOnce(trackd.url, token, csv, 'create');
    stopReads.done = true;
    duringImport = percentiles(await readsDuring);
    idle = percentiles(await idleReads(trackd.url, token, 10_000));
    again = await importOnce(trackd.url, token, csv, 'upsert');
    exported = await exportOnce(trackd.url, token, trackd.child.pid!);
  } finally {
    await trackd.stop();
    await nats.stop();
  }
  const exportCeilingRate = exportCeiling(path.join(dataDir, 'shards', 'shard-0.sqlite'));
  const insertRate = await insertCeiling(path.join(work, 'ceiling'));
  const importRate = ROWS / first.seconds;
  const upsertRate = ROWS / again.seconds;
  const exportRate = exported.rows / exported.seconds;
  const result = {
    probe: 'bulk',
    rows: ROWS,
    csv_bytes: csvBytes,
    machine: machine(),
    load_average: os.loadavg().map((x) => Math.round(x * 10) / 10),
    import: {
      rows_per_s: round(importRate),
      seconds: Math.round(first.seconds * 10) / 10,
      job: {
        created: first.job.created,
        failed_rows: first.job.failed_rows,
        tags_created: first.job.tags_created,
        status: first.job.status,
      },
      ceiling_sqlite_insert_rows_per_s: round(insertRate),
      vs_ceiling: Math.round((importRate / insertRate) * 100) / 100,
    },
    reads_during_import: {
      ...duringImport,
      ceiling_idle_reads: idle,
      p99_vs_idle: Math.round((duringImport.p99_ms / Math.max(0.1, idle.p99_ms)) * 10) / 10,
      target_p99_ms: 50,
    },
    reimport_upsert: {
      rows_per_s: round(upsertRate),
      seconds: Math.round(again.seconds * 10) / 10,
      job: { unchanged: again.job.unchanged, updated: again.job.updated, created: again.job.created, status: again.job.status },
      vs_import: Math.round((upsertRate / importRate) * 100) / 100,
    },
    export: {
      rows_per_s: round(exportRate),
      rows: exported.rows,
      bytes: exported.bytes,
      seconds: Math.round(exported.seconds * 10) / 10,
      trackd_rss_mb_before: exported.rssBeforeMb,
      trackd_rss_mb_max_during: exported.rssMaxMb,
      ceiling_sqlite_iterate_rows_per_s: round(exportCeilingRate),
      vs_ceiling: Math.round((exportRate / exportCeilingRate) * 100) / 100,
    },
    targets: { import_rows_per_s: 50_000, export_rows_per_s: 200_000 },
  };
  fs.writeFileSync(OUT, `${JSON.stringify(result, null, 2)}\n`);
  process.stdout.write(`${JSON.stringify(result)}\n`);
} finally {
  fs.rmSync(work, { recursive: true, force: true });
}
