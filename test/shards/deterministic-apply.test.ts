/**
 * A shard's state is a pure function of its records (shards/records.ts): a real trackd records every
 * committed state change of its shards while a mixed workload runs over HTTP (two HTTP threads, so
 * commands of both interleave at the actor) and over NATS (SCANS and READERS, so their batches
 * interleave too); the records are then replayed into two fresh shard files, and every table of the
 * shard schema must equal the original's row by row.
 */
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { readRecords, recordFile, type ShardRecord } from '../../src/shards/records.js';
import { replayInto } from '../../src/shards/replay.js';
import { deadLetters, natsClient } from '../helpers/scans.js';
import { firstDifference, mixedWorkload, tables } from '../helpers/shardWorkload.js';
import { startTrackd, tempDir } from '../helpers/trackd.js';

// A fold slice of 3 positions (read by the scan consumer when it starts): the re-reads go to the log
// as on a large shard (with the default slice, a table of a few positions writes them to
// scan_positions itself and logs nothing: RereadLog.logsRereads).
process.env.TRACKD_TEST_FOLD_SLICE = '3';

t.test('records of a mixed workload replay into two fresh shards whose every table equals the original', async (t) => {
  const recordDir = tempDir('trackd-records-');
  t.teardown(() => fs.rmSync(recordDir, { recursive: true, force: true }));
  const trackd = await startTrackd(t, {
    recordDir,
    // The record files, not the journal (journal.test): a journaled shard also holds its journal position.
    env: { SHARD_JOURNAL: 'off', SHARDS: '2', HTTP_THREADS: '2', HISTORY_GAP_SECONDS: '60', EVENT_ID_RETENTION_SECONDS: '2' },
  });
  const nc = await natsClient(t, trackd.natsUrl);
  const orgs = [await trackd.createOrg('Replay A'), await trackd.createOrg('Replay B')];

  for (const [n, org] of orgs.entries()) {
    const { token } = await trackd.createKey(org.id);
    await mixedWorkload(trackd, nc, org, token, `R${n}`);
  }
  const dead = await deadLetters(nc);
  t.same(
    dead.map((d) => d.reason).sort(),
    ['future_observed_at', 'future_observed_at', 'unknown_location', 'unknown_location'],
    'two dead letters per org: one refused by the consumer, one by the shard',
  );

  const shardFiles = fs.readdirSync(path.join(trackd.dataDir, 'shards')).filter((f) => /^shard-\d+\.sqlite$/.test(f));
  let replayed = 0;
  const names = new Set<string>();
  for (const file of shardFiles) {
    const index = Number(/\d+/.exec(file)![0]);
    const records: ShardRecord[] = readRecords(recordFile(recordDir, index));
    for (const r of records) names.add(r.name);
    const original = tables(path.join(trackd.dataDir, 'shards', file));
    const copies = [tempDir('trackd-replay-'), tempDir('trackd-replay-')];
    t.teardown(() => {
      for (const dir of copies) fs.rmSync(dir, { recursive: true, force: true });
    });
    const replays = [];
    for (const dir of copies) {
      const copy = path.join(dir, file);
      t.equal(await replayInto(copy, records, index), records.length, `shard ${index}: every record replays`);
      replays.push(tables(copy));
    }
    t.equal(firstDifference(replays[0]!, replays[1]!), undefined, `shard ${index}: the two replays are equal, table by table`);
    t.equal(firstDifference(original, replays[0]!), undefined, `shard ${index}: the replay equals the original, table by table`);
    const counts = Object.fromEntries([...original.rows].map(([name, rows]) => [name, rows.length]));
    if (records.length > 0) {
      replayed++;
      t.ok(
        counts.scan_history! > 0 && counts.scan_events! > 0 && counts.tags! > 0 && counts.events! > 0 && counts.event_heads! > 0,
        `shard ${index} has state to compare (events among it)`,
        { counts },
      );
      // The workload's re-reads within the gap went to the re-read log (migrations 017, 019): its seqs were drawn.
      const fold = original.rows.get('scan_reread_fold')![0] as { cycle_seq: number; folded_through: number };
      t.ok(counts.scan_reread_blocks! > 0 || fold.cycle_seq > 0, `shard ${index} logged re-reads`, { counts, fold });
    }
  }
  t.equal(replayed, orgs.length, 'each org lives on its own shard (orgs go round the shards), each shard replayed');
  t.same(
    [...names].sort(),
    [
      'assets.create',
      'assets.delete',
      'assets.patch',
      'assets.rename',
      'bulk.assets.apply',
      'bulk.begin',
      'bulk.finish',
      'bulk.locations.apply',
      'locations.create',
      'locations.delete',
      'locations.patch',
      'locations.rename',
      'scans.apply',
      'scans.bindStream',
      'tags.attach',
      'tags.detach',
    ],
    'every kind of state change was recorded, and nothing that only reads',
  );
});
