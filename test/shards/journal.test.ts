/**
 * The shard journal (docs/cluster.md) with SHARD_JOURNAL=on: every commit is an entry on
 * TRACKD_JOURNAL `journal.<shard>` first, scan batches as references to their SCANS / READERS
 * messages; a fresh shard file rebuilt from the journal alone (its references read back from the
 * input streams) equals the live shard table by table, and so does one restored from a snapshot
 * taken while trackd ran (the object store) with the journal entries after it replayed on top.
 */
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { rebuildShard } from '../../src/shards/replay.js';
import { takeSnapshot } from '../../src/shards/snapshots.js';
import { journalEntries } from '../helpers/journal.js';
import { natsClient } from '../helpers/scans.js';
import { firstDifference, mixedWorkload, tables } from '../helpers/shardWorkload.js';
import { startTrackd, tempDir } from '../helpers/trackd.js';

const JOURNALED = { SHARD_JOURNAL: 'on', SHARDS: '2', HTTP_THREADS: '2', HISTORY_GAP_SECONDS: '60', EVENT_ID_RETENTION_SECONDS: '2' };

t.test(
  'a journaled shard rebuilt from its journal alone, or from a snapshot and the journal after it, equals the live shard',
  async (t) => {
    const trackd = await startTrackd(t, { env: JOURNALED });
    const nc = await natsClient(t, trackd.natsUrl);
    const settings = { natsUrl: trackd.natsUrl, replicas: 1 };
    const live = (shard: number) => path.join(trackd.dataDir, 'shards', `shard-${shard}.sqlite`);
    const [a, b] = [await trackd.createOrg('Journal A'), await trackd.createOrg('Journal B')];
    const tokenA = (await trackd.createKey(a!.id)).token;
    await mixedWorkload(trackd, nc, a!, tokenA, 'J0');
    // Snapshots of the live files while trackd runs; then more on both shards (the journal tails).
    const snapshots = [await takeSnapshot(live(0), settings, 0), await takeSnapshot(live(1), settings, 1)];
    t.ok(snapshots[0]!.journalPosition > 0, `shard 0's snapshot holds its journal up to ${snapshots[0]!.journalPosition}`);
    await mixedWorkload(trackd, nc, b!, (await trackd.createKey(b!.id)).token, 'J1');
    const more = await trackd.request('POST', '/api/v1/assets', { token: tokenA, body: { name: 'After the snapshot' } });
    t.equal(more.status, 201, 'a write on shard 0 after its snapshot');

    for (const shard of [0, 1]) {
      const entries = await journalEntries(nc, shard);
      const records = entries.flatMap((e) => e.entry.records);
      t.ok(entries.length > 0, `shard ${shard}: ${entries.length} entries, ${records.length} records`);
      t.ok(
        entries.every((e) => e.entry.v === 1 && e.entry.shard === shard),
        'every entry is format 1 and names its shard',
      );
      const batches = records.filter((r) => r.name === 'scans.apply');
      t.ok(batches.length > 0, `shard ${shard}: ${batches.length} scan batches journaled`);
      t.ok(
        batches.every((r) => r.args === undefined && typeof (r.ref as { first?: unknown }).first === 'number'),
        'scan batches are journaled as references to their stream messages, not as scans',
      );
      t.same(
        [...new Set(batches.map((r) => (r.ref as { stream: string }).stream))].sort(),
        ['READERS', 'SCANS'],
        'both input streams are referred to',
      );

      const dir = tempDir('trackd-rebuild-');
      t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
      const alone = await rebuildShard(path.join(dir, `alone-${shard}.sqlite`), settings, shard, { fromSnapshot: false });
      t.equal(alone.replayed, entries.length, `shard ${shard}: from the journal alone, every entry replayed`);
      t.equal(alone.position, entries.at(-1)!.seq, 'up to the last entry');
      t.equal(
        firstDifference(tables(live(shard)), tables(path.join(dir, `alone-${shard}.sqlite`))),
        undefined,
        `shard ${shard}: the rebuild from the journal equals the live shard, table by table`,
      );

      const restored = await rebuildShard(path.join(dir, `restored-${shard}.sqlite`), settings, shard, { fromSnapshot: true });
      const tail = entries.filter((e) => e.seq > snapshots[shard]!.journalPosition).length;
      t.equal(restored.snapshot?.journalPosition, snapshots[shard]!.journalPosition, `shard ${shard}: the latest snapshot restored`);
      t.ok(tail > 0, `shard ${shard}: the journal has ${tail} entries after the snapshot`);
      t.equal(restored.replayed, tail, 'exactly those are replayed on top of it');
      t.equal(restored.position, entries.at(-1)!.seq, 'up to the last entry');
      t.equal(
        firstDifference(tables(live(shard)), tables(path.join(dir, `restored-${shard}.sqlite`))),
        undefined,
        `shard ${shard}: snapshot plus journal tail equals the live shard, table by table`,
      );
    }
  },
);
