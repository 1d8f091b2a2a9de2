import fs from 'node:fs';
import path from 'node:path';
import type { Config } from './config.js';
import { ControlPlane } from './control/controlPlane.js';
import { Authenticator } from './auth/authenticator.js';
import { loadSigningKey } from './auth/signingKey.js';
import { HttpServer } from './http/server.js';
import { createLogger } from './log.js';
import { startNatsServer, type NatsServerProcess } from './nats/embedded.js';
import { Metrics } from './ops/metrics.js';
import { collectProcessMetrics } from './ops/processMetrics.js';
import { allRoutes } from './routes.js';
import { readersSource } from './readers/source.js';
import { startScanIngest, type ScanIngest } from './scans/ingest.js';
import { scansSource } from './scans/source.js';
import type { Services } from './services.js';
import { ShardRegistry } from './shards/registry.js';
import { StorageHealth } from './storage/health.js';

export interface RunningService {
  port: number;
  natsUrl: string;
  stop(): Promise<void>;
}

/** Starts trackd: storage, the embedded nats-server when NATS_URL is unset, the consumer and HTTP. */
export async function serve(config: Config): Promise<RunningService> {
  const logger = createLogger(config.LOG_LEVEL);
  const metrics = new Metrics();
  collectProcessMetrics(metrics);
  fs.mkdirSync(config.DATA_DIR, { recursive: true });
  const control = await ControlPlane.open(config.DATA_DIR);
  const signingKey = await loadSigningKey(config.DATA_DIR);
  const authenticator = new Authenticator(control, signingKey, config.TRACKD_ENV, logger);
  const shards = new ShardRegistry(config.DATA_DIR, control);
  await shards.openAll(config.SHARDS);
  const services: Services = { config, logger, metrics, control, shards, readiness: { storage: true, consumer: false } };
  services.storageHealth = new StorageHealth(config.DATA_DIR, services.readiness, logger);

  let embedded: NatsServerProcess | undefined;
  let natsUrl = config.NATS_URL;
  if (natsUrl === undefined) {
    embedded = await startNatsServer({ storeDir: path.join(config.DATA_DIR, 'nats'), mqttPort: config.MQTT_PORT ?? 0, serverName: 'trackd-embedded' });
    natsUrl = embedded.url;
    fs.writeFileSync(path.join(config.DATA_DIR, 'nats.url'), `${natsUrl}\n`);
    fs.writeFileSync(path.join(config.DATA_DIR, 'mqtt.url'), `mqtt://127.0.0.1:${embedded.mqttPort}\n`);
    logger.info({ nats_url: natsUrl, mqtt_port: embedded.mqttPort }, 'embedded nats-server started');
  }

  const http = new HttpServer({
    host: config.HOST,
    port: config.PORT,
    logger,
    metrics,
    authenticator,
    rateLimitPerMinute: config.RATE_LIMIT_PER_MIN,
    shards,
    storageHealth: services.storageHealth,
    responseCacheBytes: config.RESPONSE_CACHE_MB * 1024 * 1024,
  });
  http.addRoutes(allRoutes(services));
  let ingest: ScanIngest | undefined;
  let port: number;
  try {
    ingest = await startScanIngest(services, natsUrl, [scansSource, readersSource]);
    port = await http.listen();
  } catch (err) {
    // Leave nothing behind (the embedded nats-server is a child process that would outlive us).
    await ingest?.stop().catch(() => undefined);
    await embedded?.stop();
    await shards.closeAll();
    authenticator.close();
    control.close();
    throw err;
  }
  logger.info({ port, host: config.HOST, data_dir: config.DATA_DIR, shards: config.SHARDS }, 'listening');

  let stopping: Promise<void> | undefined;
  const stop = () =>
    (stopping ??= (async () => {
      logger.info('shutting down');
      await http.stop();
      await ingest?.stop();
      await shards.closeAll();
      authenticator.close();
      services.storageHealth?.close();
      control.close();
      await embedded?.stop();
      logger.info('stopped');
      logger.flush();
    })());
  return { port, natsUrl, stop };
}
