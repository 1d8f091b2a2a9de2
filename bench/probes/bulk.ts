/**
 * Bulk import and export through the HTTP jobs (issue 16), each beside a ceiling measured in the same run:
 *
 *   node dist/bench/probes/bulk.js [--rows 1000000] [--out bench/results/bulk.json] [--cpu-prof-dir DIR] [--trackd-root DIR]
 *       [--data-dir DIR [--export-only --trackd-roots A,B --rounds 3]]
 *
 * `--data-dir`: the run's files (CSV, trackd's DATA_DIR, NATS store, the org and key in probe.json)
 * go there and are kept; a later run with `--export-only` skips the import and measures only the
 * export of that org: for each round, for each of `--trackd-roots` (default this worktree), trackd
 * started on the kept files, the assets exported as NDJSON then CSV, then the ceilings in this
 * process (interleaved A/B of builds on the same rows, one trackd per build and round).
 *
 * `--trackd-root`: the worktree whose build (bin/trackd.js, dist/) runs as trackd (a before/after of
 * two builds with the same probe); this one's by default.
 *
 * - import: a CSV of `rows` assets with one tag each, POSTed to /api/v1/assets/bulk of a `trackd serve`
 *   child (production settings), timed from the first byte sent to the job's `completed`; then the
 *   same file again in upsert mode (every row unchanged). Ceiling: the same rows inserted straight
 *   into a fresh shard file (same schema and indexes, one transaction per 1,000 rows, prepared
 *   statements, no validation, no HTTP, no records).
 * - reads during the import: one client reading the same org (a list page) back to back
 *   while the import runs, p50/p99/max; ceiling: the same reads for 10 s once the import finished.
 *   (The bench's `import` scenario measures the same in `npm run bench`, beside the other scenarios.)
 * - export: GET /api/v1/assets/export read to its end (NDJSON), rows/s and trackd's resident memory
 *   sampled during it against before it. Ceiling: the export's own statement run on the shard file
 *   in this process, its lines written to /dev/null.
 * Prints one JSON document and writes it to --out.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { assetExportSql, reportExportSql } from '../../src/bulk/export.js';
import {
  assetInsertCeiling,
  cpuSeconds,
  threadCpuSeconds,
  exportOnce,
  exportWalksTable,
  importFile,
  readLoop,
  readsFor,
  selectToDevNull,
  writeAssetCsv,
} from '../lib/bulk.js';
import { summarize } from '../lib/loadSpec.js';
import { threadBusy } from '../lib/measure.js';
import { machine, ROOT } from '../lib/processes.js';
import { startBenchNats, TrackdProcess } from '../lib/trackd.js';

const { values } = parseArgs({
  options: {
    rows: { type: 'string' },
    out: { type: 'string' },
    'cpu-prof-dir': { type: 'string' },
    'trackd-root': { type: 'string' },
    'data-dir': { type: 'string' },
    'export-only': { type: 'boolean' },
    'trackd-roots': { type: 'string' },
    rounds: { type: 'string' },
  },
});
const ROWS = Number(values.rows ?? 1_000_000);
const OUT = values.out ?? path.join(ROOT, 'bench', 'results', 'bulk.json');
const BIN = path.join(values['trackd-root'] ?? ROOT, 'bin', 'trackd.js');
const READS = ['/api/v1/assets?limit=20'];

const round = (x: number) => Math.round(x);

function cli(dataDir: string, args: string[]): any {
  const r = spawnSync(process.execPath, [BIN, ...args], { env: { ...process.env, DATA_DIR: dataDir }, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`trackd ${args.join(' ')}: ${r.stderr}`);
  return JSON.parse(r.stdout);
}

function percentiles(latencies: number[]): { reads: number; p50_ms: number; p99_ms: number; max_ms: number } {
  const s = summarize(Float64Array.from(latencies), latencies.length);
  return { reads: latencies.length, p50_ms: s.p50, p99_ms: s.p99, max_ms: s.max };
}

const KEPT = values['data-dir'] === undefined ? undefined : path.resolve(values['data-dir']);
if (values['export-only'] === true) {
  if (KEPT === undefined) throw new Error('--export-only needs --data-dir of an earlier run');
  await exportOnly(KEPT);
  process.exit(0);
}

/** The export-only A/B on kept files (see the header). */
async function exportOnly(kept: string): Promise<void> {
  // reportToken (a key with tracking:read, added by hand beside scan positions written into the kept shard): the report's export too.
  const { orgId, token, reportToken } = JSON.parse(fs.readFileSync(path.join(kept, 'probe.json'), 'utf8')) as {
    orgId: number;
    token: string;
    reportToken?: string;
  };
  const roots = (values['trackd-roots'] ?? ROOT).split(',');
  const rounds = Number(values.rounds ?? 3);
  const shardFile = path.join(kept, 'data', 'shards', 'shard-0.sqlite');
  const walk = exportWalksTable(shardFile, orgId);
  const loadBefore = os.loadavg().map((x) => Math.round(x * 100) / 100);
  const runs: Record<string, unknown>[] = [];
  const figure = (e: Awaited<ReturnType<typeof exportOnce>>) => ({
    rows_per_s: round(e.rows / e.seconds),
    rows: e.rows,
    bytes: e.bytes,
    seconds: Math.round(e.seconds * 100) / 100,
    trackd_cpu_seconds: Math.round(e.trackdCpuSeconds * 100) / 100,
    trackd_cpu_seconds_per_1m_rows: Math.round((e.trackdCpuSeconds / e.rows) * 1e6 * 100) / 100,
    trackd_rss_mb_before: e.rssBeforeMb,
    trackd_rss_mb_max_during: e.rssMaxMb,
  });
  for (let r = 0; r < rounds; r++) {
    for (const root of roots) {
      const nats = await startBenchNats(path.join(kept, 'nats'));
      const trackd = await TrackdProcess.start({
        dataDir: path.join(kept, 'data'),
        natsUrl: nats.url,
        env: { SHARDS: '1', HTTP_THREADS: '2' },
        nodeArgs: values['cpu-prof-dir'] === undefined ? [] : ['--cpu-prof', '--cpu-prof-dir', path.resolve(values['cpu-prof-dir'])],
        bin: path.join(root, 'bin', 'trackd.js'),
      });
      let ndjson: Awaited<ReturnType<typeof exportOnce>>;
      let csv: Awaited<ReturnType<typeof exportOnce>>;
      let report: Awaited<ReturnType<typeof exportOnce>>[] = [];
      try {
        // The first read of a file after the start warms the page cache and the statement for both builds alike.
        await exportOnce(trackd.url, token, '/api/v1/assets/export', trackd.child.pid!);
        ndjson = await exportOnce(trackd.url, token, '/api/v1/assets/export', trackd.child.pid!);
        csv = await exportOnce(trackd.url, token, '/api/v1/assets/export', trackd.child.pid!, 'text/csv');
        if (reportToken !== undefined) {
          const url = '/api/v1/reports/asset-locations/export';
          report = [
            await exportOnce(trackd.url, reportToken, url, trackd.child.pid!),
            await exportOnce(trackd.url, reportToken, url, trackd.child.pid!, 'text/csv'),
          ];
        }
      } finally {
        await trackd.stop();
        await nats.stop();
      }
      const ceiling = selectToDevNull(
        shardFile,
        assetExportSql(orgId, {}, 'ndjson', Date.now(), walk),
        (row: { line: string }) => row.line,
      );
      // The report's ceiling as the bench's export scenario defines it: its statement, each row as JSON.stringify of the raw row.
      const reportCeiling =
        reportToken === undefined
          ? undefined
          : selectToDevNull(shardFile, reportExportSql(orgId, {}, Date.now(), true), (row) => JSON.stringify(row));
      // The same by the org's index (what trackd ran before walksReport), sorted before its first row.
      const reportIndexCeiling =
        reportToken === undefined
          ? undefined
          : selectToDevNull(shardFile, reportExportSql(orgId, {}, Date.now(), false), (row) => JSON.stringify(row));
      const run = {
        round: r + 1,
        trackd_root: root,
        ndjson: {
          ...figure(ndjson),
          vs_ceiling: Math.round((ndjson.rows / ndjson.seconds / (ceiling.rows / ceiling.seconds)) * 100) / 100,
        },
        csv: figure(csv),
        ceiling_select_to_dev_null_rows_per_s: round(ceiling.rows / ceiling.seconds),
        ceiling_cpu_seconds_per_1m_rows: Math.round((ceiling.cpuSeconds / ceiling.rows) * 1e6 * 100) / 100,
        ...(reportCeiling === undefined
          ? {}
          : {
              report_ndjson: figure(report[0]!),
              report_csv: figure(report[1]!),
              report_ceiling_rows_per_s: round(reportCeiling.rows / reportCeiling.seconds),
              report_ceiling_cpu_seconds_per_1m_rows: Math.round((reportCeiling.cpuSeconds / reportCeiling.rows) * 1e6 * 100) / 100,
              report_ceiling_by_index_rows_per_s: round(reportIndexCeiling!.rows / reportIndexCeiling!.seconds),
              report_ceiling_by_index_cpu_seconds_per_1m_rows:
                Math.round((reportIndexCeiling!.cpuSeconds / reportIndexCeiling!.rows) * 1e6 * 100) / 100,
            }),
        load_average: os.loadavg().map((x) => Math.round(x * 100) / 100),
      };
      runs.push(run);
      process.stderr.write(`${JSON.stringify(run)}\n`);
    }
  }
  const result = {
    probe: 'bulk --export-only',
    data_dir: kept,
    walks_table: walk,
    machine: machine(),
    load_average_before: loadBefore,
    load_average_after: os.loadavg().map((x) => Math.round(x * 100) / 100),
    runs,
  };
  fs.writeFileSync(OUT, `${JSON.stringify(result, null, 2)}\n`);
  process.stdout.write(`${JSON.stringify(result)}\n`);
}

const work = KEPT ?? fs.mkdtempSync(path.join(os.tmpdir(), 'trackd-bulk-bench-'));
if (KEPT !== undefined) fs.mkdirSync(KEPT, { recursive: true });
try {
  const csv = path.join(work, 'assets.csv');
  const csvBytes = writeAssetCsv(csv, ROWS);
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
  fs.writeFileSync(path.join(work, 'probe.json'), JSON.stringify({ orgId: org.id, token }));
  const profDir = values['cpu-prof-dir'];
  const trackd = await TrackdProcess.start({
    dataDir,
    natsUrl: nats.url,
    env: { SHARDS: '1', HTTP_THREADS: '2' },
    nodeArgs: profDir === undefined ? [] : ['--cpu-prof', '--cpu-prof-dir', path.resolve(profDir)],
    bin: BIN,
  });
  let first: Awaited<ReturnType<typeof importFile>>;
  let again: Awaited<ReturnType<typeof importFile>>;
  let exported: Awaited<ReturnType<typeof exportOnce>>;
  let duringImport: ReturnType<typeof percentiles>;
  let idle: ReturnType<typeof percentiles>;
  let importCpu: { trackdCpuSeconds: number; shardBusySeconds: number; threads: [string, number][] };
  try {
    const stopReads = { done: false };
    const readsDuring = readLoop(trackd.url, token, READS, stopReads);
    readsDuring.catch(() => undefined);
    const busyBefore = await threadBusy(trackd.url);
    const cpuBefore = cpuSeconds(trackd.child.pid!);
    const threadsBefore = threadCpuSeconds(trackd.child.pid!);
    first = await importFile(trackd.url, token, csv, 'create');
    const threadsAfter = threadCpuSeconds(trackd.child.pid!);
    const busyAfter = await threadBusy(trackd.url);
    importCpu = {
      threads: [...threadsAfter]
        .map(([thread, s]): [string, number] => [thread, Math.round((s - (threadsBefore.get(thread) ?? 0)) * 100) / 100])
        .filter(([, s]) => s >= 0.05)
        .sort((a, b) => b[1] - a[1]),
      trackdCpuSeconds: cpuSeconds(trackd.child.pid!) - cpuBefore,
      shardBusySeconds: (busyAfter.busy.get('shard-0') ?? 0) - (busyBefore.busy.get('shard-0') ?? 0),
    };
    stopReads.done = true;
    duringImport = percentiles(await readsDuring);
    idle = percentiles(await readsFor(trackd.url, token, READS, 10_000));
    again = await importFile(trackd.url, token, csv, 'upsert');
    exported = await exportOnce(trackd.url, token, '/api/v1/assets/export', trackd.child.pid!);
  } finally {
    await trackd.stop();
    await nats.stop();
  }
  // The statement trackd ran (walksTable: by the table when the org is most of the shard).
  const shardFile = path.join(dataDir, 'shards', 'shard-0.sqlite');
  const exported0 = selectToDevNull(
    shardFile,
    assetExportSql(org.id, {}, 'ndjson', Date.now(), exportWalksTable(shardFile, org.id)),
    (row: { line: string }) => row.line,
  );
  const exportCeilingRate = exported0.rows / exported0.seconds;
  const insertRate = await assetInsertCeiling(path.join(work, 'ceiling'), ROWS);
  const importRate = ROWS / first.seconds;
  const upsertRate = ROWS / again.seconds;
  const exportRate = exported.rows / exported.seconds;
  const result = {
    probe: 'bulk',
    trackd_root: values['trackd-root'] ?? ROOT,
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
      trackd_cpu_seconds: Math.round(importCpu.trackdCpuSeconds * 100) / 100,
      rows_per_trackd_cpu_second: round(ROWS / importCpu.trackdCpuSeconds),
      shard_thread_busy_seconds: Math.round(importCpu.shardBusySeconds * 100) / 100,
      rows_per_shard_busy_second: round(ROWS / importCpu.shardBusySeconds),
      /** CPU seconds of each trackd thread (tid and name) during the import, the busiest first. */
      thread_cpu_seconds: Object.fromEntries(importCpu.threads),
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
      ceiling_select_to_dev_null_rows_per_s: round(exportCeilingRate),
      vs_ceiling: Math.round((exportRate / exportCeilingRate) * 100) / 100,
    },
    targets: { import_rows_per_s: 50_000, export_rows_per_s: 200_000 },
  };
  fs.writeFileSync(OUT, `${JSON.stringify(result, null, 2)}\n`);
  process.stdout.write(`${JSON.stringify(result)}\n`);
} finally {
  if (KEPT === undefined) fs.rmSync(work, { recursive: true, force: true });
}
