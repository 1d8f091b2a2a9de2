/**
 * In-process probe of the scan pipeline below NATS: canonical scans applied to a shard through
 * applyScanBatch (the seam every scan source uses), then the two hot reads called without HTTP.
 *
 *   node dist/bench/probes/scanIngest.js [--assets 100000] [--messages 4000] [--reads 50] [--batch 40]
 *
 * Workloads: field (50 reads/message, 95% re-reads of parked tags at their place, 5% moves, default
 * gap), raw (the same reads with HISTORY_GAP_SECONDS=0: every read a history row) and single
 * (one read per message). Prints one JSON document.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { ControlPlane } from '../../src/control/controlPlane.js';
import { applyScanBatch } from '../../src/scans/apply.js';
import type { SourcedScan } from '../../src/scans/canonical.js';
import { assetHistory } from '../../src/scans/historyQuery.js';
import { assetLocationsReport } from '../../src/scans/reportQuery.js';
import { ShardRegistry } from '../../src/shards/registry.js';
import type { Shard } from '../../src/shards/shard.js';
import { loadMasterData } from '../dataset/masterData.js';
import { rfidValue, SIZES } from '../dataset/sizes.js';

const { values } = parseArgs({
  options: { assets: { type: 'string' }, messages: { type: 'string' }, reads: { type: 'string' }, batch: { type: 'string' } },
});
const ASSETS = Number(values.assets ?? 100_000);
const MESSAGES = Number(values.messages ?? 4000);
const READS = Number(values.reads ?? 50);
const BATCH = Number(values.batch ?? 40);

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0;
}

async function openOrg(label: string) {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), `trackd-probe-${label}-`));
  const control = await ControlPlane.open(dataDir);
  const org = await control.createOrg('probe', 1);
  control.close();
  const info = await loadMasterData(dataDir, org.id, 'small', { ...SIZES.small, assets: ASSETS });
  const control2 = await ControlPlane.open(dataDir);
  const registry = new ShardRegistry(dataDir, control2);
  const shard = await registry.open(0);
  return {
    dataDir,
    org,
    info,
    shard,
    close: async () => {
      await registry.closeAll();
      control2.close();
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/**
 * Messages of `reads` tag reads at one location each: the reads are of assets parked there
 * (re-reads), except that with probability `moveRate` a read is of an asset parked elsewhere,
 * which moves it here.
 */
function workload(
  orgId: number,
  first: number,
  locations: { external_key: string }[],
  messages: number,
  reads: number,
  moveRate: number,
): SourcedScan[] {
  const parkedAt: number[][] = locations.map(() => []);
  for (let a = 0; a < ASSETS; a++) parkedAt[a % locations.length]!.push(first + a);
  const cursors = locations.map(() => 0);
  const out: SourcedScan[] = [];
  const t0 = Date.now() - 86_400_000;
  for (let m = 0; m < messages; m++) {
    const loc = m % locations.length;
    const here = parkedAt[loc]!;
    const tags: { tagType: string; value: string }[] = [];
    for (let r = 0; r < reads; r++) {
      if (Math.random() < moveRate || here.length === 0) {
        const from = parkedAt[(loc + 1 + Math.floor(Math.random() * (locations.length - 1))) % locations.length]!;
        if (from.length > 0) {
          const asset = from.splice(Math.floor(Math.random() * from.length), 1)[0]!;
          here.push(asset);
          tags.push({ tagType: 'rfid', value: rfidValue(asset) });
          continue;
        }
      }
      const asset = here[cursors[loc]!++ % here.length]!;
      tags.push({ tagType: 'rfid', value: rfidValue(asset) });
    }
    out.push({
      scan: { orgId, eventId: `ev-${m}`, observedAt: t0 + m * 50, location: { externalKey: locations[loc]!.external_key }, reads: tags },
      stream: 'PROBE',
      seq: m + 1,
    });
  }
  return out;
}

async function ingest(shard: Shard, items: SourcedScan[], gapMs: number) {
  const started = performance.now();
  const cpu = process.cpuUsage();
  for (let i = 0; i < items.length; i += BATCH) await applyScanBatch(shard, items.slice(i, i + BATCH), { historyGapMs: gapMs });
  const seconds = (performance.now() - started) / 1000;
  const used = process.cpuUsage(cpu);
  const cpuSeconds = (used.user + used.system) / 1e6;
  const reads = items.reduce((n, s) => n + s.scan.reads.length, 0);
  const rows = shard.reader.prepare('SELECT count(*) FROM scan_history').pluck().get() as number;
  return {
    messages: items.length,
    reads,
    seconds: Number(seconds.toFixed(3)),
    reads_per_s: Math.round(reads / seconds),
    messages_per_s: Math.round(items.length / seconds),
    cpu_seconds: Number(cpuSeconds.toFixed(3)),
    reads_per_cpu_s: Math.round(reads / cpuSeconds),
    messages_per_cpu_s: Math.round(items.length / cpuSeconds),
    history_rows: rows,
  };
}

function latency(run: (i: number) => unknown, n = 400) {
  const times: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    run(i);
    times.push(performance.now() - t);
  }
  times.sort((a, b) => a - b);
  return {
    p50_ms: Number(percentile(times, 50).toFixed(3)),
    p99_ms: Number(percentile(times, 99).toFixed(3)),
    max_ms: Number((times[times.length - 1] ?? 0).toFixed(3)),
  };
}

const result: Record<string, unknown> = { assets: ASSETS, messages: MESSAGES, reads_per_message: READS, batch_messages: BATCH };

{
  // Field workload, then a second pass over the same parked tags (the steady state: all re-reads).
  const { org, info, shard, close } = await openOrg('field');
  const items = workload(org.id, info.assets.first, info.scanLocations, MESSAGES, READS, 0.05);
  result.field_first_pass = await ingest(shard, items, 300_000);
  const again = items.map((s, i) => ({
    ...s,
    seq: MESSAGES + i + 1,
    scan: { ...s.scan, eventId: `again-${i}`, observedAt: s.scan.observedAt + MESSAGES * 50 },
  }));
  result.field_second_pass = await ingest(shard, again, 300_000);
  const scanned = shard.reader.prepare('SELECT count(*) FROM scan_positions').pluck().get() as number;
  const now = Date.now();
  const sort = [{ field: 'asset_last_seen', desc: true }];
  result.reads_in_process = {
    scanned_assets: scanned,
    report_offset_0: latency(() => assetLocationsReport(shard, org.id, { sort, limit: 50, offset: 0 }, now)),
    report_offset_0_to_10000: latency((i) =>
      assetLocationsReport(shard, org.id, { sort, limit: 50, offset: (i * 7919) % Math.min(10_000, scanned) }, now),
    ),
    report_by_location: latency((i) =>
      assetLocationsReport(
        shard,
        org.id,
        { sort, limit: 50, offset: 0, location_id: [info.scanLocations[i % info.scanLocations.length]!.id] },
        now,
      ),
    ),
    history_page: latency((i) =>
      assetHistory(
        shard,
        info.assets.first + ((i * 7919) % ASSETS),
        { sort: [{ field: 'event_observed_at', desc: true }], limit: 50, offset: 0 },
        now,
      ),
    ),
  };
  await close();
}
{
  const { org, info, shard, close } = await openOrg('raw');
  result.raw_gap0 = await ingest(shard, workload(org.id, info.assets.first, info.scanLocations, MESSAGES, READS, 0.05), 0);
  await close();
}
{
  const { org, info, shard, close } = await openOrg('single');
  result.single_read_messages = await ingest(
    shard,
    workload(org.id, info.assets.first, info.scanLocations, MESSAGES * 10, 1, 0.05),
    300_000,
  );
  await close();
}
process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
