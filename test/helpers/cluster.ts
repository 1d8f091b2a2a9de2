import { spawnSync } from 'node:child_process';
import type { NatsConnection } from '@nats-io/transport-node';
import { LEASE_BUCKET } from '../../src/cluster/leaseBucket.js';
import { BIN, startNats, startTrackd, type Teardown, type Trackd } from './trackd.js';

/** The `trackd` CLI run against `env` (DATA_DIR among it): its parsed JSON output; throws with its stderr. */
export function trackdCli(env: Record<string, string>, args: string[]): any {
  const r = spawnSync(process.execPath, [BIN, ...args], { env: { ...process.env, ...env }, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`trackd ${args.join(' ')}: ${r.stderr}`);
  return JSON.parse(r.stdout);
}

/** An org of a cluster test: one asset with one tag, whose scans alternate between L1 and L2. */
export interface ClusterOrg {
  id: number;
  shard: number;
  token: string;
  assetId: number;
  tag: string;
  published: number;
}

/** One org per shard (orgs are numbered onto shards), with a key for master data and tracking, made by the CLI in `env`'s DATA_DIR. */
export function orgPerShard(env: Record<string, string>, shards: number, tagPrefix: string): ClusterOrg[] {
  const orgs: ClusterOrg[] = [];
  for (let shard = 0; shard < shards; shard++) {
    const org = trackdCli(env, ['orgs', 'create', '--name', `Org ${shard}`]);
    const key = trackdCli(env, [
      'keys',
      'create',
      '--org',
      String(org.id),
      '--name',
      'cluster',
      '--scopes',
      'assets:read,assets:write,locations:read,locations:write,tracking:read',
    ]);
    orgs.push({
      id: org.id,
      shard: org.shard ?? (org.id - 1) % shards,
      token: key.token,
      assetId: 0,
      tag: `rfid:${tagPrefix}-${shard}`,
      published: 0,
    });
  }
  return orgs;
}

/**
 * Two trackd nodes in cluster mode on one nats-server, each with its own DATA_DIR, two shards, one
 * HTTP thread: node A serves shard 0, node B shard 1 (CLUSTER_STATIC_SHARDS).
 */
export async function startTwoNodes(t: Teardown, natsConfig: string[] = []): Promise<{ a: Trackd; b: Trackd; natsUrl: string }> {
  const nats = await startNats(t, { extraConfig: natsConfig });
  const node = (id: string, shard: number) =>
    startTrackd(t, {
      natsUrl: nats.url,
      env: { CLUSTER_NODE_ID: id, CLUSTER_STATIC_SHARDS: String(shard), SHARDS: '2', HTTP_THREADS: '1' },
    });
  return { a: await node('node-a', 0), b: await node('node-b', 1), natsUrl: nats.url };
}

/** The shards a node serves now, from its /metrics (trackd_cluster_shard_served), ascending. */
export function served(node: Trackd): Promise<number[]> {
  return shardsFlagged(node, 'trackd_cluster_shard_served');
}

/** The shards a node is the standby of now, from its /metrics (trackd_cluster_shard_standby), ascending. */
export function standbyShards(node: Trackd): Promise<number[]> {
  return shardsFlagged(node, 'trackd_cluster_shard_standby');
}

async function shardsFlagged(node: Trackd, metric: string): Promise<number[]> {
  const res = await node.http('GET', '/metrics');
  const pattern = new RegExp(`^${metric}\\{shard="(\\d+)",node="[^"]+"\\} 1$`);
  const shards: number[] = [];
  for (const line of res.text.split('\n')) {
    const m = pattern.exec(line);
    if (m) shards.push(Number(m[1]));
  }
  return shards.sort((a, b) => a - b);
}

/** A write of a shard's lease as the lease bucket's stream took it, and when a watching client saw it. */
export interface LeaseWrite {
  at: number;
  shard: number;
  node: string;
}

/** Every write of a shard lease from now on, in the order seen (a plain subscription to the bucket's subjects). */
export async function watchLeases(t: Teardown, nc: NatsConnection): Promise<LeaseWrite[]> {
  const writes: LeaseWrite[] = [];
  const sub = nc.subscribe(`$KV.${LEASE_BUCKET}.shard.*`, {
    callback: (_err, msg) => {
      if (msg) writes.push({ at: Date.now(), shard: Number(msg.subject.split('.').pop()), node: msg.json<{ node: string }>().node });
    },
  });
  t.teardown(() => sub.unsubscribe());
  await nc.flush();
  return writes;
}

/**
 * How long a shard's lease stood still between `from`'s last write of it and `to`'s claim: a takeover
 * must come a lease period after the holder's last renewal, which a pause or kill can follow by up to
 * a renewal interval (so it is not measured from the pause). -1 when either write is missing.
 */
export function quietBeforeClaim(writes: LeaseWrite[], shard: number, from: string, to: string): number {
  const claim = writes.find((w) => w.shard === shard && w.node === to);
  if (claim === undefined) return -1;
  const renewal = writes.filter((w) => w.shard === shard && w.node === from && w.at <= claim.at).pop();
  return renewal === undefined ? -1 : claim.at - renewal.at;
}
