/**
 * Another client pulling from trackd's durable consumer (in a cluster: the former owner of a shard,
 * paused past its lease, whose pull request is still queued at the server) takes a delivery and
 * never acks it. trackd must not apply the messages after it as if nothing were missing: its
 * applied sequence would pass the taken one, which, redelivered after the ack wait, would then be
 * acked as already applied (a lost scan). The first delivery of a session is checked against the
 * consumer's last delivery like every later one; a gap re-creates the consumer at its ack floor.
 */
import { createInbox } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import t, { type Test } from 'tap';
import { JOURNAL_STREAM } from '../../src/shards/journalEntry.js';
import { served } from '../helpers/cluster.js';
import { seed } from '../helpers/masterdata.js';
import { drained, natsClient, publish, scanBody } from '../helpers/scans.js';
import { eventually, spawnTrackd, startNats, type Trackd } from '../helpers/trackd.js';

/**
 * An org with locations L1 and L2 and one tagged asset, whose first scan (at L1) is applied; and
 * how to read its visits' locations once they number `count` (or whatever is there after 30 s).
 */
async function trackedAsset(t: Test, trackd: Trackd, natsUrl: string, name: string, tag: string) {
  const org = await trackd.createOrg(name);
  const token = (await trackd.createKey(org.id)).token;
  const ids = await seed(trackd, token, {
    locations: [{ external_key: 'L1' }, { external_key: 'L2' }],
    assets: [{ external_key: 'A-1', tags: [tag] }],
  });
  const assetId = ids.assets['A-1']!;
  const nc = await natsClient(t, natsUrl);
  const at = Date.now() - 60_000;
  const history = `/api/v1/assets/${assetId}/history?sort=event_observed_at`;
  await publish(nc, `scans.${org.id}.fixed`, scanBody('L1', [tag], new Date(at)));
  await eventually(async () => (await trackd.request('GET', history, { token })).json?.total_count === 1, 30_000);
  const visits = async (count: number): Promise<string[]> => {
    const rows = await eventually(async () => {
      const res = await trackd.request('GET', history, { token });
      return res.json?.total_count === count && res.json.data;
    }, 30_000).catch(async () => (await trackd.request('GET', history, { token })).json?.data);
    return (rows as { location: { external_key: string } }[]).map((row) => row.location.external_key);
  };
  return { org, nc, at, visits };
}

t.test('a delivery taken by another puller of the durable is applied all the same, before the scans after it', async (t) => {
  const trackd = await spawnTrackd(t, { env: { SHARDS: '1', HISTORY_GAP_SECONDS: '0' } });
  const { org, nc, at, visits } = await trackedAsset(t, trackd, trackd.natsUrl, 'Stale puller', 'rfid:SP1');

  // trackd stopped cleanly: the durable consumer stays, with nothing pending. A pull request of
  // one message is queued on it before trackd's own (and never acked).
  await trackd.stop();
  const inbox = createInbox();
  const taken = nc.subscribe(inbox, { max: 1 });
  nc.publish('$JS.API.CONSUMER.MSG.NEXT.SCANS.trackd-scans', JSON.stringify({ batch: 1, expires: 120_000_000_000 }), { reply: inbox });
  await nc.flush();
  await trackd.restart();
  // A scan published before the consumer's session starts is taken by the other puller while
  // trackd has no session, and that start re-creates the durable at the floor (no gap to see).
  await eventually(() => trackd.logs().some((l) => l.msg === 'scan consumer session starts' && l.consumer === 'trackd-scans'), 60_000);

  await publish(nc, `scans.${org.id}.fixed`, scanBody('L2', ['rfid:SP1'], new Date(at + 1000)));
  const first = await (async () => {
    for await (const m of taken) return m;
  })();
  t.ok(first?.subject.startsWith(`scans.${org.id}.`), 'the other puller took the scan to L2');
  await publish(nc, `scans.${org.id}.fixed`, scanBody('L1', ['rfid:SP1'], new Date(at + 2000)));

  // Within the ack wait (60 s): the taken scan was not waited for.
  t.same(await visits(3), ['L1', 'L2', 'L1'], 'three visits, the taken scan among them, in order');
  t.ok(
    trackd
      .logs()
      .some((l) => l.msg === 'scan consumer session ends; resuming from the ack floor' && /delivery sequence gap/.test(l.reason)),
    'the consumer saw the gap and resumed from its ack floor',
  );
});

// In cluster mode the shard's applied sequence is known too: a durable whose ack floor is past a
// message trackd never took (another client acked it; or the server itself, nats-server#6566 before
// 2.11) is re-created at the first message past what the shard applied, not at the floor.
t.test('cluster mode: a delivery taken and acked by another client of the durable is applied all the same', async (t) => {
  const nats = await startNats(t);
  const env = { SHARDS: '1', HISTORY_GAP_SECONDS: '0', LEASE_SECONDS: '10', CLUSTER_NODE_ID: 'node-a', HTTP_THREADS: '1' };
  const trackd = await spawnTrackd(t, { natsUrl: nats.url, env });
  await eventually(async () => (await served(trackd)).length === 1, 60_000);
  const { org, nc, at, visits } = await trackedAsset(t, trackd, nats.url, 'Acked elsewhere', 'rfid:SP2');

  await trackd.stop();
  const inbox = createInbox();
  const taken = nc.subscribe(inbox, { max: 1 });
  nc.publish('$JS.API.CONSUMER.MSG.NEXT.SCANS.trackd-scans-s0', JSON.stringify({ batch: 1, expires: 120_000_000_000 }), { reply: inbox });
  await nc.flush();
  await trackd.restart();
  await eventually(async () => (await served(trackd)).length === 1, 60_000);
  // A shard is served before its consumer's session starts: a scan published before that would be
  // taken by the other client while trackd's session had not begun, and its start re-creates the
  // durable at the floor (no skip to see).
  await eventually(
    () =>
      // The restarted process's own log (a spawned trackd's log starts again at each restart).
      trackd.logs().some((l) => l.msg === 'scan consumer session starts' && l.consumer === 'trackd-scans-s0'),
    60_000,
  );

  await publish(nc, `scans.${org.id}.fixed`, scanBody('L2', ['rfid:SP2'], new Date(at + 1000)));
  const first = await (async () => {
    for await (const m of taken) return m;
  })();
  t.ok(first?.subject.startsWith(`scans.${org.id}.`), 'the other client took the scan to L2');
  // Acked there: the durable's ack floor moves past a message trackd never had.
  first!.respond(new TextEncoder().encode('+ACK'));
  const jsm = await jetstreamManager(nc);
  await eventually(async () => (await jsm.consumers.info('SCANS', 'trackd-scans-s0')).ack_floor.stream_seq >= 2, 10_000);
  await publish(nc, `scans.${org.id}.fixed`, scanBody('L1', ['rfid:SP2'], new Date(at + 2000)));

  t.same(await visits(3), ['L1', 'L2', 'L1'], 'three visits, the scan acked elsewhere among them, in order');
  t.ok(
    trackd.logs().some((l) => l.msg === 'scan consumer state' && l.consumer === 'trackd-scans-s0' && l.must_start_by === 2),
    'the session after the gap started at the message past what the shard applied (2), below the ack floor',
  );
});

// A first delivery that jumps over stream sequences ends the session (a skip, above), unless they are
// gone from the stream: an operator deleted a message. Then it is passed over once, not looped on.
t.test('a message deleted from SCANS before delivery is passed over, and the scans around it applied', async (t) => {
  const trackd = await spawnTrackd(t, { env: { SHARDS: '1', HISTORY_GAP_SECONDS: '0' } });
  const { org, nc, at, visits } = await trackedAsset(t, trackd, trackd.natsUrl, 'Deleted message', 'rfid:SP3');

  await trackd.stop();
  await publish(nc, `scans.${org.id}.fixed`, scanBody('L2', ['rfid:SP3'], new Date(at + 1000)));
  const { seq: deleted } = await publish(nc, `scans.${org.id}.fixed`, scanBody('L1', ['rfid:SP3'], new Date(at + 2000)));
  await publish(nc, `scans.${org.id}.fixed`, scanBody('L2', ['rfid:SP3'], new Date(at + 3000)));
  t.ok(await (await jetstreamManager(nc)).streams.deleteMessage('SCANS', deleted), `SCANS message ${deleted} deleted`);
  await trackd.restart();

  // HISTORY_GAP_SECONDS=0: each scan is a history row of its own, so the deleted L1 between the two L2s would show.
  t.same(await visits(3), ['L1', 'L2', 'L2'], 'the scans before and after the deleted one applied, the deleted one not');
  await drained(nc);
  t.ok(
    trackd
      .logs()
      .some((l) => l.msg === 'scan messages gone from the stream (deleted): passed over' && l.from === deleted && l.to === deleted),
    'the gap was looked up and found deleted',
  );
});

// What the server's skip must not lead to: a purge of SCANS (after another shard's snapshot) below a
// floor the server moved past messages the shard never had. Two pull requests of another client take
// (and ack) shard 0's next scan and the message after it, so shard 0's consumer sees nothing until a
// later scan; shard 1 applies that second message, snapshots and purges meanwhile. The purge stays at
// or below what shard 0's holder reported settled with its lease, so the taken scan is still there
// when shard 0's next session starts below the floor.
t.test('cluster mode: a purge after another shard’s snapshot keeps the messages a moved ack floor passed over', async (t) => {
  const nats = await startNats(t);
  const env = {
    SHARDS: '2',
    HISTORY_GAP_SECONDS: '0',
    LEASE_SECONDS: '3',
    CLUSTER_NODE_ID: 'node-a',
    HTTP_THREADS: '1',
    SNAPSHOT_EVERY_ENTRIES: '1',
  };
  const trackd = await spawnTrackd(t, { natsUrl: nats.url, env });
  await eventually(async () => (await served(trackd)).length === 2, 60_000);
  const { org, nc, at, visits } = await trackedAsset(t, trackd, nats.url, 'Purged under', 'rfid:SP4');
  const other = await trackd.createOrg('Shard one');
  t.equal((other.id - 1) % 2, 1, 'the second org is on shard 1');
  const otherToken = (await trackd.createKey(other.id)).token;
  await seed(trackd, otherToken, { locations: [{ external_key: 'D1' }], assets: [{ external_key: 'B-1', tags: ['rfid:SP5'] }] });

  await trackd.stop();
  const inbox = createInbox();
  const taken = nc.subscribe(inbox, { max: 2 });
  for (let i = 0; i < 2; i++)
    nc.publish('$JS.API.CONSUMER.MSG.NEXT.SCANS.trackd-scans-s0', JSON.stringify({ batch: 1, expires: 120_000_000_000 }), { reply: inbox });
  await nc.flush();
  await trackd.restart();
  await eventually(async () => (await served(trackd)).length === 2, 60_000);
  const jsm = await jetstreamManager(nc);
  const leaseInputs = async (shard: number) =>
    (await jsm.streams.getMessage('KV_trackd_leases', { last_by_subj: `$KV.trackd_leases.shard.${shard}` }))?.json<{
      inputs?: Record<string, number | null>;
    }>().inputs;
  await eventually(async () => (await leaseInputs(0))?.SCANS !== undefined && (await leaseInputs(1))?.SCANS !== undefined, 30_000);

  const { seq: missed } = await publish(nc, `scans.${org.id}.fixed`, scanBody('L2', ['rfid:SP4'], new Date(at + 1000)));
  await publish(nc, `scans.${other.id}.fixed`, scanBody('D1', ['rfid:SP5']));
  let count = 0;
  for await (const m of taken) {
    m.respond(new TextEncoder().encode('+ACK'));
    if (++count === 2) break;
  }
  await eventually(async () => (await jsm.consumers.info('SCANS', 'trackd-scans-s0')).ack_floor.stream_seq > missed, 10_000);
  // On a failure, what shard 0's consumer did: a session of its own that ended and began again at
  // the shard's applied sequence takes the scan itself, and the scenario is not the one meant.
  const consumerLog = () =>
    trackd
      .logs()
      .filter((l) => l.consumer === 'trackd-scans-s0')
      .map((l) => `${l.msg} ${l.reason ?? ''}${l.must_start_by === undefined ? '' : ` must_start_by=${l.must_start_by}`}`);
  t.ok((await leaseInputs(0))!.SCANS! < missed, `shard 0's holder reports settled below the taken scan (${missed})`, {
    log: consumerLog(),
  });

  // Shard 1 applies the second message, then snapshots and purges.
  await eventually(async () => {
    const res = await trackd.request('GET', '/api/v1/reports/asset-locations?limit=10', { token: otherToken });
    return res.json?.data?.length === 1;
  }, 30_000);
  // Its snapshot at or past the entry that applied it (and the purge that follows the snapshot, which
  // logs it), wherever its line falls: at load, it may be logged before the report shows the scan.
  const appliedAt = (await jsm.streams.getMessage(JOURNAL_STREAM, { last_by_subj: 'journal.1' }))!.seq;
  await eventually(
    async () => trackd.logs().find((l) => l.msg === 'shard journal snapshot' && l.shard === 1 && (l.position as number) >= appliedAt),
    30_000,
  );
  t.ok((await jsm.streams.info('SCANS')).state.first_seq <= missed, 'the scan shard 0 never had is still in SCANS', {
    log: consumerLog(),
    leases: [await leaseInputs(0), await leaseInputs(1)],
  });

  await publish(nc, `scans.${org.id}.fixed`, scanBody('L1', ['rfid:SP4'], new Date(at + 2000)));
  t.same(await visits(3), ['L1', 'L2', 'L1'], 'three visits, the taken scan among them, in order');
});
