/**
 * Shard ownership by lease in NATS KV (docs/cluster.md, step 3), two nodes as two processes on one
 * nats-server: the first claims every shard; the second, started later, takes none while the first
 * renews (sticky); the first SIGSTOPped for longer than the lease, the second takes every shard
 * over with a newer revision (the fencing epoch) after a whole lease period and not before; the
 * first, resumed, finds its renewals refused and loses every lease.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import t from 'tap';
import { LEASE_BUCKET } from '../../src/cluster/leaseBucket.js';
import { natsProxy } from '../helpers/natsProxy.js';
import { eventually, ROOT, startNats, type Teardown } from '../helpers/trackd.js';

const SHARDS = 4;
const LEASE_MS = 3000;
const ALL = Array.from({ length: SHARDS }, (_, i) => i);

interface Node {
  child: ChildProcess;
  events: any[];
  ticks(): any[];
}

function startNode(t: Teardown, natsUrl: string, id: string, env: Record<string, string> = {}): Node {
  const child = spawn(process.execPath, [path.join(ROOT, 'dist', 'test', 'helpers', 'leaseNode.js')], {
    env: { ...process.env, NATS_URL: natsUrl, NODE_ID: id, SHARDS: String(SHARDS), LEASE_MS: String(LEASE_MS), ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const events: any[] = [];
  let rest = '';
  child.stdout!.on('data', (chunk: Buffer) => {
    const lines = (rest + chunk.toString()).split('\n');
    rest = lines.pop()!;
    for (const line of lines) if (line.trim() !== '') events.push(JSON.parse(line));
  });
  t.teardown(async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    // SIGTERM, so that it exits by itself (and writes its coverage); SIGKILL if it does not.
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGCONT');
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
    await exited;
    clearTimeout(timer);
  });
  return { child, events, ticks: () => events.filter((e) => e.kind === 'tick') };
}

t.test('a lease moves only when its holder stops renewing for a whole period, and the old holder then loses it', async (t) => {
  const nats = await startNats(t);
  const a = startNode(t, nats.url, 'node-a');
  await eventually(() => a.ticks().at(-1)?.held.length === SHARDS, 30_000);
  const epochsA = new Map(a.events.filter((e) => e.kind === 'acquired').map((e) => [e.shard, e.epoch]));
  t.same([...epochsA.keys()].sort(), ALL, 'the first node claims every shard');

  const b = startNode(t, nats.url, 'node-b');
  const firstTick = await eventually(() => b.ticks()[0], 30_000);
  await eventually(() => (b.ticks().at(-1)?.at ?? 0) >= firstTick.at + 2 * LEASE_MS, 30_000);
  t.same(b.ticks().at(-1)?.live, ['node-a', 'node-b'], 'the second node sees both nodes live');
  t.equal(b.events.filter((e) => e.kind === 'acquired').length, 0, 'and takes no shard over two lease periods: leases are sticky');
  t.same(a.ticks().at(-1)?.held, ALL, 'the first node still holds every shard');

  const reads = a.ticks();
  t.ok(
    reads.filter((tick) => !tick.renewed).length >= reads.length / 2,
    `the leases are read more often than renewed (${reads.filter((tick) => tick.renewed).length} renewals in ${reads.length} reads)`,
  );
  a.child.kill('SIGSTOP');
  const stoppedAt = Date.now();
  // Its last renewal was stored before the last tick line that says it renewed (the line follows the renew and the reads).
  const lastRenewal = a.ticks().findLast((tick) => tick.renewed)!.at;
  await eventually(() => b.events.filter((e) => e.kind === 'acquired').length === SHARDS, 60_000);
  const taken = b.events.filter((e) => e.kind === 'acquired');
  t.ok(
    taken.every((e) => e.epoch > epochsA.get(e.shard)! && e.from === 'node-a'),
    'each shard taken over from node-a with a newer revision (its fencing epoch)',
  );
  const first = Math.min(...taken.map((e) => e.at));
  t.ok(
    first - lastRenewal >= LEASE_MS - 100,
    `not before a whole lease period after the last renewal (${first - lastRenewal} ms, lease ${LEASE_MS} ms)`,
  );
  // The leases are read every tenth of the period (checked above, not timed here: the machine's load
  // decides how late a tick runs): the contender notes the last renewal within a read of it.
  t.comment(`the first shard taken ${first - lastRenewal} ms after the holder's last renewal`);
  t.comment(`takeover ${Math.max(...taken.map((e) => e.at)) - stoppedAt} ms after the holder stopped (lease ${LEASE_MS} ms)`);

  a.child.kill('SIGCONT');
  await eventually(() => a.events.filter((e) => e.kind === 'lost').length === SHARDS, 30_000).catch(() => undefined);
  t.equal(
    a.events.filter((e) => e.kind === 'lost').length,
    SHARDS,
    'the first node, resumed, has every renewal refused: it loses each lease',
  );
  await eventually(() => a.ticks().at(-1)?.held.length === 0 && a.ticks().at(-1)?.at > stoppedAt, 30_000);
  t.same(b.ticks().at(-1)?.held, ALL, 'the second node holds every shard');
});

t.test('a holder killed -9 (its connection gone) loses its shards once it has been seen gone, before its lease period', async (t) => {
  const nats = await startNats(t);
  // A long lease, so that a takeover by the lease period cannot pass for one by presence.
  const env = { LEASE_MS: '20000', ABSENT_MS: '1000', SETTLE_MS: '1000' };
  const a = startNode(t, nats.url, 'node-a', env);
  await eventually(() => a.ticks().at(-1)?.held.length === SHARDS, 60_000);
  const b = startNode(t, nats.url, 'node-b', env);
  await eventually(() => b.ticks().at(-1)?.live.length === 2, 30_000);
  // B sees A present while A lives: nothing moves (sticky) over a few of B's reads.
  const seenFrom = b.ticks().length;
  await eventually(() => b.ticks().length >= seenFrom + 5, 30_000);
  t.equal(b.events.filter((e) => e.kind === 'acquired').length, 0, 'a live holder keeps its shards');

  a.child.kill('SIGKILL');
  const killedAt = Date.now();
  await eventually(() => b.events.filter((e) => e.kind === 'acquired').length === SHARDS, 60_000);
  const taken = b.events.filter((e) => e.kind === 'acquired');
  const last = Math.max(...taken.map((e) => e.at)) - killedAt;
  t.ok(
    taken.every((e) => e.from === 'node-a') && last < 20_000 - 2_000,
    `every shard taken from node-a ${last} ms after its kill, within its lease period (20 s) less its renewal interval`,
  );
  t.ok(last >= 1000, `and not before it had been seen gone for ABSENT_MS (${last} ms)`);
});

/** node-a holding every shard, and node-b live beside it, reaching the server through a proxy that can lose its writes. */
async function holderAndProxiedContender(t: Teardown) {
  const nats = await startNats(t);
  const proxy = await natsProxy(t, nats.url);
  const a = startNode(t, nats.url, 'node-a');
  await eventually(() => a.ticks().at(-1)?.held.length === SHARDS, 30_000);
  const b = startNode(t, proxy.url, 'node-b');
  await eventually(() => b.ticks().at(-1)?.live.length === 2, 30_000);
  return { proxy, a, b };
}

t.test(
  "a contender whose heartbeat failed after the holder's last renewal still takes over, a whole period after its failure",
  async (t) => {
    // node-b reaches the server through a proxy that can lose its heartbeat writes.
    const { proxy, a, b } = await holderAndProxiedContender(t);
    a.child.kill('SIGSTOP');
    // After A's last renewal, one of B's heartbeats fails (its write lost on the way), then they succeed again.
    proxy.lose(`$KV.${LEASE_BUCKET}.node.node-b`);
    await eventually(() => proxy.lost() > 0 && b.events.some((e) => e.kind === 'error' && /heartbeat/.test(e.detail)), 30_000);
    proxy.lose(undefined);
    // When node-b saw its heartbeat fail (its own clock), not when this test read the line.
    const failedAt = Math.max(...b.events.filter((e) => e.kind === 'error' && /heartbeat/.test(e.detail)).map((e) => e.at as number));
    await eventually(() => b.events.filter((e) => e.kind === 'acquired').length === SHARDS, 60_000).catch(() => undefined);
    const taken = b.events.filter((e) => e.kind === 'acquired');
    t.equal(taken.length, SHARDS, `node-b took every shard over (${taken.length} of ${SHARDS})`);
    const first = Math.min(...taken.map((e) => e.at));
    t.ok(first - failedAt >= LEASE_MS - 500, `not before a whole period of good heartbeats (${first - failedAt} ms after the failure)`);
  },
);

t.test('a contender whose claims fail (its heartbeats succeeding) does not count that time as quiet', async (t) => {
  // node-b reaches the server through a proxy that can lose its claims (writes of shard leases).
  const { proxy, a, b } = await holderAndProxiedContender(t);
  // A election of the lease bucket seen from a contender whose heartbeats happen to fall outside it:
  // the holder's renewals stop (paused here) while the contender's claims time out.
  proxy.lose(`$KV.${LEASE_BUCKET}.shard.`);
  a.child.kill('SIGSTOP');
  const claimFailed = () => b.events.filter((e) => e.kind === 'error' && /^claim of shard/.test(e.detail));
  await eventually(() => claimFailed().length > 0, 30_000);
  proxy.lose(undefined);
  const lastFailure = Math.max(...claimFailed().map((e) => e.at as number));
  t.notOk(
    b.events.some((e) => e.kind === 'error' && /heartbeat/.test(e.detail)),
    "node-b's heartbeats all succeeded meanwhile",
  );
  await eventually(() => b.events.filter((e) => e.kind === 'acquired').length === SHARDS, 60_000).catch(() => undefined);
  const taken = b.events.filter((e) => e.kind === 'acquired');
  t.equal(taken.length, SHARDS, `node-b took every shard over (${taken.length} of ${SHARDS})`);
  const first = Math.min(...taken.map((e) => e.at));
  t.ok(
    first - lastFailure >= LEASE_MS - 500,
    `not before a whole period without a failed claim (${first - lastFailure} ms after the last, ${claimFailed().length} failed)`,
  );
});
