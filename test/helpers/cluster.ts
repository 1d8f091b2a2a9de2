import { startNats, startTrackd, type Teardown, type Trackd } from './trackd.js';

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
