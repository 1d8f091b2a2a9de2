/**
 * Fencing (docs/cluster.md): two trackd processes with their own data write the same shard's
 * journal on one nats-server. The newer writer reconciles (takes every entry the older one
 * journaled) and appends; the older one's next append is refused, so it commits nothing more: its
 * writes answer 503, its SQLite file is unchanged, and its scan batches are neither committed nor acked.
 */
import path from 'node:path';
import { jetstreamManager } from '@nats-io/jetstream';
import t from 'tap';
import { JOURNAL_STREAM } from '../../src/shards/journalEntry.js';
import { drained, delivered, natsClient, publish, scanBody } from '../helpers/scans.js';
import { firstDifference, tables } from '../helpers/shardWorkload.js';
import { sharedControlPlane } from '../helpers/controlPlane.js';
import { eventually, spawnTrackd, startNats } from '../helpers/trackd.js';

const ENV = { SHARD_JOURNAL: 'on', SHARDS: '1', HTTP_THREADS: '1' };

const created = (res: { status: number; text: string; json: any }, what: string) => {
  if (res.status !== 201) throw new Error(`${what}: ${res.status} ${res.text}`);
  return res.json.data as { id: number };
};

t.test('the stale writer of a shard is fenced: its append is refused and its SQLite file is unchanged', async (t) => {
  const nats = await startNats(t);
  const nc = await natsClient(t, nats.url);
  const jsm = await jetstreamManager(nc);
  const lastEntry = async () => (await jsm.streams.getMessage(JOURNAL_STREAM, { last_by_subj: 'journal.0' }))?.seq ?? 0;

  const older = await spawnTrackd(t, { natsUrl: nats.url, env: ENV });
  const org = await older.createOrg('Fenced');
  const { token } = await older.createKey(org.id);
  created(await older.request('POST', '/api/v1/locations', { token, body: { external_key: 'DOCK', name: 'Dock' } }), 'dock');
  const first = created(
    await older.request('POST', '/api/v1/assets', {
      token,
      body: { name: 'First', tags: [{ tag_type: 'rfid', value: 'F1' }] },
    }),
    'first asset',
  );
  const olderLast = await lastEntry();
  t.ok(olderLast > 0, `the older writer journaled its writes (last entry ${olderLast})`);

  // The newer writer starts with no shard file: it takes the journal's history, then writes.
  const newer = await spawnTrackd(t, { natsUrl: nats.url, env: ENV, dataDir: await sharedControlPlane(t, older.dataDir) });
  const reconciled = newer.logs().find((l) => l.msg === 'shard journal reconciled');
  t.equal(reconciled?.replayed, 2, 'the newer writer applied the two entries of the older one at start');
  const taken = await newer.request('GET', `/api/v1/assets/${first.id}`, { token });
  t.equal(taken.json?.data?.name, 'First', 'the newer writer serves what the older one wrote');
  created(
    await newer.request('POST', '/api/v1/assets', { token, body: { name: 'Second', tags: [{ tag_type: 'rfid', value: 'S2' }] } }),
    'the newer writer appends after the older one',
  );
  const newerLast = await lastEntry();
  t.ok(newerLast > olderLast, 'the journal moved on');

  const olderFile = path.join(older.dataDir, 'shards', 'shard-0.sqlite');
  const before = tables(olderFile);
  const refused = await older.request('POST', '/api/v1/assets', { token, body: { name: 'Stale' } });
  t.equal(refused.status, 503, 'the stale writer refuses the write');
  t.equal(refused.json?.error?.type, 'service_unavailable', 'as service_unavailable');
  t.ok(refused.headers.get('retry-after'), 'with Retry-After');
  t.match(refused.json?.error?.detail, /owned by another writer/, 'saying why');
  const patch = await older.request('PATCH', `/api/v1/assets/${first.id}`, { token, body: { name: 'Stale rename' } });
  t.equal(patch.status, 503, 'and every write after it (fenced)');
  t.equal(await lastEntry(), newerLast, 'nothing of the stale writer reached the journal');
  await eventually(() => older.logs().some((l) => l.msg === 'shard journal fenced'), 5000).catch(() => undefined);
  t.ok(
    older.logs().some((l) => l.msg === 'shard journal fenced'),
    'the stale writer logs that it is fenced',
  );
  const read = await older.request('GET', `/api/v1/assets/${first.id}`, { token });
  t.equal(read.json?.data?.name, 'First', 'reads of its committed state still work');

  // Only the stale writer consumes now: its scan batch is refused, so nothing commits or is acked.
  await newer.stop();
  await publish(nc, `scans.${org.id}.fixed`, scanBody('DOCK', ['rfid:F1'], new Date(Date.now() - 60_000)));
  const last = await delivered(nc);
  await new Promise((r) => setTimeout(r, 500));
  const consumer = await jsm.consumers.info('SCANS', 'trackd-scans');
  t.ok(consumer.ack_floor.stream_seq < last, `the scan is not acked (ack floor ${consumer.ack_floor.stream_seq}, last ${last})`);
  t.equal(firstDifference(before, tables(olderFile)), undefined, "the stale writer's SQLite file is unchanged, table by table");

  // The newer writer back: it applies the scan exactly once.
  await newer.restart();
  await drained(nc);
  const history = await newer.request('GET', `/api/v1/assets/${first.id}/history`, { token });
  t.equal(history.json?.data?.length, 1, 'the newer writer applied the scan the stale one could not');
});
