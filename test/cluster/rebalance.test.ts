/**
 * Rebalancing on join (CLUSTER_REBALANCE_SECONDS; docs/cluster.md, "Ownership by lease"): leases
 * are sticky, so a node that joins a running cluster serves nothing until another fails, unless
 * rebalancing is on. Then, once the new node has been live for a whole period, the node holding
 * the shards it wins by rendezvous hands them over, one per period, while scans keep coming:
 * every scan is applied exactly once, on whichever node owned its shard at the time.
 */
import fs from 'node:fs';
import t from 'tap';
import { rendezvous } from '../../src/cluster/placement.js';
import { type ClusterOrg as Org, orgPerShard, served } from '../helpers/cluster.js';
import { sharedControlPlane } from '../helpers/controlPlane.js';
import { drained, natsClient, publish, scanBody } from '../helpers/scans.js';
import { eventually, spawnTrackd, startNats, tempDir, type Trackd } from '../helpers/trackd.js';

const SHARDS = 4;
const ALL = Array.from({ length: SHARDS }, (_, i) => i);
const PERIOD_SECONDS = 3;

t.test('a node that joins is handed the shards it wins, one per period, and every scan is applied once', async (t) => {
  const nats = await startNats(t);
  const nc = await natsClient(t, nats.url);
  const env = {
    SHARDS: String(SHARDS),
    LEASE_SECONDS: '3',
    CLUSTER_REBALANCE_SECONDS: String(PERIOD_SECONDS),
    HTTP_THREADS: '1',
    SNAPSHOT_EVERY_ENTRIES: '4',
    NATS_URL: nats.url,
  };
  const dirA = tempDir();
  t.teardown(() => fs.rmSync(dirA, { recursive: true, force: true }));
  const orgs = orgPerShard({ ...env, DATA_DIR: dirA }, SHARDS, 'RB');
  t.same(
    orgs.map((o) => o.shard),
    ALL,
    'one org on each shard',
  );
  const dirC = await sharedControlPlane(t, dirA);

  // Node A alone takes every shard.
  const a = await spawnTrackd(t, { natsUrl: nats.url, dataDir: dirA, env: { ...env, CLUSTER_NODE_ID: 'node-a' } });
  await eventually(async () => (await served(a)).length === SHARDS, 120_000, 200);
  for (const org of orgs) {
    for (const key of ['L1', 'L2']) {
      const res = await a.http('POST', '/api/v1/locations', { token: org.token, body: { external_key: key, name: key } });
      t.equal(res.status, 201, `org ${org.id}: location ${key} created`);
    }
    const asset = await a.http('POST', '/api/v1/assets', {
      token: org.token,
      body: { name: `Asset ${org.shard}`, tags: [{ tag_type: 'rfid', value: org.tag.slice(5) }] },
    });
    t.equal(asset.status, 201, `org ${org.id}: asset created`);
    org.assetId = asset.json.data.id;
  }
  let clock = Date.now() - 3_600_000;
  const publishRound = async (perOrg: number) => {
    for (const org of orgs)
      for (let i = 0; i < perOrg; i++) {
        org.published++;
        clock += 1000;
        await publish(nc, `scans.${org.id}.fixed`, scanBody(org.published % 2 ? 'L1' : 'L2', [org.tag], new Date(clock)));
      }
  };
  await publishRound(4);

  // Node C joins; scans keep coming while A hands it its shards.
  const joinedAt = Date.now();
  const c = await spawnTrackd(t, { natsUrl: nats.url, dataDir: dirC, env: { ...env, CLUSTER_NODE_ID: 'node-c' } });
  const winsOfC = ALL.filter((shard) => rendezvous(shard, ['node-a', 'node-c']) === 'node-c');
  t.ok(winsOfC.length > 0 && winsOfC.length < SHARDS, `node C wins shards ${winsOfC.join(',')} of ${SHARDS}`);
  const balanced = async () =>
    JSON.stringify(await served(c)) === JSON.stringify(winsOfC) &&
    JSON.stringify(await served(a)) === JSON.stringify(ALL.filter((s) => !winsOfC.includes(s)));
  const deadline = Date.now() + 120_000;
  while (!(await balanced()) && Date.now() < deadline) {
    await publishRound(1);
    await new Promise((r) => setTimeout(r, 300));
  }
  t.ok(await balanced(), `node C serves the shards it wins, node A the others (${Date.now() - joinedAt} ms after C started)`);

  // A shard handed over may come back to A and be handed over again, a period later: at load, C can
  // look dead to A for a moment (its heartbeat late), and A then claims the released shard itself.
  const handOvers = (node: Trackd) =>
    node.logs().filter((l) => l.msg === 'cluster shard handed over: its rendezvous winner among the live nodes has joined');
  const handedOver = handOvers(a);
  t.same(
    [...new Set(handedOver.map((l) => l.shard as number))].sort((x, y) => x - y),
    winsOfC,
    "node A handed over C's shards, and no other",
  );
  t.ok(
    handedOver.every((l) => l.to === 'node-c'),
    'each to node C',
  );
  const times = handedOver.map((l) => Date.parse(l.time as string));
  t.ok(
    times.every((at, i) => i === 0 || at - times[i - 1]! >= PERIOD_SECONDS * 1000 - 50),
    `one hand-over per period (${times.map((at) => at - joinedAt).join(', ')} ms after C started)`,
  );
  t.ok(
    times[0]! - joinedAt >= PERIOD_SECONDS * 1000,
    `the first only once C had been live for a whole period (${times[0]! - joinedAt} ms after it started)`,
  );
  const balancedHandOvers = handOvers(a).length + handOvers(c).length;

  // Every scan applied once, read on the shard's owner now.
  await publishRound(2);
  await Promise.all(ALL.map((shard) => drained(nc, 'SCANS', `trackd-scans-s${shard}`)));
  const ownerOf = (org: Org): Trackd => (winsOfC.includes(org.shard) ? c : a);
  for (const org of orgs) {
    const count = await eventually(
      async () => {
        const res = await ownerOf(org).http('GET', `/api/v1/assets/${org.assetId}/history?limit=200`, { token: org.token });
        return res.status === 200 && res.json.data.length === org.published && (res.json.data.length as number);
      },
      30_000,
      200,
    ).catch(
      async () =>
        (await ownerOf(org).http('GET', `/api/v1/assets/${org.assetId}/history?limit=200`, { token: org.token })).json?.data?.length,
    );
    t.equal(count, org.published, `org ${org.id} (shard ${org.shard}): its ${org.published} scans applied once`);
  }

  // Settled: no further hand-over once each node serves what it wins.
  await new Promise((r) => setTimeout(r, PERIOD_SECONDS * 2000));
  t.equal(handOvers(a).length + handOvers(c).length, balancedHandOvers, 'nothing handed over after the balance was reached');
});
