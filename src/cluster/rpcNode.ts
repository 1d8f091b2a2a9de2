import type { NatsConnection } from '@nats-io/transport-node';
import type { ShardForwarding } from '../http/forwarding.js';
import type { Logger } from '../log.js';
import type { Metrics } from '../ops/metrics.js';
import { connectNats } from '../scans/streams.js';
import type { OwnershipTable } from './ownershipTable.js';
import { ShardRpcClient } from './rpcClient.js';
import { ShardRpcServer, type ForwardedHandler } from './rpcServer.js';
import { StagedUploads } from './uploads.js';

/** One thread's part in shard RPC: its connection, the forwarding its HTTP server uses, and (HTTP threads) the owner's side. */
export interface ThreadRpc {
  /** The thread's connection (its control-plane writes in cluster mode use it too). */
  nc: NatsConnection;
  forwarding: ShardForwarding;
  /** Answers the forwarded requests of the shards this node owns, following the table; resolves once subscribed. */
  serve(handle: ForwardedHandler, logger: Logger): Promise<void>;
  close(): Promise<void>;
}

export async function threadRpc(
  natsUrl: string,
  name: string,
  table: OwnershipTable,
  metrics: Metrics,
  /** Copies of the staged-upload bucket (JOURNAL_REPLICAS). */
  replicas: number,
): Promise<ThreadRpc> {
  const nc: NatsConnection = await connectNats(natsUrl, name, { reconnect: true });
  const client = new ShardRpcClient(nc, (miss) =>
    metrics.inc('trackd_shard_rpc_misses_total', 'Forwarded requests that got no answer from an owner (no owner, timeout, broker away)', {
      reason: miss,
    }),
  );
  let server: ShardRpcServer | undefined;
  let unfollow: (() => void) | undefined;
  const uploads = new StagedUploads(nc, replicas);
  return {
    nc,
    forwarding: {
      isLocal: (shard) => table.isLocal(shard),
      forward: (shard, request, isRead, answerTimeoutMs) => client.forward(shard, request, isRead, answerTimeoutMs),
      uploads,
    },
    async serve(handle, logger) {
      server = new ShardRpcServer(nc, (shard) => table.isLocal(shard), handle, logger, uploads);
      const following = server;
      unfollow = table.follow((local) => following.follow(local));
      await following.flush();
    },
    async close() {
      unfollow?.();
      server?.close();
      await nc.drain().catch(() => nc.close());
    },
  };
}
