/**
 * Cold recovery of a shard of the small bench dataset (docs/cluster.md, step 4): what a node with
 * no shard file pays to serve it, restored from the latest snapshot in the object store plus the
 * journal entries after it, against ceilings measured in the same run on the same disk:
 *
 *   node dist/bench/probes/coldRecovery.js [--tail-rounds 1]
 *
 * 1. The small dataset (10,000 assets, 1,000 locations) loaded, its 100,000 history rows seeded
 *    through a journaled trackd (SHARD_JOURNAL=on, one shard); a snapshot taken (takeSnapshot).
 * 2. A tail: `tail-rounds` more reads per asset (moves, 50 reads a message) through the same
 *    trackd, timed from the first publish until the last read is visible (the live apply rate).
 * 3. trackd stopped; the shard rebuilt into a fresh file from the snapshot and the tail
 *    (rebuildShard, what a starting node runs), timed, split into the restore and the replay.
 * Ceilings: a plain copy of the live shard file (fs.copyFileSync) for the restore, the live apply of
 * the same tail for the replay. Prints one JSON document.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { restoreSnapshot, takeSnapshot } from '../../src/shards/snapshots.js';
import { rebuildShard } from '../../src/shards/replay.js';
import { loadMasterData } from '../dataset/masterData.js';
import { seedHistory } from '../dataset/history.js';
import { SIZES } from '../dataset/sizes.js';
import { publish, waitVisible } from '../lib/ingest.js';
import { movesMessages, type ScanPlan } from '../lib/scanPlan.js';
import type { BenchContext } from '../lib/scenario.js';
import { mintKeys, startBenchNats, TrackdProcess, trackdCli } from '../lib/trackd.js';

const { values } = parseArgs({ options: { 'tail-rounds': { type: 'string' } } });
const TAIL_ROUNDS = Number(values['tail-rounds'] ?? 1);
const READS_PER_MESSAGE = 50;
const ENV = { SHARD_JOURNAL: 'on', SHARDS: '1', SNAPSHOT_EVERY_ENTRIES: '100000000', SNAPSHOT_EVERY_SECONDS: '31536000' };
const log = (text: string) => process.stderr.write(`[cold-recovery] ${text}\n`);
const seconds = (ms: number) => Math.round(ms) / 1000;

const workDir = fs.mkdtempSync(path.join(os.tmpdir(), 'trackd-cold-recovery-'));
const nats = await startBenchNats(path.join(workDir, 'nats'));
let trackd: TrackdProcess | undefined;
try {
  const dataDir = path.join(workDir, 'data');
  const size = SIZES.small;
  const org = trackdCli(dataDir, ['orgs', 'create', '--name', 'Cold recovery']) as { id: number };
  const dataset = await loadMasterData(dataDir, org.id, 'small', size);
  trackd = await TrackdProcess.start({ dataDir, natsUrl: nats.url, env: ENV });
  const tokens = mintKeys(dataDir, org.id, 1);
  const ctx = {
    dataset,
    trackd,
    natsUrl: nats.url,
    tokens,
    workDir,
    async request(method: string, urlPath: string) {
      const res = await fetch(`${trackd!.url}${urlPath}`, { method, headers: { authorization: `Bearer ${tokens[0]}` } });
      return { status: res.status, json: await res.json().catch(() => undefined) };
    },
  } as unknown as BenchContext;
  log(`seeding ${size.historyRows} history rows through a journaled trackd`);
  await seedHistory(ctx, size, 200);
  const settings = { natsUrl: nats.url, replicas: 1 };
  const shardFile = dataset.shardFile;
  const snapping = performance.now();
  const snapshot = await takeSnapshot(shardFile, settings, 0);
  const snapshotMs = performance.now() - snapping;
  log(`snapshot: ${snapshot.bytes} bytes at journal position ${snapshot.journalPosition} in ${seconds(snapshotMs)} s`);

  const locations = dataset.scanLocations.map((l) => l.external_key);
  const messages = movesMessages(size.assets, locations.length, READS_PER_MESSAGE, TAIL_ROUNDS);
  const plan: ScanPlan = {
    mode: 'moves',
    orgId: dataset.orgId,
    assets: dataset.assets,
    locations,
    readsPerMessage: READS_PER_MESSAGE,
    messages,
    parkedRound: dataset.parkedRound,
    observedBase: Date.now() - 24 * 3_600_000,
    observedStepMs: 1000,
    eventPrefix: 'tail',
  };
  const applying = performance.now();
  const result = await publish(ctx, plan, { window: 200 });
  await waitVisible(ctx, result.last.asset, result.last.observedAt, 10 * 60_000);
  const liveMs = performance.now() - applying;
  const reads = size.assets * TAIL_ROUNDS;
  log(`tail: ${messages} messages, ${reads} reads applied live in ${seconds(liveMs)} s`);
  await trackd.stop();
  trackd = undefined;

  const copying = performance.now();
  fs.copyFileSync(shardFile, path.join(workDir, 'copy.sqlite'));
  const copyMs = performance.now() - copying;
  const restoring = performance.now();
  await restoreSnapshot(settings, 0, path.join(workDir, 'restore-only.sqlite'));
  const restoreMs = performance.now() - restoring;
  const rebuilding = performance.now();
  const rebuilt = await rebuildShard(path.join(workDir, 'cold.sqlite'), settings, 0, { fromSnapshot: true });
  const coldMs = performance.now() - rebuilding;
  const replayMs = coldMs - restoreMs;
  const report = {
    probe: 'cold recovery of one shard of the small dataset: latest snapshot plus journal tail',
    machine: { cpus: os.availableParallelism(), node: process.version },
    shard: { bytes: fs.statSync(shardFile).size, assets: size.assets, locations: size.locations, history_rows: size.historyRows },
    snapshot: { bytes: snapshot.bytes, journal_position: snapshot.journalPosition, seconds_to_take: seconds(snapshotMs) },
    tail: { entries: rebuilt.replayed, messages, reads, seconds_live: seconds(liveMs) },
    cold_recovery: {
      seconds: seconds(coldMs),
      restore_seconds: seconds(restoreMs),
      replay_seconds_estimate: seconds(replayMs),
      position: rebuilt.position,
    },
    ceilings: {
      file_copy_seconds: seconds(copyMs),
      restore_vs_file_copy: Math.round((restoreMs / copyMs) * 10) / 10,
      replay_vs_live_apply: Math.round((replayMs / liveMs) * 100) / 100,
    },
  };
  process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
} finally {
  await trackd?.stop();
  await nats.stop();
  fs.rmSync(workDir, { recursive: true, force: true });
}
