/**
 * The field workload's cost on the shard actor at the size of a real data dir (the large bench
 * dataset: 1,000,000 positions): scan batches of re-reads of parked tags (and a share of moves)
 * applied through applyScanBatch on a copy of the data dir, in-process, without NATS. Per batch:
 * wall time, thread CPU, the WAL frames its commit wrote (the WAL is checkpointed and truncated
 * from a connection of the probe after each batch, so each count is one commit's) and the
 * checkpoint's time. Prints one JSON document.
 *
 *   node dist/bench/probes/fieldRereads.js --data DIR [--batch 20000] [--batches 5] [--moves 0.05] [--gap-s 300] [--warm] [--profile FILE] [--shard N] [--wal-pages] [--drop-index NAME]
 *   node dist/bench/probes/fieldRereads.js --data DIR --prepare
 *
 * DIR is a stopped trackd's DATA_DIR (bench --keep: <workdir>/data); it is copied first, except
 * with --prepare. The bench seeds its history two days back: with the default gap the first read of
 * each asset then opens a new visit (a history row); a gap of days (--gap-s 400000) makes every
 * re-read extend its open visit, as in the field, where a parked tag is read every few seconds. Or
 * --prepare, which reads every position once (in place) so that the visits are open "now":
 * afterwards every re-read within the gap extends its visit, as in the field, where a parked tag is
 * read every few seconds. The bench seeds its history two days back, so on an unprepared copy the
 * first read of each asset opens a new visit (a history row) instead. --warm reads every position
 * once where it is before the measured batches (not measured), as the bench's ingest-field does, so
 * that they meet tags and positions already in the writer's memory, as a running trackd's would.
 * --wal-pages adds the measured batches' WAL frames by the table or index their page belongs to
 * (`wal_frames_by_name`, from dbstat after the last batch, which reads the whole file once).
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { Session } from 'node:inspector/promises';
import { parseArgs } from 'node:util';
import { ControlPlane } from '../../src/control/controlPlane.js';
import { applyScanBatch } from '../../src/scans/apply.js';
import type { SourcedScan } from '../../src/scans/canonical.js';
import { ShardRegistry } from '../../src/shards/registry.js';
import { openDatabase } from '../../src/storage/sqlite.js';
import { rfidValue } from '../dataset/sizes.js';
import { largestShardFile } from '../lib/shardFile.js';

const { values } = parseArgs({
  options: {
    data: { type: 'string' },
    batch: { type: 'string' },
    batches: { type: 'string' },
    moves: { type: 'string' },
    'gap-s': { type: 'string' },
    prepare: { type: 'boolean' },
    warm: { type: 'boolean' },
    profile: { type: 'string' },
    shard: { type: 'string' },
    'wal-pages': { type: 'boolean' },
    'drop-index': { type: 'string' },
  },
});
if (values.data === undefined) throw new Error('--data DIR is required');
const BATCH_READS = Number(values.batch ?? 20_000);
const BATCHES = Number(values.batches ?? 5);
const MOVES = Number(values.moves ?? 0.05);
const GAP_MS = Number(values['gap-s'] ?? 300) * 1000;
const READS = 50;

function copyDataDir(from: string): string {
  const to = fs.mkdtempSync(path.join(path.dirname(path.resolve(from)), 'probe-copy-'));
  execFileSync('cp', ['-r', `${from}/.`, to]);
  return to;
}

const dataDir = values.prepare ? values.data : copyDataDir(values.data);
const control = await ControlPlane.open(dataDir);
// --shard N: the shard the dataset's positions are in when it is not the largest file (the small dataset's bulk org fills another).
const shardFile = values.shard === undefined ? largestShardFile(dataDir) : path.join(dataDir, 'shards', `shard-${values.shard}.sqlite`);
const shardIndex = Number(/shard-(\d+)\.sqlite$/.exec(shardFile)![1]);
const side = openDatabase(shardFile);
// --drop-index NAME: what one index costs the batches (the copy loses it; the probe's writes never name it).
if (values['drop-index'] !== undefined && values.prepare) throw new Error('--drop-index works on a copy: not with --prepare');
if (values['drop-index'] !== undefined) side.exec(`DROP INDEX ${values['drop-index']}`);
const { orgId, maxSeen } = side
  .prepare('SELECT org_id AS orgId, max(last_seen_at) AS maxSeen FROM scan_positions GROUP BY org_id ORDER BY count(*) DESC LIMIT 1')
  .get() as {
  orgId: number;
  maxSeen: number;
};
const parked = new Map<number, number[]>();
for (const [assetId, locationId] of side
  .prepare('SELECT asset_id, location_id FROM scan_positions WHERE org_id = ?')
  .raw()
  .iterate(orgId) as IterableIterator<[number, number]>) {
  let list = parked.get(locationId);
  if (list === undefined) parked.set(locationId, (list = []));
  list.push(assetId);
}
const locations = [...parked.keys()];
const positions = [...parked.values()].reduce((n, l) => n + l.length, 0);

const openedAt = performance.now();
const registry = new ShardRegistry(dataDir, control);
const shard = await registry.open(shardIndex);
const openSeconds = (performance.now() - openedAt) / 1000;

let seq = 1_000_000_000;
function scan(locationId: number, assetIds: number[], observedAt: number, tag: string): SourcedScan {
  return {
    scan: {
      orgId,
      eventId: `${tag}-${seq}`,
      observedAt,
      location: { id: locationId },
      reads: assetIds.map((a) => ({ tagType: 'rfid', value: rfidValue(a) })),
    },
    stream: 'PROBE',
    seq: seq++,
  };
}

const walFile = `${shardFile}-wal`;
const pageSize = side.pragma('page_size', { simple: true }) as number;
/** --wal-pages: how often each page number appeared in the measured batches' WAL frames. */
const walPages = new Map<number, number>();
/** Adds the page numbers of the WAL's frames (header of 32 bytes, then frames of a 24-byte header and one page). */
function tallyWalPages(): void {
  if (!fs.existsSync(walFile)) return;
  const wal = fs.readFileSync(walFile);
  for (let at = 32; at + 24 + pageSize <= wal.length; at += 24 + pageSize) {
    const page = wal.readUInt32BE(at);
    walPages.set(page, (walPages.get(page) ?? 0) + 1);
  }
}
/** The WAL's frames since the last call (the WAL is truncated each time), and what the checkpoint took. */
const checkpoint = () => {
  const frames = Math.round((fs.existsSync(walFile) ? fs.statSync(walFile).size - 32 : 0) / (pageSize + 24));
  const started = performance.now();
  side.pragma('wal_checkpoint(TRUNCATE)');
  return { frames: Math.max(0, frames), ms: performance.now() - started };
};

if (values.prepare) {
  // Every position read once at its own location, all at one time past every last_seen_at: each
  // opens a visit (the gap has passed), after which re-reads within the gap extend it.
  const at = maxSeen + GAP_MS + 60_000;
  const started = performance.now();
  let batch: SourcedScan[] = [];
  let reads = 0;
  for (const [locationId, assets] of parked) {
    for (let i = 0; i < assets.length; i += READS) {
      batch.push(scan(locationId, assets.slice(i, i + READS), at, 'prepare'));
      reads += Math.min(READS, assets.length - i);
      if (batch.length * READS >= 100_000) {
        await applyScanBatch(shard, batch, { historyGapMs: GAP_MS, now: at });
        checkpoint();
        batch = [];
      }
    }
  }
  if (batch.length > 0) await applyScanBatch(shard, batch, { historyGapMs: GAP_MS, now: at });
  checkpoint();
  process.stdout.write(`${JSON.stringify({ prepared: reads, at, seconds: (performance.now() - started) / 1000 })}\n`);
} else {
  // Messages of 50 reads at a random location: re-reads of what is parked there, else (MOVES) an
  // asset from another location, which moves here.
  const base = maxSeen + 1_000;
  let message = 0;
  const nextMessage = (): SourcedScan => {
    const where = locations[Math.floor(Math.random() * locations.length)]!;
    const here = parked.get(where)!;
    const reads: number[] = [];
    for (let k = 0; k < READS; k++) {
      if (Math.random() >= MOVES && here.length > 0) {
        reads.push(here[Math.floor(Math.random() * here.length)]!);
        continue;
      }
      const from = parked.get(locations[Math.floor(Math.random() * locations.length)]!)!;
      if (from === here || from.length === 0) continue;
      const pick = Math.floor(Math.random() * from.length);
      const asset = from[pick]!;
      from[pick] = from[from.length - 1]!;
      from.pop();
      here.push(asset);
      reads.push(asset);
    }
    return scan(where, reads, base + message++, 'field');
  };
  let warmSeconds: number | undefined;
  if (values.warm) {
    const started = performance.now();
    let batch: SourcedScan[] = [];
    let reads = 0;
    for (const [locationId, assets] of parked) {
      for (let i = 0; i < assets.length; i += READS) {
        batch.push(scan(locationId, assets.slice(i, i + READS), base, 'warm'));
        reads += Math.min(READS, assets.length - i);
        if (reads >= BATCH_READS) {
          await applyScanBatch(shard, batch, { historyGapMs: GAP_MS, now: base });
          checkpoint();
          batch = [];
          reads = 0;
        }
      }
    }
    if (batch.length > 0) await applyScanBatch(shard, batch, { historyGapMs: GAP_MS, now: base });
    warmSeconds = (performance.now() - started) / 1000;
  }
  message = 1;
  checkpoint();
  // --profile FILE: a CPU profile of the measured batches only (the warm pass left out).
  const profiler = values.profile === undefined ? undefined : new Session();
  if (profiler !== undefined) {
    profiler.connect();
    await profiler.post('Profiler.enable');
    await profiler.post('Profiler.setSamplingInterval', { interval: 200 });
    await profiler.post('Profiler.start');
  }
  const batches: Record<string, number>[] = [];
  for (let b = 0; b < BATCHES; b++) {
    const items: SourcedScan[] = [];
    let reads = 0;
    while (reads < BATCH_READS) {
      const item = nextMessage();
      items.push(item);
      reads += item.scan.reads.length;
    }
    const cpu = process.cpuUsage();
    const started = performance.now();
    const outcomes = await applyScanBatch(shard, items, { historyGapMs: GAP_MS, now: base + message });
    const ms = performance.now() - started;
    const used = process.cpuUsage(cpu);
    const applied = outcomes.reduce((n, o) => n + (o.kind === 'applied' ? o.readsApplied : 0), 0);
    if (values['wal-pages']) tallyWalPages();
    const wal = checkpoint();
    batches.push({
      reads,
      applied,
      ms: Math.round(ms),
      cpu_ms: Math.round((used.user + used.system) / 1000),
      reads_per_s: Math.round(reads / (ms / 1000)),
      wal_frames: wal.frames,
      wal_frames_per_1000_reads: Math.round((wal.frames * 1000) / reads),
      checkpoint_ms: Math.round(wal.ms),
    });
  }
  if (profiler !== undefined) {
    const { profile } = await profiler.post('Profiler.stop');
    fs.writeFileSync(values.profile!, JSON.stringify(profile));
    profiler.disconnect();
  }
  // Which table or index each written page belongs to now (dbstat walks every b-tree of the file once).
  const framesByName: Record<string, number> = {};
  if (walPages.size > 0) {
    for (const { name, pageno } of side.prepare('SELECT name, pageno FROM dbstat').iterate() as IterableIterator<{
      name: string;
      pageno: number;
    }>) {
      const frames = walPages.get(pageno);
      if (frames !== undefined) framesByName[name] = (framesByName[name] ?? 0) + frames;
    }
  }
  const history = side.prepare('SELECT count(*) FROM scan_history').pluck().get();
  const median = (key: string) => [...batches.map((b) => b[key]!)].sort((a, b) => a - b)[Math.floor(batches.length / 2)];
  process.stdout.write(
    `${JSON.stringify(
      {
        positions,
        locations: locations.length,
        batch_reads: BATCH_READS,
        moves: MOVES,
        open_seconds: Number(openSeconds.toFixed(1)),
        warm_seconds: warmSeconds === undefined ? undefined : Number(warmSeconds.toFixed(1)),
        history_rows_after: history,
        median: {
          reads_per_s: median('reads_per_s'),
          ms: median('ms'),
          wal_frames: median('wal_frames'),
          checkpoint_ms: median('checkpoint_ms'),
        },
        batches,
        wal_frames_by_name: walPages.size > 0 ? framesByName : undefined,
      },
      null,
      2,
    )}\n`,
  );
}
side.close();
await registry.closeAll();
control.close();
if (!values.prepare) fs.rmSync(dataDir, { recursive: true, force: true });
