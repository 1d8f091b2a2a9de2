/**
 * What a snapshot lets the input purge drop (src/shards/retention.ts): the entry at a snapshot's
 * journal position stays in the journal (the next append names it), but the snapshot holds its
 * effects, so the input messages it refers to are not needed. Counting them kept READERS whole for
 * good when a shard's last entry before it went quiet was a READERS batch (the open defect of
 * journal-snapshots' "READERS purged too"). And a shard file one entry behind such a snapshot, whose
 * next entry's inputs are gone, is set aside for the snapshot instead of failing to start.
 */
import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { AckPolicy } from '@nats-io/jetstream';
import t from 'tap';
import { purgeInputs } from '../../src/shards/retention.js';
import { snapshotAndPurge } from '../../src/shards/snapshots.js';
import { shardFile } from '../../src/shards/writer.js';
import { SCANS_STREAM } from '../../src/scans/streams.js';
import { journalEntries, scansAndJournal } from '../helpers/journal.js';
import { drained, natsClient, publish, scanBody } from '../helpers/scans.js';
import { firstDifference, mixedWorkload, tables } from '../helpers/shardWorkload.js';
import { spawnTrackd, startNats, tempDir } from '../helpers/trackd.js';

t.test('the references of the entry at a snapshot’s position do not hold the inputs back', async (t) => {
  const { jsm, js } = await scansAndJournal(t);
  await jsm.consumers.add(SCANS_STREAM, { durable_name: 'trackd-scans', ack_policy: AckPolicy.Explicit });
  for await (const msg of await (await js.consumers.get(SCANS_STREAM, 'trackd-scans')).fetch({ max_messages: 20, expires: 5000 }))
    await msg.ackAck();
  // Shard 0 applied SCANS 1-10 in one batch, then 11-20; shard 1 applied 5-8 (its orgs' messages).
  const batch = async (shard: number, prev: number, first: number, last: number) =>
    (
      await js.publish(
        `journal.${shard}`,
        JSON.stringify({ v: 1, prev, records: [{ name: 'scans.apply', now: 0, ids: {}, ref: { stream: SCANS_STREAM, first, last } }] }),
      )
    ).seq;
  const zeroFirst = await batch(0, 0, 1, 10);
  const zeroSecond = await batch(0, zeroFirst, 11, 20);
  const one = await batch(1, 0, 5, 8);
  const purgedBelow = async (positions: [number, number][]) =>
    (await purgeInputs(js, jsm, undefined, new Map(positions))).map((p) => [p.stream, p.below]);

  t.same(await purgedBelow([]), [], 'no snapshot: every entry is needed, the oldest refers to 1');
  t.same(
    await purgedBelow([[0, zeroFirst]]),
    [[SCANS_STREAM, 5]],
    "shard 0's snapshot at its first entry: shard 1's 5 is the oldest needed",
  );
  t.same(
    await purgedBelow([
      [0, zeroSecond],
      [1, one],
    ]),
    [[SCANS_STREAM, 21]],
    'each shard’s snapshot at its last entry: nothing is needed, purged to the ack floor',
  );
});

t.test(
  'a shard file one entry behind the latest snapshot, whose next entry’s inputs are gone, is set aside for the snapshot',
  async (t) => {
    const nats = await startNats(t);
    const nc = await natsClient(t, nats.url);
    const env = { SHARD_JOURNAL: 'on', SHARDS: '1', HTTP_THREADS: '1', SNAPSHOT_EVERY_ENTRIES: '100000', SNAPSHOT_EVERY_SECONDS: '3600' };
    const trackd = await spawnTrackd(t, { natsUrl: nats.url, env });
    const org = await trackd.createOrg('Behind');
    const token = (await trackd.createKey(org.id)).token;
    await mixedWorkload(trackd, nc, org, token, 'B0');
    await drained(nc, 'READERS', 'trackd-readers');
    const file = shardFile(trackd.dataDir, 0);
    const copies = tempDir('trackd-behind-');
    t.teardown(() => fs.rmSync(copies, { recursive: true, force: true }));
    const copyOf = (to: string) => {
      const source = new Database(file, { readonly: true });
      source.prepare('VACUUM INTO ?').run(to);
      source.close();
    };
    const behind = path.join(copies, 'behind.sqlite');
    copyOf(behind);
    const position = (await journalEntries(nc, 0)).at(-1)!.seq;

    // One scan batch more: the entry after the copy's position refers to SCANS.
    await publish(nc, `scans.${org.id}.fixed`, scanBody('B0-DOCK', ['rfid:NOT-A-TAG'], new Date(Date.now() - 1000)));
    await drained(nc);
    const entries = await journalEntries(nc, 0);
    const next = entries.at(-1)!;
    t.equal(entries.at(-2)?.seq, position, 'one entry was appended after the copy');
    t.equal((next.entry.records[0]?.ref as { stream?: string } | undefined)?.stream, SCANS_STREAM, 'a scan batch');
    await trackd.stop();

    const { snapshot, inputs } = await snapshotAndPurge(file, { natsUrl: nats.url, replicas: 1 }, 0);
    t.equal(snapshot.journalPosition, next.seq, 'the snapshot is at that entry');
    const scans = inputs.find((p) => p.stream === SCANS_STREAM);
    t.ok(scans !== undefined && scans.below > (next.entry.records[0]!.ref as { last: number }).last, `SCANS purged below ${scans?.below}`);
    const live = path.join(copies, 'live.sqlite');
    copyOf(live);
    for (const suffix of ['', '-wal', '-shm']) fs.rmSync(file + suffix, { force: true });
    fs.copyFileSync(behind, file);

    await trackd.restart();
    const setAside = trackd.logs().find((l) => l.msg === 'shard journal set aside');
    t.match(setAside?.detail, /SCANS message \d+ is gone/, 'the file one entry behind was set aside: its next entry’s inputs are gone');
    t.ok(
      trackd.logs().some((l) => l.msg === 'shard journal restored' && l.shard === 0),
      'and the shard restored from the snapshot',
    );
    const res = await trackd.request('GET', '/api/v1/assets?limit=1', { token });
    t.equal(res.status, 200, 'the shard serves');
    await trackd.stop();
    t.equal(firstDifference(tables(live), tables(file)), undefined, 'its state equals the one the snapshot was taken of, table by table');
  },
);
