/**
 * Cluster mode in `trackd serve` (docs/cluster.md, "Cluster mode"): two trackd nodes with their
 * own DATA_DIR (sharing the control plane: orgs, keys) on one nats-server, CLUSTER_NODE_ID set.
 *
 * - Started together, the nodes split the 4 shards by rendezvous; each org's scans apply on its
 *   shard's owner, which answers for it over HTTP.
 * - Each node is the standby of the other's shards: it follows their journals into its own files,
 *   which equal the owners' table by table.
 * - Node A SIGSTOPped for longer than the lease: node B takes A's shards over (from its standby
 *   files plus the journal's tail) and applies the scans published meanwhile.
 * - A resumed: its leases are gone, it stops its actors and consumers; a write sent to it then
 *   answers 503 and changes nothing anywhere.
 * - Node B killed -9: A takes every shard over within about a lease period (measured).
 * - Every published scan is applied exactly once: each asset's history counts one visit per scan
 *   (scans alternate between two locations), read on the node that owns the asset's shard.
 */
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { shardFile } from '../../src/shards/writer.js';
import { rendezvous } from '../../src/cluster/placement.js';
import { drained, natsClient, publish, scanBody } from '../helpers/scans.js';
import { type ClusterOrg as Org, orgPerShard, quietBeforeClaim, served, standbyShards, watchLeases } from '../helpers/cluster.js';
import { firstDifference, tables } from '../helpers/shardWorkload.js';
import { sharedControlPlane } from '../helpers/controlPlane.js';
import { eventually, spawnTrackd, startNats, tempDir, type Trackd } from '../helpers/trackd.js';

const SHARDS = 4;
const LEASE_SECONDS = 5;
const NODES = ['node-a', 'node-b'];
const ALL = Array.from({ length: SHARDS }, (_, i) => i);

/** How long after `since` a node acquired the leases, and how long each shard took to start, from its log. */
function phases(node: Trackd, since: number): string {
  const logged = (msg: string) => node.logs().filter((l) => l.msg === msg && Date.parse(l.time) >= since);
  const leases = logged('cluster shard lease acquired: starting its actor').map((l) => Date.parse(l.time) - since);
  const started = logged('cluster shard acquired: restored, owner entry appended, consuming').map((l) => l.ms as number);
  return `leases acquired ${Math.min(...leases)}-${Math.max(...leases)} ms after; each shard started (restore, journal tail, owner entry) in ${Math.min(...started)}-${Math.max(...started)} ms`;
}

t.test('shards owned by lease: split, taken over from a paused node and from a killed one, every scan applied once', async (t) => {
  const nats = await startNats(t);
  const nc = await natsClient(t, nats.url);
  const env = {
    SHARDS: String(SHARDS),
    LEASE_SECONDS: String(LEASE_SECONDS),
    HTTP_THREADS: '1',
    SNAPSHOT_EVERY_ENTRIES: '4',
    NATS_URL: nats.url,
  };
  const dirA = tempDir();
  t.teardown(() => fs.rmSync(dirA, { recursive: true, force: true }));
  const orgs = orgPerShard({ ...env, DATA_DIR: dirA }, SHARDS, 'EPC');
  for (const [shard, org] of orgs.entries()) t.equal(org.shard, shard, `org ${org.id} lives on shard ${shard}`);
  const dirB = await sharedControlPlane(t, dirA);
  const [a, b] = (await Promise.all(
    [dirA, dirB].map((dataDir, i) => spawnTrackd(t, { natsUrl: nats.url, dataDir, env: { ...env, CLUSTER_NODE_ID: NODES[i]! } })),
  )) as [Trackd, Trackd];
  const byName = new Map([
    ['node-a', a],
    ['node-b', b],
  ]);
  t.teardown(() => a.process.kill('SIGCONT'));
  if (process.env.CLUSTER_TEST_LOGS)
    t.teardown(() => {
      // A teardown that throws leaves the nodes running until the file's timeout.
      fs.mkdirSync(process.env.CLUSTER_TEST_LOGS!, { recursive: true });
      for (const [name, node] of byName)
        fs.writeFileSync(
          path.join(process.env.CLUSTER_TEST_LOGS!, `${name}.log`),
          node
            .logs()
            .map((l) => JSON.stringify(l))
            .join('\n'),
        );
    });

  // 1. The split.
  const expected = ALL.map((shard) => rendezvous(shard, NODES)!);
  await eventually(async () => (await served(a)).length + (await served(b)).length === SHARDS, 120_000, 200);
  t.same(
    await served(a),
    ALL.filter((s) => expected[s] === 'node-a'),
    'node A serves the shards it wins by rendezvous',
  );
  t.same(
    await served(b),
    ALL.filter((s) => expected[s] === 'node-b'),
    'node B serves the others',
  );
  t.ok((await served(a)).length > 0 && (await served(b)).length > 0, 'both nodes serve shards');
  const ownerOf = (org: Org) => byName.get(expected[org.shard]!)!;

  // Master data on each org's owner; the other node answers for it too (forwarded to the owner).
  for (const org of orgs) {
    const node = ownerOf(org);
    for (const key of ['L1', 'L2']) {
      const res = await node.http('POST', '/api/v1/locations', { token: org.token, body: { external_key: key, name: key } });
      t.equal(res.status, 201, `org ${org.id}: location ${key} created on its owner`);
    }
    const asset = await node.http('POST', '/api/v1/assets', {
      token: org.token,
      body: { name: `Asset ${org.shard}`, tags: [{ tag_type: 'rfid', value: org.tag.slice(5) }] },
    });
    t.equal(asset.status, 201, `org ${org.id}: asset created`);
    org.assetId = asset.json.data.id;
  }
  const other = orgs[0]!;
  const notOwner = ownerOf(other) === a ? b : a;
  const forwarded = await notOwner.http('GET', `/api/v1/assets/${other.assetId}`, { token: other.token });
  t.equal(forwarded.status, 200, 'the node that does not own the shard answers too (forwarded to the owner)');
  t.equal(forwarded.json?.data?.id, other.assetId, "with the owner's answer");

  let clock = Date.now() - 3_600_000;
  const publishRound = async (perOrg: number) => {
    for (const org of orgs)
      for (let i = 0; i < perOrg; i++) {
        org.published++;
        clock += 1000;
        await publish(nc, `scans.${org.id}.fixed`, scanBody(org.published % 2 ? 'L1' : 'L2', [org.tag], new Date(clock)));
      }
  };
  const visits = async (node: Trackd, org: Org) => {
    const res = await node.http('GET', `/api/v1/assets/${org.assetId}/history?limit=200`, { token: org.token });
    if (res.status !== 200) throw new Error(`history of org ${org.id} on ${node.env.CLUSTER_NODE_ID}: ${res.status} ${res.text}`);
    return res.json.data.length as number;
  };
  const allDrained = () => Promise.all(ALL.map((shard) => drained(nc, 'SCANS', `trackd-scans-s${shard}`)));
  const expectApplied = async (owner: (org: Org) => Trackd, when: string) => {
    await allDrained();
    for (const org of orgs)
      t.equal(await visits(owner(org), org), org.published, `${when}: org ${org.id}'s ${org.published} scans applied once`);
  };

  await publishRound(6);
  await expectApplied(ownerOf, 'split');
  // Every shard has stored a snapshot (SNAPSHOT_EVERY_ENTRIES=4), so that a takeover restores one.
  await eventually(
    () =>
      ALL.every((shard) =>
        ownerOf(orgs[shard]!)
          .logs()
          .some((l) => l.msg === 'shard journal snapshot' && l.shard === shard),
      ),
    120_000,
    200,
  );

  // Standbys (CLUSTER_STANDBYS=on, the default): with two nodes, each follows the other's shards
  // into its own file, which equals the owner's table by table once it has caught up.
  const aShards = await served(a);
  const bShards = await served(b);
  const standbys = async () => [await standbyShards(a), await standbyShards(b)];
  await eventually(async () => JSON.stringify(await standbys()) === JSON.stringify([bShards, aShards]), 30_000, 200).catch(() => undefined);
  t.same(await standbys(), [bShards, aShards], "each node is the standby of the other's shards");
  for (const shard of ALL) {
    const [owner, standby] = aShards.includes(shard) ? [dirA, dirB] : [dirB, dirA];
    const difference = await eventually(
      () => firstDifference(tables(shardFile(owner, shard)), tables(shardFile(standby, shard))) === undefined || undefined,
      60_000,
      200,
    ).then(
      () => 'equal',
      () => String(firstDifference(tables(shardFile(owner, shard)), tables(shardFile(standby, shard)))),
    );
    t.equal(difference, 'equal', `shard ${shard}: the standby's file equals the owner's, table by table`);
  }

  // 2. Node A paused past its lease: B takes its shards over.
  // The pause can fall up to a renewal interval after A's last renewal: "a lease period" is measured from that renewal.
  const leaseWrites = await watchLeases(t, nc);
  await eventually(() => aShards.every((shard) => leaseWrites.some((w) => w.shard === shard && w.node === 'node-a')), 30_000, 50);
  a.process.kill('SIGSTOP');
  const pausedAt = Date.now();
  await publishRound(5);
  await eventually(async () => (await served(b)).length === SHARDS, 120_000, 100);
  const takeover = Date.now() - pausedAt;
  t.comment(`node B served every shard ${takeover} ms after node A stopped (lease ${LEASE_SECONDS} s)`);
  for (const shard of aShards) {
    const quiet = quietBeforeClaim(leaseWrites, shard, 'node-a', 'node-b');
    // 100 ms for the two writes' trips to this client, which need not take the same time.
    t.ok(quiet >= LEASE_SECONDS * 1000 - 100, `shard ${shard}: B claimed it ${quiet} ms after A's last renewal, not before a lease period`);
  }
  const restored = b
    .logs()
    .filter((l) => l.msg === 'shard journal restored')
    .map((l) => l.shard);
  t.same(restored, [], "node B took A's shards over from its standby files: no snapshot restored");
  t.comment(`takeover from the paused node: ${phases(b, pausedAt)}`);
  await expectApplied(() => b, 'taken over from the paused node');

  // 3. A resumed: it gives its shards up; a write sent to it changes nothing.
  a.process.kill('SIGCONT');
  const victim = orgs.find((o) => aShards.includes(o.shard))!;
  const stale = await a.http('POST', '/api/v1/assets', { token: victim.token, body: { name: 'Stale write' } });
  t.ok(
    stale.status === 503 || stale.status === 201,
    `a write on the resumed node is refused (its stale shard) or forwarded to the owner: ${stale.status} ${stale.json?.error?.detail ?? ''}`,
  );
  const resumedServes = await eventually(
    async () => {
      const shards = await served(a);
      return shards.length === 0 && shards;
    },
    30_000,
    100,
  );
  t.same(resumedServes, [], 'the resumed node serves no shard');
  // A shard may be given up twice (its lease lost, then a refused append): its log line counts once.
  const givenUp = await eventually(
    () => {
      const lines = a.logs().filter((l) => l.msg === 'cluster shard given up: actor and consumers stopped');
      const shards = [...new Set(lines.map((l) => l.shard as number))].sort((x, y) => x - y);
      return aShards.every((shard) => shards.includes(shard)) && { lines, shards };
    },
    30_000,
    100,
  );
  t.same(
    givenUp.shards,
    aShards,
    `it gave each of its shards up, and no other (${givenUp.lines.map((l) => String(l.why).slice(0, 40)).join('; ')})`,
  );
  const list = await b.http('GET', '/api/v1/assets?limit=100', { token: victim.token });
  t.equal(
    list.json.data.filter((x: { name: string }) => x.name === 'Stale write').length,
    stale.status === 201 ? 1 : 0,
    'the write sent to the resumed node is on the owner once if it was answered 201, nowhere if 503',
  );
  await publishRound(3);
  await expectApplied(() => b, 'after the paused node resumed');

  // 4. B killed -9: A takes every shard over within about a lease period.
  b.process.kill('SIGKILL');
  const killedAt = Date.now();
  await publishRound(4);
  await eventually(async () => (await served(a)).length === SHARDS, 120_000, 100);
  const failover = Date.now() - killedAt;
  t.comment(`failover after kill -9: node A served every shard ${failover} ms after node B died (lease ${LEASE_SECONDS} s)`);
  t.comment(`failover after kill -9: ${phases(a, killedAt)}`);
  await expectApplied(() => a, 'after the kill -9');
});
