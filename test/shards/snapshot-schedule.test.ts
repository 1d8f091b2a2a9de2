/**
 * The snapshot schedule (src/shards/snapshotSchedule.ts): entries appended while a snapshot is
 * being taken count for the next, and that next one starts as soon as the first is stored when they
 * already call for it, not at the schedule's timer (once a minute) nor at another append (none, on
 * a shard gone quiet): the journal and the inputs below it would stay until then.
 */
import { jetstreamManager } from '@nats-io/jetstream';
import t from 'tap';
import { journalSubject, JOURNAL_STREAM } from '../../src/shards/journalEntry.js';
import { natsClient } from '../helpers/scans.js';
import { eventually, spawnTrackd, startNats } from '../helpers/trackd.js';

const HOLD_MS = 1500;

t.test('an entry appended after a snapshot’s copy is in the next snapshot, taken when the first is stored', async (t) => {
  const nats = await startNats(t);
  const trackd = await spawnTrackd(t, {
    natsUrl: nats.url,
    env: {
      SHARD_JOURNAL: 'on',
      SHARDS: '1',
      HTTP_THREADS: '1',
      SNAPSHOT_EVERY_ENTRIES: '1',
      SNAPSHOT_EVERY_SECONDS: '3600',
      // Each snapshot reports HOLD_MS after it is stored: a slow upload, during which the next entry lands.
      TRACKD_TEST_SNAPSHOT_HOLD_MS: String(HOLD_MS),
    },
  });
  const org = await trackd.createOrg('Snapshots');
  const token = (await trackd.createKey(org.id)).token;
  const nc = await natsClient(t, nats.url);
  const jsm = await jetstreamManager(nc);
  const lastEntry = async () =>
    (await jsm.streams.getMessage(JOURNAL_STREAM, { last_by_subj: journalSubject(0) }).catch(() => null))?.seq ?? 0;
  const snapshots = () => trackd.logs().filter((l) => l.msg === 'shard journal snapshot' && l.shard === 0);
  const write = async (key: string) => {
    const res = await trackd.request('POST', '/api/v1/locations', { token, body: { external_key: key, name: key } });
    t.equal(res.status, 201, `write ${key} answered`);
  };
  // Whatever the start appended is snapshotted first.
  await eventually(async () => {
    const last = await lastEntry();
    return last === 0 || snapshots().some((l) => (l.position as number) >= last);
  }, 30_000);

  await write('A');
  const a = await lastEntry();
  // B after A's snapshot copied the file (its thread started and copied within this wait) and before it reports.
  await new Promise((r) => setTimeout(r, HOLD_MS / 2));
  await write('B');
  const b = await lastEntry();
  t.ok(b > a, `B is a journal entry of its own (${a}, ${b})`);
  const covering = await eventually(() => snapshots().find((l) => (l.position as number) >= b), 15_000).catch(() => undefined);
  t.ok(covering, `a snapshot at B's entry within 15 s, though the schedule's timer runs once a minute and nothing else is appended`);
  t.ok(
    snapshots().some((l) => (l.position as number) >= a && (l.position as number) < b),
    "A's snapshot did not hold B: B came in during it",
  );
});
