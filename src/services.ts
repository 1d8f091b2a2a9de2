import type { SigningKey } from './auth/signingKey.js';
import type { Clock } from './clock.js';
import type { Config } from './config.js';
import type { ControlPlane } from './control/controlPlane.js';
import type { Logger } from './log.js';
import type { Metrics } from './ops/metrics.js';
import type { ShardRegistry } from './shards/registry.js';
import type { StorageHealth } from './storage/health.js';
import type { ShardForwarding } from './http/forwarding.js';

/** What feature modules are built from. */
export interface Services {
  config: Config;
  logger: Logger;
  metrics: Metrics;
  control: ControlPlane;
  shards: ShardRegistry;
  /** Readiness inputs for /readyz: each part sets its own flag (shared by every thread of the process). */
  readiness: { storage: boolean; consumer: boolean };
  /** Where this thread reads the time (default: the system clock). */
  clock?: Clock;
  /** The Prometheus text of the whole process (every thread's series); defaults to this thread's registry. */
  scrapeMetrics?: () => Promise<string>;
  /** Turns storage failures (disk full, read-only) into readiness 503 and a 503 answer. */
  storageHealth?: StorageHealth;
  /** The installation's token-signing key: the console mints sessions and API keys with it (absent: no console). */
  signingKey?: SigningKey;
  /** Cluster mode: how requests reach the shards other nodes own (shard RPC). */
  forwarding?: ShardForwarding;
}
