import type { Config } from '../config.js';
import type { Logger } from '../log.js';
import { connectNats, jetStreamReady, whileJetStreamElects } from '../scans/streams.js';
import { ControlKv } from './controlKv.js';
import { startControlMirror } from './controlMirror.js';
import type { ControlPlane } from './controlPlane.js';

export interface ControlCluster {
  stop(): Promise<void>;
}

/**
 * Cluster mode (CLUSTER_NODE_ID): joins `control` to the cluster's control plane. DATA_DIR's
 * signing key becomes the cluster's (before any thread loads it), the file is brought up to date
 * with the bucket, and writes go to the bucket from then on. `follow`: keep mirroring until
 * stopped (a serving node); without it, a one-shot catch-up (the CLI). Undefined in single-node mode.
 */
export async function joinControlCluster(
  config: Config,
  control: ControlPlane,
  options: { follow: boolean; logger?: Logger },
): Promise<ControlCluster | undefined> {
  if (config.CLUSTER_NODE_ID === undefined) return undefined;
  const nc = await connectNats(config.NATS_URL!, `trackd-control-${config.CLUSTER_NODE_ID}`, { reconnect: options.follow });
  try {
    await jetStreamReady(nc);
    const kv = await whileJetStreamElects(() => ControlKv.open(nc, config.JOURNAL_REPLICAS));
    if (await whileJetStreamElects(() => kv.shareSigningKey(config.DATA_DIR)))
      options.logger?.warn("this node's token-signing key was replaced by the cluster's: keys minted by it alone no longer verify");
    const mirror = await startControlMirror(nc, kv, control, options.logger);
    if (!options.follow) await mirror.stop();
    control.useKv(kv);
    return {
      async stop() {
        if (options.follow) await mirror.stop();
        await nc.drain().catch(() => nc.close());
      },
    };
  } catch (err) {
    await nc.close();
    throw err;
  }
}
