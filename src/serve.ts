import fs from 'node:fs';
import path from 'node:path';
import type { Authenticator } from './auth/authenticator.js';
import type { Clock } from './clock.js';
import type { Config } from './config.js';
import type { InjectedRequest, InjectedResponse } from './http/inject.js';
import type { HttpServer } from './http/server.js';
import { ControlPlane } from './control/controlPlane.js';
import { loadSigningKey } from './auth/signingKey.js';
import { HttpThreads } from './http/threads.js';
import { createLogger, type Logger } from './log.js';
import { startNatsServer, type NatsServerProcess } from './nats/embedded.js';
import { Metrics } from './ops/metrics.js';
import { collectLoopAndGc, collectProcessMetrics, collectThreadBusy, type LoopClock } from './ops/processMetrics.js';
import { Readiness } from './ops/readiness.js';
import { tracePauses } from './runtime/pauseTrace.js';
import { startScanIngest, type ScanIngest } from './scans/ingest.js';
import { scanSources } from './scans/sources.js';
import type { Services } from './services.js';
import { ShardActors } from './shards/actors.js';
import type { JournalEvent } from './shards/journaled.js';
import { ClusterNode } from './cluster/node.js';
import { ShardRegistry } from './shards/registry.js';
import { StorageHealth } from './storage/health.js';
import { OwnershipTable } from './cluster/ownershipTable.js';
import { threadRpc, type ThreadRpc } from './cluster/rpcNode.js';
import { joinControlCluster } from './control/clusterControl.js';
import { misplacedOrgs, partitionedSubjects } from './scans/partition.js';

/** How often a standby looks for new journal entries of the shards it follows. */
const STANDBY_POLL_MS = 500;

export interface RunningService {
  port: number;
  natsUrl: string;
  /**
   * Answers a request without a socket, through the same pipeline as the wire, on this thread
   * (the in-process test harness; the public surface is the port).
   */
  inject(request: InjectedRequest): Promise<InjectedResponse>;
  /** Cluster mode: the shards this node serves (the lease wiring sets them; tests move them by hand). */
  ownership: OwnershipTable | undefined;
  stop(): Promise<void>;
}

export interface ServeOptions {
  /** Log to this file instead of stdout (the in-process test harness, whose stdout is TAP). */
  logFile?: string;
  /**
   * Where this thread reads the time: the shard commands it and injected requests send, and their
   * authentication (the in-process harness moves it past expiries and boundaries). The HTTP threads
   * keep the system clock; scans take their time from JetStream.
   */
  clock?: Clock;
  /**
   * A directory where each shard actor appends the records of its committed state changes as JSON
   * lines (`shard-<index>.records.jsonl`, see shards/records.ts): what a replay applies again.
   * Unset (the default): nothing is recorded and nothing is spent on it.
   */
  recordDir?: string;
}

/**
 * Starts trackd: storage, the embedded nats-server when NATS_URL is unset, one actor thread per
 * shard, the scan consumer on this (main) thread, and HTTP_THREADS HTTP threads on one port.
 */
export async function serve(config: Config, options: ServeOptions = {}): Promise<RunningService> {
  const logger = createLogger(config.LOG_LEVEL, options.logFile);
  const metrics = new Metrics();
  collectProcessMetrics(metrics);
  const stopLoopAndGc = collectLoopAndGc(metrics, 'main');
  tracePauses('main');
  fs.mkdirSync(config.DATA_DIR, { recursive: true });
  const control = await ControlPlane.open(config.DATA_DIR);
  // Cluster mode: the cluster's orgs, keys and signing key, mirrored into the control file before any thread reads it.
  const controlCluster = await joinControlCluster(config, control, { follow: true, logger }).catch((err) => {
    control.close();
    throw err;
  });
  if (partitionedSubjects(config)) {
    const misplaced = misplacedOrgs(control.listOrgs(), config.SHARDS);
    if (misplaced.length > 0) {
      await controlCluster?.stop();
      control.close();
      throw new Error(
        `SCAN_SUBJECT_PARTITIONS=on: org(s) ${misplaced.slice(0, 10).join(', ')} live on another shard than partition(${config.SHARDS}, org) maps their scans to; they were created without it, and their scans would go to another shard's consumers`,
      );
    }
  }
  // Generated here once, before any thread may race to create it.
  const signingKey = await loadSigningKey(config.DATA_DIR);
  let crashed: ((err: Error) => void) | undefined;
  const onCrash = (err: Error) => {
    logger.fatal({ err }, 'a trackd thread failed; exiting');
    logger.flush();
    crashed?.(err);
    process.exit(1);
  };
  let natsUrl = config.NATS_URL;
  const journaled = config.SHARD_JOURNAL === 'on';
  // Cluster mode (CLUSTER_NODE_ID): shards run here only while this node holds their lease (cluster/node.ts).
  let cluster: ClusterNode | undefined;
  const logJournal = journalLogger(logger);
  const actors = new ShardActors(
    config.DATA_DIR,
    (index, err) => onCrash(new Error(`shard ${index}: ${err.message}`)),
    (shard, reportIndex) =>
      logger.info({ shard, report_index: { ...reportIndex, megabytes: Math.round(reportIndex.bytes / 1e5) / 10 } }, 'shard actor started'),
    options.recordDir,
    journaled
      ? {
          settings: () => ({
            natsUrl: natsUrl!,
            replicas: config.JOURNAL_REPLICAS,
            // Placement by lease: one consumer per shard, each of which a purge of the inputs must see.
            shardConsumers: config.CLUSTER_NODE_ID !== undefined && config.CLUSTER_STATIC_SHARDS === undefined ? config.SHARDS : undefined,
          }),
          snapshots: { everyEntries: config.SNAPSHOT_EVERY_ENTRIES, everySeconds: config.SNAPSHOT_EVERY_SECONDS },
          onEvent: (shard: number, event: JournalEvent) => {
            logJournal(shard, event);
            cluster?.onJournalEvent(shard, event);
          },
        }
      : undefined,
    config.CLUSTER_NODE_ID === undefined ? undefined : { natsUrl: config.NATS_URL!, replicas: config.JOURNAL_REPLICAS },
    config.SHARD_CACHE_MB,
  );
  const readiness = Readiness.initial({ storage: true, consumer: false });
  // Cluster mode: the shards this node serves; requests for the others go to their owners (shard RPC).
  const ownership = config.CLUSTER_NODE_ID === undefined ? undefined : new OwnershipTable();
  for (const shard of config.CLUSTER_STATIC_SHARDS?.split(',') ?? []) ownership?.set(Number(shard), true);
  const isLocal = ownership === undefined ? undefined : (index: number) => ownership.isLocal(index);
  let mainRpc: ThreadRpc | undefined;
  const shards = ShardRegistry.fromConfig(config, control, actors.link(options.clock));
  const services: Services = { config, logger, metrics, control, shards, readiness, clock: options.clock, signingKey };
  services.storageHealth = new StorageHealth(config.DATA_DIR, readiness, logger);
  const http = new HttpThreads(config, logger, readiness, actors, metrics, onCrash, options.logFile, ownership?.buffer);
  collectThreadBusy(metrics, () => [
    ['main', performance],
    ...[...http.workers(), ...actors.workers()].map(([name, worker]): [string, LoopClock] => [name, worker.performance]),
  ]);

  let embedded: NatsServerProcess | undefined;
  let ingest: ScanIngest | undefined;
  let port: number;
  const startBroker = async () => {
    if (natsUrl !== undefined) return;
    embedded = await startNatsServer({
      storeDir: path.join(config.DATA_DIR, 'nats'),
      mqttPort: config.MQTT_PORT ?? 0,
      serverName: 'trackd-embedded',
    });
    natsUrl = embedded.url;
    fs.writeFileSync(path.join(config.DATA_DIR, 'nats.url'), `${natsUrl}\n`);
    fs.writeFileSync(path.join(config.DATA_DIR, 'mqtt.url'), `mqtt://127.0.0.1:${embedded.mqttPort}\n`);
    logger.info({ nats_url: natsUrl, mqtt_port: embedded.mqttPort }, 'embedded nats-server started');
  };
  try {
    // Journaled shards reconcile with their journal before they serve: the broker comes first.
    if (journaled) await startBroker();
    await shards.openAll(config.SHARDS, isLocal);
    if (ownership !== undefined)
      mainRpc = await threadRpc(config.NATS_URL!, 'trackd-rpc-main', ownership, metrics, config.JOURNAL_REPLICAS);
    // The HTTP threads boot (module loading, connections) while the broker and the consumer start.
    const threadsReady = http.start(config.HTTP_THREADS);
    threadsReady.catch(() => undefined);
    await startBroker();
    const retentionMs = config.EVENT_RETENTION_SECONDS * 1000;
    // Pruned about ten times per retention (at most every minute), so the log holds at most a tenth more.
    actors.relayEvents({
      natsUrl: natsUrl!,
      retentionMs,
      pruneEveryMs: Math.max(100, Math.min(60_000, retentionMs / 10)),
      replicas: config.JOURNAL_REPLICAS,
      webhooks: {
        allowedCidrs: config.WEBHOOK_ALLOWED_CIDRS,
        retryWindowMs: config.WEBHOOK_RETRY_WINDOW_SECONDS * 1000,
        retryFirstMs: config.WEBHOOK_RETRY_FIRST_MS,
        retryMaxMs: config.WEBHOOK_RETRY_MAX_MS,
        timeoutMs: config.WEBHOOK_TIMEOUT_MS,
      },
    });
    // The consumer starts once HTTP can follow at once: a backlog drains in plain view of /metrics.
    await threadsReady;
    // Static placement (CLUSTER_STATIC_SHARDS, tests and trials) consumes as one node does; placement by lease runs ClusterNode.
    if (config.CLUSTER_NODE_ID === undefined || config.CLUSTER_STATIC_SHARDS !== undefined)
      ingest = await startScanIngest(services, natsUrl!, scanSources);
    else
      cluster = await ClusterNode.start(
        {
          nodeId: config.CLUSTER_NODE_ID,
          shards: config.SHARDS,
          leaseMs: config.LEASE_SECONDS * 1000,
          replicas: config.JOURNAL_REPLICAS,
          natsUrl: natsUrl!,
          standbys: config.CLUSTER_STANDBYS === 'on' ? { dataDir: config.DATA_DIR, pollMs: STANDBY_POLL_MS } : undefined,
          rebalanceMs: config.CLUSTER_REBALANCE_SECONDS * 1000,
        },
        services,
        actors,
        scanSources,
        ownership!,
      );
    port = await http.listenAll();
  } catch (err) {
    // Leave nothing behind (the embedded nats-server is a child process that would outlive us).
    await http.stop().catch(() => undefined);
    await ingest?.stop().catch(() => undefined);
    await cluster?.stop().catch(() => undefined);
    await embedded?.stop();
    await mainRpc?.close();
    stopLoopAndGc();
    await shards.closeAll();
    await actors.closeAll();
    await controlCluster?.stop();
    control.close();
    throw err;
  }
  fs.writeFileSync(
    path.join(config.DATA_DIR, 'http.url'),
    `http://${config.HOST.includes(':') ? `[${config.HOST}]` : config.HOST}:${port}\n`,
  );
  // The one line an operator needs to find the port, printed at any level but silent (http.url has it too).
  const announcer = logger.isLevelEnabled('info') || config.LOG_LEVEL === 'silent' ? logger : logger.child({}, { level: 'info' });
  announcer.info(
    {
      port,
      host: config.HOST,
      data_dir: config.DATA_DIR,
      shards: config.SHARDS,
      http_threads: config.HTTP_THREADS,
      ...(config.CLUSTER_NODE_ID === undefined ? {} : { cluster_node: config.CLUSTER_NODE_ID }),
    },
    'listening',
  );

  // Built on first use, so that a served process never loads the HTTP modules on its main thread.
  let injector: Promise<{ server: HttpServer; authenticator: Authenticator }> | undefined;
  const injectRequest = async (request: InjectedRequest) => {
    injector ??= (async () => {
      const [{ createHttpServer }, { Authenticator }] = await Promise.all([import('./http/app.js'), import('./auth/authenticator.js')]);
      const authenticator = new Authenticator(control, signingKey, config.TRACKD_ENV, logger, options.clock);
      const server = createHttpServer(
        { ...services, scrapeMetrics: () => http.scrape(), forwarding: mainRpc?.forwarding },
        authenticator,
        http.rateLimit,
      );
      return { server, authenticator };
    })();
    return (await injector).server.inject(request);
  };

  let stopping: Promise<void> | undefined;
  const stop = () =>
    (stopping ??= (async () => {
      logger.info('shutting down');
      if (injector !== undefined) {
        const { server, authenticator } = await injector;
        await server.stop();
        authenticator.close();
      }
      await http.stop();
      await mainRpc?.close();
      // The rest of the stop runs even if the consumer's did not (the shards close after their last batch).
      await ingest?.stop().catch((err) => logger.warn({ err }, 'the scan consumer did not stop cleanly'));
      // Consumers and actors of the shards served here stop, then their leases are released.
      await cluster?.stop().catch((err) => logger.warn({ err }, 'the cluster node did not stop cleanly'));
      await shards.closeAll();
      await actors.closeAll();
      services.storageHealth?.close();
      await controlCluster?.stop();
      control.close();
      await embedded?.stop();
      stopLoopAndGc();
      logger.info('stopped');
      logger.flush();
    })());
  crashed = () => void embedded?.stop();
  return { port, natsUrl: natsUrl!, inject: injectRequest, ownership, stop };
}

/** The journal's events of each shard actor, as log lines. */
function journalLogger(logger: Logger): (shard: number, event: JournalEvent) => void {
  return (shard, event) => {
    const { kind, ...fields } = event;
    if (kind === 'fenced' || kind === 'rebased') logger.error({ shard, ...fields }, `shard journal ${kind}`);
    else if (kind === 'recovering' || kind === 'snapshot failed' || kind === 'set aside')
      logger.warn({ shard, ...fields }, `shard journal ${kind}`);
    else logger.info({ shard, ...fields }, `shard journal ${kind}`);
  };
}
