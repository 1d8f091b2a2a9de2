/**
 * ShardOwnership (src/cluster/ownership.ts), two nodes in this process on one nats-server: started
 * within a lease period of each other they split the shards by rendezvous (neither takes every shard), both agree on every
 * shard's owner, a release moves the shard to the other node at its next tick, and a node with
 * another shard count is refused.
 */
import t from 'tap';
import { ShardOwnership, type OwnershipEvent } from '../../src/cluster/ownership.js';
import { rendezvous } from '../../src/cluster/placement.js';
import { connectNats } from '../../src/scans/streams.js';
import { eventually, startNats } from '../helpers/trackd.js';

const SHARDS = 6;
const LEASE_MS = 1500;
const NODES = ['node-a', 'node-b'];
const ALL = Array.from({ length: SHARDS }, (_, i) => i);

t.test('two nodes started together split the shards, agree on the owners, and a released shard moves', async (t) => {
  const nats = await startNats(t);
  const start = async (nodeId: string) => {
    const nc = await connectNats(nats.url, nodeId, { reconnect: true });
    const ownership = await ShardOwnership.start(nc, { nodeId, shards: SHARDS, leaseMs: LEASE_MS, replicas: 1 });
    const events: OwnershipEvent[] = [];
    ownership.on((e) => events.push(e));
    t.teardown(async () => {
      await ownership.stop();
      await nc.close();
    });
    return { ownership, events };
  };
  // The second node starts after the first one's first tick (within its settle period of one lease).
  const a = await start('node-a');
  await eventually(() => a.ownership.liveNodes().length > 0, 5000, 10);
  const b = await start('node-b');
  await eventually(() => a.ownership.held().length + b.ownership.held().length === SHARDS, 20_000);
  const expected = ALL.map((shard) => rendezvous(shard, NODES));
  t.same(
    ALL.map((shard) => (a.ownership.holds(shard) ? 'node-a' : 'node-b')),
    expected,
    'each shard is held by its rendezvous winner among both nodes',
  );
  t.ok(a.ownership.held().length > 0 && b.ownership.held().length > 0, 'neither node took every shard');
  t.same(
    a.events
      .filter((e) => e.kind === 'acquired')
      .map((e) => e.shard)
      .sort(),
    a.ownership.held(),
    'an acquired event for each shard held',
  );
  await eventually(
    () => ALL.every((shard) => a.ownership.ownerOf(shard) === b.ownership.ownerOf(shard) && b.ownership.ownerOf(shard)),
    10_000,
  );
  t.same(
    ALL.map((shard) => b.ownership.ownerOf(shard)),
    expected,
    'both nodes name the same owner of every shard',
  );
  t.same(a.ownership.liveNodes(), NODES, 'both nodes are live');

  const moved = a.ownership.held()[0]!;
  await a.ownership.release(moved);
  t.same(a.events.at(-1), { kind: 'released', shard: moved, reason: 'released', detail: 'given up by this node' }, 'released event');
  t.notOk(a.ownership.holds(moved), 'no longer held by its old owner');
  await eventually(() => b.ownership.holds(moved), 10_000);
  t.match(b.events.at(-1), { kind: 'acquired', shard: moved }, 'the other node acquired the released shard');

  const nc = await connectNats(nats.url, 'node-c', { reconnect: false });
  t.teardown(() => nc.close());
  await t.rejects(
    ShardOwnership.start(nc, { nodeId: 'node-c', shards: SHARDS + 1, leaseMs: LEASE_MS, replicas: 1 }),
    { name: 'ShardCountMismatch', message: /the cluster has 6 shards/ },
    'a node with another shard count is refused',
  );
});
