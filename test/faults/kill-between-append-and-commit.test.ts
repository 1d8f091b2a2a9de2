/**
 * A journaled shard killed -9 after its journal entry is stored and before SQLite commits
 * (TRACKD_TEST_KILL_AFTER_JOURNALING=<command> makes the process kill itself exactly there): the
 * restart reconciles SQLite's journal position with the journal's tail, so the write is neither
 * lost nor applied twice.
 */
import path from 'node:path';
import Database from 'better-sqlite3';
import { jetstreamManager } from '@nats-io/jetstream';
import t from 'tap';
import { JOURNAL_STREAM } from '../../src/shards/journalEntry.js';
import { drained, natsClient, publish, scanBody } from '../helpers/scans.js';
import { eventually, spawnTrackd, startNats, type Trackd } from '../helpers/trackd.js';

const KILL = 'TRACKD_TEST_KILL_AFTER_JOURNALING';
const ENV = { SHARD_JOURNAL: 'on', SHARDS: '1', HTTP_THREADS: '1', HISTORY_GAP_SECONDS: '0' };

const ok = (res: { status: number; text: string; json: any }, status: number, what: string) => {
  if (res.status !== status) throw new Error(`${what}: ${res.status} ${res.text}`);
  return res.json?.data;
};

/** What the shard file holds now, read beside the (dead) process: the journal position and a count. */
function shardFile(trackd: Trackd, sql: string): { position: number; count: number } {
  const db = new Database(path.join(trackd.dataDir, 'shards', 'shard-0.sqlite'), { readonly: true });
  try {
    const position = (db.prepare("SELECT applied_seq FROM scan_ingest_state WHERE stream = 'TRACKD_JOURNAL'").pluck().get() ?? 0) as number;
    return { position, count: db.prepare(sql).pluck().get() as number };
  } finally {
    db.close();
  }
}

async function killedRestart(t: Pick<typeof import('tap').default, 'ok'>, trackd: Trackd): Promise<void> {
  await eventually(() => trackd.process.signalCode === 'SIGKILL', 10_000);
  delete trackd.env[KILL];
  await trackd.restart();
  t.ok(
    trackd.logs().some((l) => l.msg === 'shard journal reconciled' && l.replayed === 1),
    'the restart applied the one entry the journal held beyond the shard',
  );
}

t.test('an asset create killed between its journal append and its commit is there once after the restart', async (t) => {
  const nats = await startNats(t);
  const nc = await natsClient(t, nats.url);
  const jsm = await jetstreamManager(nc);
  const trackd = await spawnTrackd(t, { natsUrl: nats.url, env: { ...ENV, [KILL]: 'assets.create' } });
  const org = await trackd.createOrg('Crash');
  const { token } = await trackd.createKey(org.id);
  const answer = await trackd
    .request('POST', '/api/v1/assets', { token, body: { name: 'Crashed', external_key: 'CRASH-1' } })
    .then((res) => `${res.status}`)
    .catch((err: Error) => err.message);
  t.notOk(/^2/.test(answer), `the create was not answered (${answer})`);
  await eventually(() => trackd.process.signalCode === 'SIGKILL', 10_000);
  const last = (await jsm.streams.getMessage(JOURNAL_STREAM, { last_by_subj: 'journal.0' }))!;
  t.equal(last.json<{ records: { name: string }[] }>().records[0]?.name, 'assets.create', 'the journal holds the create');
  const before = shardFile(trackd, 'SELECT count(*) FROM assets');
  t.same(before, { position: 0, count: 0 }, 'SQLite does not: the process died between the append and the commit');

  await killedRestart(t, trackd);
  const after = shardFile(trackd, 'SELECT count(*) FROM assets');
  t.equal(after.position, last.seq, "the shard's journal position is the journal's last entry");
  const list = ok(await trackd.request('GET', '/api/v1/assets?external_key=CRASH-1', { token }), 200, 'list');
  t.equal(list.length, 1, 'the asset is there, once');
  const next = ok(await trackd.request('POST', '/api/v1/assets', { token, body: { name: 'After', external_key: 'CRASH-2' } }), 201, 'next');
  t.not(next.id, list[0].id, 'a later create draws a fresh id');
  const again = await trackd.request('POST', '/api/v1/assets', { token, body: { name: 'Again', external_key: 'CRASH-1' } });
  t.equal(again.status, 409, 'the crashed create counts: its external_key is taken');
});

t.test('a scan batch killed between its journal append and its commit is applied exactly once after the restart', async (t) => {
  const nats = await startNats(t);
  const nc = await natsClient(t, nats.url);
  const trackd = await spawnTrackd(t, { natsUrl: nats.url, env: { ...ENV, [KILL]: 'scans.apply' } });
  const org = await trackd.createOrg('Crash scans');
  const { token } = await trackd.createKey(org.id);
  ok(await trackd.request('POST', '/api/v1/locations', { token, body: { external_key: 'DOCK', name: 'Dock' } }), 201, 'dock');
  const assets: number[] = [];
  for (let i = 0; i < 5; i++) {
    const body = { name: `A${i}`, tags: [{ tag_type: 'rfid', value: `TAG-${i}` }] };
    assets.push(ok(await trackd.request('POST', '/api/v1/assets', { token, body }), 201, `asset ${i}`).id);
  }
  const base = Date.now() - 3_600_000;
  const scans = 200;
  for (let i = 0; i < scans; i++)
    await publish(nc, `scans.${org.id}.fixed`, scanBody('DOCK', [`rfid:TAG-${i % 5}`], new Date(base + i * 1000)));
  await eventually(() => trackd.process.signalCode === 'SIGKILL', 10_000);
  const before = shardFile(trackd, 'SELECT count(*) FROM scan_history');
  t.equal(before.count, 0, 'SQLite holds no scan: the first batch died between the append and the commit');

  await killedRestart(t, trackd);
  await drained(nc);
  let events = 0;
  for (const id of assets) {
    const history = ok(await trackd.request('GET', `/api/v1/assets/${id}/history?limit=200`, { token }), 200, 'history');
    t.equal(history.length, scans / 5, `asset ${id}: one event per scan published`);
    events += history.length;
  }
  t.equal(events, scans, 'every scan applied once: none lost with the crashed batch, none applied again on its redelivery');
});
