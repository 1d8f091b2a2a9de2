/**
 * Bulk import and export measured from the outside (issue 16), shared by the bench's `import` and
 * `export` scenarios and bench/probes/bulk.ts: the CSV, the job over HTTP, reads beside it, an
 * export read to its end with trackd's memory sampled, and the ceilings of the same rows.
 */
import fs from 'node:fs';
import http from 'node:http';
import Database from 'better-sqlite3';
import type { Knex } from 'knex';
import { eventLogSequence, walksReport, walksTable } from '../../src/bulk/export.js';
import { raiseWriterCache } from '../../src/bulk/writerCache.js';
import { ControlPlane } from '../../src/control/controlPlane.js';
import { addLowerFunction } from '../../src/masterdata/filters.js';
import { scanPlacement } from '../../src/scans/placement.js';
import '../../src/shards/commandIndex.js';
import { ShardGenerations } from '../../src/shards/generations.js';
import { ShardWriter } from '../../src/shards/writer.js';
import { rawInsert, tagValue } from './importSides.js';

/** A CSV of `rows` assets with one rfid tag each (`external_key,name,tags`); returns its size in bytes. */
export function writeAssetCsv(file: string, rows: number): number {
  const fd = fs.openSync(file, 'w');
  fs.writeSync(fd, 'external_key,name,tags\n');
  let block = '';
  for (let i = 1; i <= rows; i++) {
    block += `BULK-${i},Asset ${i},rfid:${tagValue(i)}\n`;
    if (block.length > 1 << 20) {
      fs.writeSync(fd, block);
      block = '';
    }
  }
  fs.writeSync(fd, block);
  fs.closeSync(fd);
  return fs.statSync(file).size;
}

/**
 * One request; without an agent of the caller's, on a connection of its own: Node 20's global agent
 * keeps sockets alive, and one reused just as the server closed it for being idle fails the run
 * with "socket hang up".
 */
function request(url: string, options: http.RequestOptions, body?: fs.ReadStream | string): Promise<http.IncomingMessage> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { agent: false, ...options }, resolve);
    req.on('error', reject);
    if (body === undefined) req.end();
    else if (typeof body === 'string') req.end(body);
    else body.pipe(req);
  });
}

async function text(res: http.IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of res) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

/** One JSON request with a bearer token; the status and the parsed body. */
export async function jsonRequest(
  base: string,
  token: string,
  method: string,
  urlPath: string,
  body?: unknown,
): Promise<{ status: number; json: any }> {
  const headers: http.OutgoingHttpHeaders = { authorization: `Bearer ${token}` };
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await request(`${base}${urlPath}`, { method, headers }, body === undefined ? undefined : JSON.stringify(body));
  return { status: res.statusCode ?? 0, json: JSON.parse(await text(res)) };
}

export interface ImportJob {
  status: string;
  total_rows: number | null;
  created: number;
  updated: number;
  unchanged: number;
  failed_rows: number;
  tags_created: number;
  detail?: string | null;
}

/** POSTs a CSV file to /api/v1/assets/bulk and polls its job until it settles: seconds from the first byte to `completed`. */
export async function importFile(
  base: string,
  token: string,
  file: string,
  mode: 'create' | 'upsert',
): Promise<{ seconds: number; job: ImportJob }> {
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
    const { json } = await jsonRequest(base, token, 'GET', accepted.status_url);
    const job = json.data as ImportJob;
    if (job.status === 'completed' || job.status === 'failed') return { seconds: (performance.now() - started) / 1000, job };
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Closed-loop HTTP reads (the paths in turn), one at a time, until `stop.done`; each one's latency in ms. Any non-200 throws. */
export async function readLoop(base: string, token: string, paths: string[], stop: { done: boolean }): Promise<number[]> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const latencies: number[] = [];
  try {
    for (let i = 0; !stop.done; i++) {
      const path = paths[i % paths.length]!;
      const started = performance.now();
      const res = await request(`${base}${path}`, { agent, headers: { authorization: `Bearer ${token}` } });
      await text(res);
      latencies.push(performance.now() - started);
      if (res.statusCode !== 200) throw new Error(`read ${path} answered ${res.statusCode}`);
    }
  } finally {
    agent.destroy();
  }
  return latencies;
}

/** The same reads alone for `ms` (the ceiling of reads measured during something else). */
export async function readsFor(base: string, token: string, paths: string[], ms: number): Promise<number[]> {
  const stop = { done: false };
  const timer = setTimeout(() => {
    stop.done = true;
  }, ms);
  try {
    return await readLoop(base, token, paths, stop);
  } finally {
    clearTimeout(timer);
  }
}

/** CPU seconds (user + system, every thread) a process used so far: /proc/PID/stat in clock ticks of 1/100 s. */
export function cpuSeconds(pid: number): number {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** Each thread's CPU seconds so far (Linux), by `tid name`: a thread's share of an import's CPU, where event loop busy time also counts waiting for a core. */
export function threadCpuSeconds(pid: number): Map<string, number> {
  const threads = new Map<string, number>();
  for (const tid of fs.readdirSync(`/proc/${pid}/task`)) {
    try {
      const name = fs.readFileSync(`/proc/${pid}/task/${tid}/comm`, 'utf8').trim();
      const ns = Number(fs.readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
      threads.set(`${tid} ${name}`, ns / 1e9);
    } catch {
      // The thread ended between the listing and the read.
    }
  }
  return threads;
}

function rssMb(pid: number): number {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+)/.exec(status)![1]) / 1024;
}

export interface ExportFigure {
  seconds: number;
  rows: number;
  bytes: number;
  /** trackd's resident memory before the export and its highest sample during it (every 100 ms), MB. */
  rssBeforeMb: number;
  rssMaxMb: number;
  /** Trackd-Event-Sequence of the answer. */
  sequence: number | undefined;
  /** trackd's CPU seconds (user + system, every thread, from /proc) from the request to the body's end. */
  trackdCpuSeconds: number;
}

/** GET an export (NDJSON, or CSV by `accept`) and read it to its end, counting lines, while sampling trackd's resident memory. */
export async function exportOnce(base: string, token: string, urlPath: string, pid: number, accept?: string): Promise<ExportFigure> {
  const rssBeforeMb = rssMb(pid);
  const cpuBefore = cpuSeconds(pid);
  let rssMaxMb = rssBeforeMb;
  const sampler = setInterval(() => {
    rssMaxMb = Math.max(rssMaxMb, rssMb(pid));
  }, 100);
  try {
    const started = performance.now();
    const headers: Record<string, string> = { authorization: `Bearer ${token}` };
    if (accept !== undefined) headers.accept = accept;
    const res = await request(`${base}${urlPath}`, { headers });
    if (res.statusCode !== 200) throw new Error(`export ${urlPath} answered ${res.statusCode}: ${(await text(res)).slice(0, 300)}`);
    let rows = 0;
    let bytes = 0;
    for await (const chunk of res) {
      const c = chunk as Buffer;
      bytes += c.length;
      for (let i = c.indexOf(10); i >= 0; i = c.indexOf(10, i + 1)) rows++;
    }
    const sequence = res.headers['trackd-event-sequence'];
    return {
      seconds: (performance.now() - started) / 1000,
      rows,
      bytes,
      rssBeforeMb: Math.round(rssBeforeMb),
      rssMaxMb: Math.round(Math.max(rssMaxMb, rssMb(pid))),
      sequence: typeof sequence === 'string' ? Number(sequence) : undefined,
      trackdCpuSeconds: cpuSeconds(pid) - cpuBefore,
    };
  } finally {
    clearInterval(sampler);
  }
}

/** `read` on a read-only connection to a shard file, beside the running trackd. */
function onShardFile<T>(shardFile: string, read: (db: Database.Database) => T): T {
  const db = new Database(shardFile, { readonly: true, fileMustExist: true });
  try {
    return read(db);
  } finally {
    db.close();
  }
}

/** The org's last event-log sequence, read from its shard file. */
export const eventSequence = (shardFile: string, orgId: number): number => onShardFile(shardFile, (db) => eventLogSequence(db, orgId));

/** Whether trackd's unfiltered report export of the org walks scan_positions (walksReport), read as trackd reads it. */
export const exportWalksReport = (shardFile: string, orgId: number): boolean => onShardFile(shardFile, (db) => walksReport(db, orgId, {}));

/** Whether trackd's unfiltered asset export of the org walks the table (walksTable), read as trackd reads it. */
export const exportWalksTable = (shardFile: string, orgId: number): boolean => onShardFile(shardFile, (db) => walksTable(db, orgId, {}));

/**
 * Import ceiling: the CSV's rows inserted straight into a fresh shard file (same schema and
 * indexes, one transaction per 1,000 rows, prepared statements; no parsing, validation, HTTP,
 * events or records), the q text index kept per transaction as an import batch keeps it (paused
 * triggers, the asset before its tag, one rewrite at the end: migration 016), with the writer cache
 * a job's batches raise (bulk/writerCache.ts). Rows/s.
 */
export async function assetInsertCeiling(dir: string, rows: number): Promise<number> {
  const control = await ControlPlane.open(dir);
  const org = await control.createOrg('ceiling', 1);
  const writer = await ShardWriter.open(dir, 0, control, new ShardGenerations(), { placement: scanPlacement });
  try {
    raiseWriterCache(writer);
    const insert = rawInsert({ name: 'ceiling', dir, control, writer, orgId: org.id });
    const started = performance.now();
    for (let from = 1; from <= rows; from += 1000) insert(from, Math.min(from + 1000, rows + 1));
    return rows / ((performance.now() - started) / 1000);
  } finally {
    writer.close();
    control.close();
  }
}

/** The raw read of the import file: read in 1 MiB pieces and its lines counted. Data rows/s. */
export function fileReadCeiling(file: string): number {
  const started = performance.now();
  const fd = fs.openSync(file, 'r');
  const buffer = Buffer.allocUnsafe(1 << 20);
  let lines = 0;
  try {
    for (let n = fs.readSync(fd, buffer); n > 0; n = fs.readSync(fd, buffer)) {
      for (let i = buffer.indexOf(10); i >= 0 && i < n; i = buffer.indexOf(10, i + 1)) lines++;
    }
  } finally {
    fs.closeSync(fd);
  }
  return (lines - 1) / ((performance.now() - started) / 1000);
}

/**
 * Export ceiling: the export's own statement on the shard file, in one read transaction, each row
 * made a line by `line` and the lines written to /dev/null in pieces of 64 KiB (the export's piece
 * size); no HTTP. Rows and seconds.
 */
export function selectToDevNull(
  shardFile: string,
  statement: Knex.QueryBuilder,
  line: (row: any) => string,
): { rows: number; seconds: number; cpuSeconds: number } {
  const db = new Database(shardFile, { readonly: true, fileMustExist: true });
  addLowerFunction(db);
  const out = fs.openSync('/dev/null', 'w');
  try {
    const native = statement.toSQL().toNative();
    const started = performance.now();
    const cpu = process.cpuUsage();
    db.exec('BEGIN');
    let rows = 0;
    let piece = '';
    for (const row of db.prepare(native.sql).iterate(...(native.bindings as unknown[]))) {
      piece += `${line(row)}\n`;
      rows++;
      if (piece.length >= 64 * 1024) {
        fs.writeSync(out, piece);
        piece = '';
      }
    }
    fs.writeSync(out, piece);
    db.exec('COMMIT');
    const used = process.cpuUsage(cpu);
    return { rows, seconds: (performance.now() - started) / 1000, cpuSeconds: (used.user + used.system) / 1e6 };
  } finally {
    fs.closeSync(out);
    db.close();
  }
}
