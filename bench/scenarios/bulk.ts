import fs from 'node:fs';
import path from 'node:path';
import { assetExportSql, reportExportSql } from '../../src/bulk/export.js';
import { ControlPlane } from '../../src/control/controlPlane.js';
import { shardFile } from '../../src/shards/writer.js';
import {
  assetInsertCeiling,
  cpuSeconds,
  eventSequence,
  exportOnce,
  exportWalksReport,
  exportWalksTable,
  fileReadCeiling,
  importFile,
  jsonRequest,
  readLoop,
  readsFor,
  selectToDevNull,
  writeAssetCsv,
  type ExportFigure,
} from '../lib/bulk.js';
import { summarize } from '../lib/loadSpec.js';
import type { BenchContext, CustomScenario } from '../lib/scenario.js';
import { trackdCli } from '../lib/trackd.js';
import { SIZES } from '../dataset/sizes.js';

const bulkRows = (ctx: BenchContext) => ctx.options.bulkRows ?? SIZES[ctx.options.size].bulkRows;

/** An org an import filled: its id, a key on it, its shard file, the rows the import created. */
interface BulkOrg {
  id: number;
  token: string;
  shardFile: string;
  rows: number;
}

/** The last org the `import` scenario filled in this bench run (the `export` scenario exports it). */
const imported = new WeakMap<BenchContext, BulkOrg>();
/** The CSV of this bench run (written once; every run imports it into an org of its own). */
const csvFiles = new WeakMap<BenchContext, { file: string; bytes: number }>();

function csvOf(ctx: BenchContext): { file: string; bytes: number } {
  let csv = csvFiles.get(ctx);
  if (csv === undefined) {
    const file = path.join(ctx.workDir, 'bulk-assets.csv');
    csv = { file, bytes: writeAssetCsv(file, bulkRows(ctx)) };
    csvFiles.set(ctx, csv);
  }
  return csv;
}

/** A fresh org (so that each run imports into the same state and the seeded org stays as the other scenarios expect) with a key. */
async function freshOrg(ctx: BenchContext): Promise<Omit<BulkOrg, 'rows'>> {
  const dataDir = path.join(ctx.workDir, 'data');
  const org = trackdCli(dataDir, ['orgs', 'create', '--name', `Bulk ${Date.now()}`]) as { id: number };
  const key = trackdCli(dataDir, [
    'keys',
    'create',
    '--org',
    String(org.id),
    '--name',
    'bulk',
    '--scopes',
    'assets:read,assets:write,tracking:read',
    '--env',
    'production',
  ]) as { token: string };
  const control = await ControlPlane.open(dataDir);
  try {
    return { id: org.id, token: key.token, shardFile: shardFile(dataDir, control.getOrg(org.id)!.shard) };
  } finally {
    control.close();
  }
}

const rounded = (x: number) => Math.round(x);
const ratio = (a: number, b: number) => Math.round((a / b) * 100) / 100;

/**
 * `bulkRows` assets with one rfid tag each, CSV through POST /api/v1/assets/bulk (first byte sent
 * to the job's `completed`), into a fresh org, while one client reads that org (a list page, an
 * asset by id) back to back: the rate is the import's rows/s, the latencies are those reads. Then
 * the same reads alone (their ceiling), and the same file again with mode=upsert, which must change
 * nothing (every row `unchanged`, no event: else the run fails). Ceilings of the same run: the same
 * rows inserted straight into a fresh shard file, and the raw read of the file.
 */
export const importScenario: CustomScenario = {
  kind: 'custom',
  name: 'import',
  title: 'POST /api/v1/assets/bulk, CSV of assets with one tag each, first byte to completed (p50/p99: reads of the same org meanwhile)',
  needs: ['POST /api/v1/assets/bulk', 'GET /api/v1/assets/bulk/{job_id}'],
  unit: 'rows/s',
  async run(ctx) {
    const rows = bulkRows(ctx);
    const csv = csvOf(ctx);
    const org = await freshOrg(ctx);
    const base = ctx.trackd.url;
    const target = await jsonRequest(base, org.token, 'POST', '/api/v1/assets', { external_key: 'READ-TARGET', name: 'read target' });
    if (target.status !== 201) throw new Error(`import: the read target answered ${target.status}`);
    const paths = ['/api/v1/assets?limit=20', `/api/v1/assets/${target.json.data.id}`];

    const stopReads = { done: false };
    const reads = readLoop(base, org.token, paths, stopReads);
    // A failed read rejects now, but is awaited only after the import: handled here, thrown there.
    reads.catch(() => undefined);
    let first: Awaited<ReturnType<typeof importFile>>;
    const pid = ctx.trackd.child.pid!;
    const cpuBefore = cpuSeconds(pid);
    let cpu: number;
    try {
      first = await importFile(base, org.token, csv.file, 'create');
    } finally {
      stopReads.done = true;
      cpu = cpuSeconds(pid) - cpuBefore;
    }
    const during = await reads;
    if (first.job.status !== 'completed' || first.job.created !== rows || first.job.failed_rows !== 0)
      throw new Error(`import: the job ended ${JSON.stringify(first.job)}`);
    const idle = await readsFor(base, org.token, paths, 3_000);

    const sequence = eventSequence(org.shardFile, org.id);
    const again = await importFile(base, org.token, csv.file, 'upsert');
    const changes = again.job.created + again.job.updated + again.job.failed_rows;
    if (again.job.status !== 'completed' || again.job.unchanged !== rows || changes !== 0)
      throw new Error(`import: the upsert re-import of the same file changed something: ${JSON.stringify(again.job)}`);
    const events = eventSequence(org.shardFile, org.id) - sequence;
    if (events !== 0) throw new Error(`import: the upsert re-import of the same file recorded ${events} events`);
    imported.set(ctx, { ...org, rows: rows + 1 });

    const ceilingDir = fs.mkdtempSync(path.join(ctx.workDir, 'insert-ceiling-'));
    let insertRate: number;
    try {
      insertRate = await assetInsertCeiling(ceilingDir, rows);
    } finally {
      // The writer's background checkpoints (another thread) let go of its files a moment after it closes.
      fs.rmSync(ceilingDir, { recursive: true, force: true, maxRetries: 20, retryDelay: 100 });
    }
    const rate = rows / first.seconds;
    const upsertRate = rows / again.seconds;
    const latencies = summarize(Float64Array.from(during), during.length);
    return {
      trackd: { rate, p50: latencies.p50, p99: latencies.p99, max: latencies.max, count: during.length },
      ceiling: { name: 'sqlite-insert', rate: insertRate },
      extra: {
        rows,
        csv_bytes: csv.bytes,
        seconds: first.seconds,
        // trackd's CPU (every thread) over the import, the reads beside it included.
        trackd_cpu_seconds: Math.round(cpu * 100) / 100,
        rows_per_trackd_cpu_s: rounded(rows / cpu),
        tags_created: first.job.tags_created,
        upsert_rows_per_s: rounded(upsertRate),
        upsert_seconds: again.seconds,
        upsert_vs_import: ratio(upsertRate, rate),
        upsert_changes: changes,
        upsert_events: events,
        idle_read_p50_ms: summarize(Float64Array.from(idle), idle.length).p50,
        idle_read_p99_ms: summarize(Float64Array.from(idle), idle.length).p99,
        file_read_rows_per_s: rounded(fileReadCeiling(csv.file)),
      },
    };
  },
};

/** Exports `urlPath` again and again until `minSeconds` passed (a small report is over in milliseconds); rows/s over all of them. */
async function exportRepeated(base: string, token: string, urlPath: string, pid: number, minSeconds: number): Promise<ExportFigure> {
  const total: ExportFigure = {
    seconds: 0,
    rows: 0,
    bytes: 0,
    rssBeforeMb: Number.POSITIVE_INFINITY,
    rssMaxMb: 0,
    sequence: undefined,
    trackdCpuSeconds: 0,
  };
  do {
    const one = await exportOnce(base, token, urlPath, pid);
    total.seconds += one.seconds;
    total.rows += one.rows;
    total.trackdCpuSeconds += one.trackdCpuSeconds;
    total.bytes += one.bytes;
    total.rssBeforeMb = Math.min(total.rssBeforeMb, one.rssBeforeMb);
    total.rssMaxMb = Math.max(total.rssMaxMb, one.rssMaxMb);
    total.sequence = one.sequence;
  } while (total.seconds < minSeconds);
  return total;
}

/** The same statement to /dev/null until `minSeconds` passed: rows/s. */
function ceilingRepeated(run: () => { rows: number; seconds: number }, minSeconds: number): number {
  let rows = 0;
  let seconds = 0;
  do {
    const one = run();
    rows += one.rows;
    seconds += one.seconds;
  } while (seconds < minSeconds);
  return rows / seconds;
}

/**
 * GET /api/v1/assets/export (NDJSON) of the org the import filled (imported here, untimed, when
 * `import` did not run), read to its end, and /api/v1/reports/asset-locations/export of the seeded
 * org (every scanned asset), each repeated until 2 s passed: rows/s, and trackd's resident memory
 * before and at most during (sampled every 100 ms). Ceiling: the export's own statement run on the
 * shard file in this process, its lines written to /dev/null.
 */
export const exportScenario: CustomScenario = {
  kind: 'custom',
  name: 'export',
  title: 'GET /api/v1/assets/export and /reports/asset-locations/export (NDJSON), read to the end',
  needs: ['GET /api/v1/assets/export', 'GET /api/v1/reports/asset-locations/export', 'POST /api/v1/assets/bulk'],
  unit: 'rows/s',
  async run(ctx) {
    let org = imported.get(ctx);
    if (org === undefined) {
      const fresh = await freshOrg(ctx);
      const job = (await importFile(ctx.trackd.url, fresh.token, csvOf(ctx).file, 'create')).job;
      org = { ...fresh, rows: job.created };
      imported.set(ctx, org);
    }
    const pid = ctx.trackd.child.pid!;
    const assets = await exportRepeated(ctx.trackd.url, org.token, '/api/v1/assets/export', pid, 2);
    if (assets.rows % org.rows !== 0) throw new Error(`export: ${assets.rows} lines, not a multiple of the org's ${org.rows} assets`);
    const walk = exportWalksTable(org.shardFile, org.id);
    const assetCeiling = ceilingRepeated(
      () => selectToDevNull(org.shardFile, assetExportSql(org.id, {}, 'ndjson', Date.now(), walk), (row: { line: string }) => row.line),
      2,
    );
    if (ctx.dataset.scannedAssets === 0) throw new Error('export: the seeded org has no scanned asset, so no report to export');
    const report = await exportRepeated(ctx.trackd.url, ctx.tokens[0]!, '/api/v1/reports/asset-locations/export', pid, 2);
    if (report.rows % ctx.dataset.scannedAssets !== 0)
      throw new Error(`export: ${report.rows} report lines, not a multiple of the ${ctx.dataset.scannedAssets} scanned assets`);
    const reportCeiling = ceilingRepeated(
      () =>
        selectToDevNull(
          ctx.dataset.shardFile,
          reportExportSql(ctx.dataset.orgId, {}, Date.now(), exportWalksReport(ctx.dataset.shardFile, ctx.dataset.orgId)),
          (row) => JSON.stringify(row),
        ),
      2,
    );
    const rate = assets.rows / assets.seconds;
    const reportRate = report.rows / report.seconds;
    return {
      trackd: { rate, count: assets.rows },
      ceiling: { name: 'select-to-dev-null', rate: assetCeiling },
      extra: {
        asset_rows: org.rows,
        asset_bytes_per_export: rounded(assets.bytes / (assets.rows / org.rows)),
        rss_mb_before: assets.rssBeforeMb,
        rss_mb_max_during: assets.rssMaxMb,
        report_rows_per_s: rounded(reportRate),
        report_rows: ctx.dataset.scannedAssets,
        report_ceiling_rows_per_s: rounded(reportCeiling),
        report_vs_ceiling: ratio(reportRate, reportCeiling),
        report_rss_mb_before: report.rssBeforeMb,
        report_rss_mb_max_during: report.rssMaxMb,
      },
    };
  },
};
