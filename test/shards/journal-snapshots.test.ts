/**
 * Snapshots on a schedule (SNAPSHOT_EVERY_ENTRIES / SNAPSHOT_EVERY_SECONDS) and the purges they
 * allow (docs/cluster.md, step 4): the journal below each snapshot and the SCANS / READERS messages
 * no kept entry refers to are dropped, and recovery stays exact: a rebuild from the latest
 * snapshot plus the kept journal equals the live shard table by table; a node that starts on an
 * empty DATA_DIR restores each shard to what the lost node held; a kill -9 during a snapshot
 * leaves the previous one in force.
 */
import fs from 'node:fs';
import path from 'node:path';
import { jetstreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import t from 'tap';
import { shardFile } from '../../src/shards/writer.js';
import { journalSubject, JOURNAL_STREAM } from '../../src/shards/journalEntry.js';
import { rebuildShard } from '../../src/shards/replay.js';
import { latestSnapshot } from '../../src/shards/snapshots.js';
import { journalEntries } from '../helpers/journal.js';
import { drained, natsClient, publish, scanBody } from '../helpers/scans.js';
import { firstDifference, mixedWorkload, tables } from '../helpers/shardWorkload.js';
import { eventually, spawnTrackd, startNats, startTrackd, tempDir } from '../helpers/trackd.js';

const EVERY = 6;
const ENV = {
  SHARD_JOURNAL: 'on',
  SHARDS: '2',
  HTTP_THREADS: '1',
  HISTORY_GAP_SECONDS: '60',
  EVENT_ID_RETENTION_SECONDS: '2',
  SNAPSHOT_EVERY_ENTRIES: String(EVERY),
  SNAPSHOT_EVERY_SECONDS: '3600',
};

/**
 * Waits until shard `shard`'s schedule has nothing left to do: its latest snapshot is the first
 * entry the journal keeps (the purge after it ran) and fewer than EVERY entries follow it (or it
 * has no snapshot and fewer than EVERY entries).
 */
async function settled(nc: NatsConnection, natsUrl: string, shard: number) {
  return eventually(
    async () => {
      const snapshot = await latestSnapshot({ natsUrl, replicas: 1 }, shard);
      const entries = await journalEntries(nc, shard);
      // A shard that never appended EVERY entries has no snapshot: its whole journal is its tail.
      if (snapshot === undefined) return entries.length < EVERY ? { snapshot, entries, tail: entries } : undefined;
      if (entries[0]?.seq !== snapshot.journalPosition || entries.length - 1 >= EVERY) return undefined;
      return { snapshot, entries, tail: entries.slice(1) };
    },
    60_000,
    100,
  );
}

async function firstSeq(nc: NatsConnection, stream: string): Promise<number> {
  return (await (await jetstreamManager(nc)).streams.info(stream)).state.first_seq;
}

/** One scan message for the org, applied: one more journal entry, a scan batch referring to SCANS. */
async function oneScan(nc: NatsConnection, orgId: number, location: string) {
  await publish(nc, `scans.${orgId}.fixed`, scanBody(location, ['rfid:NOT-A-TAG'], new Date(Date.now() - 1000)));
  await drained(nc);
}

/** Shard 0 settled with a tail that refers to SCANS (what the input purge must keep), short of the next snapshot. */
async function settledWithScanTail(t: { fail(m: string): void }, nc: NatsConnection, natsUrl: string, orgId: number, location: string) {
  const settledNow = await settled(nc, natsUrl, 0);
  const scanBatch = settledNow.tail.some((e) =>
    e.entry.records.some((r) => (r.ref as { stream?: string } | undefined)?.stream === 'SCANS'),
  );
  if (scanBatch) return settledNow;
  if (settledNow.tail.length + 1 >= EVERY) t.fail(`shard 0 holds ${settledNow.tail.length} entries after its snapshot, none a scan batch`);
  await oneScan(nc, orgId, location);
  return settled(nc, natsUrl, 0);
}

t.test('snapshots on a schedule purge the journal and the inputs below them, and a rebuild from the latest is still exact', async (t) => {
  const nats = await startNats(t);
  const nc = await natsClient(t, nats.url);
  const trackd = await startTrackd(t, { natsUrl: nats.url, env: ENV });
  const settings = { natsUrl: nats.url, replicas: 1 };
  const [a, b] = [await trackd.createOrg('Snap A'), await trackd.createOrg('Snap B')];
  const tokenA = (await trackd.createKey(a!.id)).token;
  await mixedWorkload(trackd, nc, a!, tokenA, 'S0');
  const zero = await settledWithScanTail(t, nc, nats.url, a!.id, 'S0-DOCK');
  // Shard 1's snapshots (and their input purges) come after shard 0's tail was applied and acked:
  // what keeps its messages is that a kept entry refers to them, not the consumer.
  await mixedWorkload(trackd, nc, b!, (await trackd.createKey(b!.id)).token, 'S1');
  await settled(nc, nats.url, 1);
  // The input purge after a snapshot goes no further than the consumers' ack floors of that moment:
  // when shard 1's last snapshot came before its READERS batch was acked, READERS stays whole until
  // the next snapshot. EVERY more scan batches on shard 1 (nothing else in flight) bring one.
  // READERS acked first: oneScan waits for SCANS only, and at load the READERS batch's ack could come
  // after the last of these snapshots (READERS then stayed whole: failed once in the suite at load 5).
  await drained(nc, 'READERS', 'trackd-readers');
  for (let i = 0; i < EVERY; i++) await oneScan(nc, b!.id, 'S1-DOCK');
  await settled(nc, nats.url, 1);
  t.same(
    (await settled(nc, nats.url, 0)).tail.map((e) => e.seq),
    zero.tail.map((e) => e.seq),
    "shard 0's tail is unchanged",
  );
  const snapshotLogs = trackd.logs().filter((l) => l.msg === 'shard journal snapshot');
  t.ok(snapshotLogs.length >= 2, `${snapshotLogs.length} snapshots taken on the schedule (every ${EVERY} entries)`);
  t.ok(
    snapshotLogs.some((l) => l.journalPurged > 0),
    'the journal below a snapshot was purged',
  );
  const scansFirst = await firstSeq(nc, 'SCANS');
  t.ok(scansFirst > 1, `SCANS purged below ${scansFirst}`);
  // READERS is purged below what kept entries refer to: when shard 0's kept tail holds its first
  // READERS batch (how the batches fell decides it), nothing of READERS can go yet.
  const kept = [...zero.tail, ...(await settled(nc, nats.url, 1)).tail];
  const readersRefs = kept.flatMap((e) =>
    e.entry.records.map((r) => r.ref as { stream?: string; first?: number } | undefined).filter((r) => r?.stream === 'READERS'),
  );
  const oldestReaders = Math.min(...readersRefs.map((r) => r!.first!));
  // The snapshot worker purges the input streams one after the other, after the journal: READERS may come a moment later.
  const readersPurged = () =>
    eventually(async () => {
      const first = await firstSeq(nc, 'READERS');
      return first > 1 || oldestReaders === 1 ? first : undefined;
    }, 15_000).catch(() => undefined);
  const readersFirst = (await readersPurged()) ?? (await firstSeq(nc, 'READERS'));
  // Failed in some runs before retention.ts skipped the references of each shard's snapshot entry:
  // shard 0's snapshot fell on its READERS batch, which then held READERS whole for good.
  t.ok(readersFirst > 1 || oldestReaders === 1, `READERS purged too, below ${readersFirst} (oldest kept reference ${oldestReaders})`);
  t.ok(oldestReaders >= readersFirst, 'the oldest READERS message the kept journal refers to is kept');
  const scanRefs = zero.tail.flatMap((e) => e.entry.records.map((r) => r.ref as { stream?: string; first?: number } | undefined));
  const oldest = Math.min(...scanRefs.filter((r) => r?.stream === 'SCANS').map((r) => r!.first!));
  t.ok(oldest >= scansFirst, `the oldest SCANS message the kept journal refers to (${oldest}) is kept`);

  const dir = tempDir('trackd-snap-rebuild-');
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  for (const shard of [0, 1]) {
    const { snapshot, tail } = await settled(nc, nats.url, shard);
    if (snapshot === undefined) throw new Error(`shard ${shard} has no snapshot`);
    const restored = await rebuildShard(path.join(dir, `restored-${shard}.sqlite`), settings, shard, { fromSnapshot: true });
    t.equal(restored.snapshot?.journalPosition, snapshot.journalPosition, `shard ${shard}: the latest snapshot restored`);
    t.equal(restored.replayed, tail.length, `shard ${shard}: the ${tail.length} kept entries after it replayed`);
    t.equal(
      firstDifference(tables(shardFile(trackd.dataDir, shard)), tables(path.join(dir, `restored-${shard}.sqlite`))),
      undefined,
      `shard ${shard}: snapshot plus kept journal equals the live shard, table by table`,
    );
    await t.rejects(
      rebuildShard(path.join(dir, `alone-${shard}.sqlite`), settings, shard, { fromSnapshot: false }),
      /missing entries/,
      `shard ${shard}: the journal alone no longer rebuilds it (its start was purged)`,
    );
  }
  t.ok(zero.tail.length > 0, `shard 0's rebuild replayed a tail (${zero.tail.length} entries)`);
});

t.test('a node started on an empty DATA_DIR restores each shard from its snapshot and journal: it equals the lost node', async (t) => {
  const nats = await startNats(t);
  const nc = await natsClient(t, nats.url);
  const lost = await spawnTrackd(t, { natsUrl: nats.url, env: ENV });
  const org = await lost.createOrg('Cold start');
  const token = (await lost.createKey(org.id)).token;
  await mixedWorkload(lost, nc, org, token, 'C0');
  const { tail } = await settledWithScanTail(t, nc, nats.url, org.id, 'C0-DOCK');
  t.ok(tail.length > 0, `shard 0 holds ${tail.length} entries after its latest snapshot`);
  await settled(nc, nats.url, 1);
  lost.process.kill('SIGKILL');
  await eventually(() => lost.process.signalCode === 'SIGKILL', 30_000);

  const fresh = tempDir('trackd-cold-');
  t.teardown(() => fs.rmSync(fresh, { recursive: true, force: true }));
  const cold = await spawnTrackd(t, { natsUrl: nats.url, dataDir: fresh, env: ENV });
  const restored = cold.logs().find((l) => l.msg === 'shard journal restored' && l.shard === 0);
  t.ok(restored, 'shard 0 was restored from its snapshot');
  t.equal(restored?.replayed, tail.length, `and the ${tail.length} journal entries after it replayed`);
  await cold.stop();
  for (const shard of [0, 1])
    t.equal(
      firstDifference(tables(shardFile(lost.dataDir, shard)), tables(shardFile(fresh, shard))),
      undefined,
      `shard ${shard} on the new node equals the lost node's, table by table`,
    );
});

t.test('kill -9 during a snapshot: the previous snapshot stays in force, nothing is purged past it, the next one is exact', async (t) => {
  const KILL = 'TRACKD_TEST_KILL_DURING_SNAPSHOT';
  const nats = await startNats(t);
  const nc = await natsClient(t, nats.url);
  const armed = path.join(tempDir('trackd-snap-arm-'), 'kill');
  t.teardown(() => fs.rmSync(path.dirname(armed), { recursive: true, force: true }));
  const trackd = await spawnTrackd(t, { natsUrl: nats.url, env: { ...ENV, SHARDS: '1', [KILL]: armed } });
  const org = await trackd.createOrg('Snap kill');
  const token = (await trackd.createKey(org.id)).token;
  await mixedWorkload(trackd, nc, org, token, 'K0');
  // The workload's entries took a first snapshot (however its batches fell); the next one is killed halfway.
  await eventually(() => latestSnapshot({ natsUrl: nats.url, replicas: 1 }, 0), 60_000);
  fs.writeFileSync(armed, '');
  // One entry per create, until the next snapshot kills the process halfway through its upload.
  for (let i = 0; trackd.process.signalCode === null && i < 10 * EVERY; i++)
    await trackd.request('POST', '/api/v1/assets', { token, body: { name: `Until killed ${i}` } }).catch(() => undefined);
  await eventually(() => trackd.process.signalCode === 'SIGKILL', 60_000);
  const first = await latestSnapshot({ natsUrl: nats.url, replicas: 1 }, 0);
  t.ok(first !== undefined, `the first snapshot (journal position ${first?.journalPosition}) was stored`);
  const kept = await journalEntries(nc, 0);
  t.equal(kept[0]?.seq, first?.journalPosition, 'the journal is purged only below the stored snapshot');
  const shards = path.join(trackd.dataDir, 'shards');
  const leftovers = fs.readdirSync(shards).filter((f) => f.includes('.snapshot-'));
  t.ok(leftovers.length > 0, 'the process died with its snapshot copy half uploaded');

  delete trackd.env[KILL];
  await trackd.restart();
  // Only the dead process's copies: the restarted shard may already be taking a snapshot of its own.
  t.same(
    fs.readdirSync(shards).filter((f) => leftovers.includes(f)),
    [],
    'the restart removed the copy',
  );
  await mixedWorkload(trackd, nc, org, token, 'K1');
  const { snapshot, tail } = await settled(nc, nats.url, 0);
  if (snapshot === undefined) throw new Error('shard 0 has no snapshot');
  t.ok(snapshot.journalPosition > first!.journalPosition, 'later snapshots are stored');
  const dir = tempDir('trackd-snap-kill-');
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const restored = await rebuildShard(path.join(dir, 'restored.sqlite'), { natsUrl: nats.url, replicas: 1 }, 0, { fromSnapshot: true });
  t.equal(restored.replayed, tail.length, 'the kept entries after the latest snapshot replayed');
  t.equal(
    firstDifference(tables(shardFile(trackd.dataDir, 0)), tables(path.join(dir, 'restored.sqlite'))),
    undefined,
    'snapshot plus journal equals the live shard, table by table',
  );
  t.equal(
    (await (await jetstreamManager(nc)).streams.getMessage(JOURNAL_STREAM, { last_by_subj: journalSubject(0) }))?.seq,
    tail.at(-1)?.seq ?? snapshot.journalPosition,
    "the live shard's journal ends where the rebuild did",
  );
});
