/**
 * One HTTP thread: its own uWS App on the shared port, its own authenticator, read connections and
 * caches; writes go to the shard actors through mailboxes of its own; metrics and readiness are the
 * process's (shared memory, or merged on scrape by the main thread).
 */
import { parentPort, workerData, type MessagePort } from 'node:worker_threads';
import { Authenticator } from '../auth/authenticator.js';
import { loadSigningKey } from '../auth/signingKey.js';
import type { Config } from '../config.js';
import { ControlPlane } from '../control/controlPlane.js';
import { createLogger } from '../log.js';
import { Metrics, type MetricsSnapshot } from '../ops/metrics.js';
import { collectLoopAndGc, collectProcessMetrics } from '../ops/processMetrics.js';
import { Readiness } from '../ops/readiness.js';
import type { Services } from '../services.js';
import { unavailable } from '../errors/domain.js';
import { ShardGenerations } from '../shards/generations.js';
import { PortMailbox } from '../shards/mailbox.js';
import { ShardRegistry } from '../shards/registry.js';
import { StorageHealth } from '../storage/health.js';
import { loadSqlBuilder } from '../storage/sqlite.js';
import { readerOverlayOf, warmReaderOverlay } from '../scans/rereadLog.js';
import type { rateLimitBuffers } from './rateLimit.js';
import { OwnershipTable } from '../cluster/ownershipTable.js';
import { threadRpc, type ThreadRpc } from '../cluster/rpcNode.js';
import { ControlKv } from '../control/controlKv.js';
import { createHttpServer } from './app.js';
import { nameThread } from '../runtime/threadPriority.js';
import { tracePauses } from '../runtime/pauseTrace.js';

export interface HttpWorkerData {
  config: Config;
  thread: number;
  readiness: SharedArrayBuffer;
  rateLimit: ReturnType<typeof rateLimitBuffers>;
  /** Where the thread logs (default: stdout). */
  logFile?: string;
  /** Cluster mode: the node's OwnershipTable (which shards it serves; the others are forwarded). */
  ownership?: SharedArrayBuffer;
}

export type ToHttpWorker =
  | { type: 'listen'; port: number }
  | { type: 'link'; request: number; port: MessagePort; generations: SharedArrayBuffer }
  | { type: 'link refused'; request: number; detail: string }
  | { type: 'scraped'; request: number; text: string }
  | { type: 'snapshot'; request: number }
  | { type: 'stop' };

export type FromHttpWorker =
  | { type: 'ready' }
  | { type: 'listening'; port: number }
  | { type: 'failed'; message: string }
  | { type: 'link'; request: number; index: number }
  | { type: 'scrape'; request: number }
  | { type: 'snapshot'; request: number; snapshot: MetricsSnapshot }
  | { type: 'stopped' };

const data = workerData as HttpWorkerData;
const parent = parentPort!;
const post = (message: FromHttpWorker) => parent.postMessage(message);
const { config } = data;
tracePauses(`http-${data.thread}`);
nameThread(`http-${data.thread}`);

const logger = createLogger(config.LOG_LEVEL, data.logFile).child({ thread: `http-${data.thread}` });
const metrics = new Metrics();
collectProcessMetrics(metrics, { wholeProcess: false });
const stopLoopAndGc = collectLoopAndGc(metrics, `http-${data.thread}`);

/** Requests to the main thread awaiting its answer, by request number. */
const waiting = new Map<number, (message: ToHttpWorker) => void>();
let nextRequest = 1;
function ask(message: FromHttpWorker & { request: number }): Promise<ToHttpWorker> {
  return new Promise((resolve) => {
    waiting.set(message.request, resolve);
    post(message);
  });
}
/** Commands of the main thread, handled once the server is built. */
let command: ((message: ToHttpWorker) => void) | undefined;
parent.on('message', (message: ToHttpWorker) => {
  if (message.type === 'link' || message.type === 'link refused' || message.type === 'scraped') {
    const resolve = waiting.get(message.request);
    waiting.delete(message.request);
    resolve?.(message);
  } else command?.(message);
});

try {
  const control = await ControlPlane.open(config.DATA_DIR);
  const signingKey = await loadSigningKey(config.DATA_DIR);
  const authenticator = new Authenticator(control, signingKey, config.TRACKD_ENV, logger);
  const shards = ShardRegistry.fromConfig(config, control, async (index, onGone) => {
    const answer = await ask({ type: 'link', request: nextRequest++, index });
    if (answer.type === 'link refused') throw unavailable(answer.detail, 1);
    if (answer.type !== 'link') throw new Error('unexpected answer to a shard link request');
    return { mailbox: new PortMailbox(answer.port, undefined, onGone), generations: new ShardGenerations(answer.generations) };
  });
  const ownership = data.ownership === undefined ? undefined : new OwnershipTable(data.ownership);
  await shards.openAll(config.SHARDS, ownership === undefined ? undefined : (index) => ownership.isLocal(index));
  const rpc: ThreadRpc | undefined =
    ownership === undefined
      ? undefined
      : await threadRpc(config.NATS_URL!, `trackd-rpc-http-${data.thread}`, ownership, metrics, config.JOURNAL_REPLICAS);
  // Cluster mode: the console's key writes go to the cluster's bucket (the main thread mirrors it into the file).
  if (rpc !== undefined) control.useKv(await ControlKv.open(rpc.nc, config.JOURNAL_REPLICAS));
  const readiness = new Readiness(data.readiness);
  const services: Services = {
    config,
    logger,
    metrics,
    control,
    shards,
    readiness,
    signingKey,
    forwarding: rpc?.forwarding,
    scrapeMetrics: async () => {
      const answer = await ask({ type: 'scrape', request: nextRequest++ });
      return answer.type === 'scraped' ? answer.text : '';
    },
  };
  services.storageHealth = new StorageHealth(config.DATA_DIR, readiness, logger);
  const http = createHttpServer(services, authenticator, data.rateLimit);
  await rpc?.serve((request) => http.serveForwarded(request), logger);

  command = (message) => {
    switch (message.type) {
      case 'listen':
        http.listen(message.port).then(
          (port) => post({ type: 'listening', port }),
          (err: Error) => post({ type: 'failed', message: err.message }),
        );
        break;
      case 'snapshot':
        post({ type: 'snapshot', request: message.request, snapshot: metrics.snapshot() });
        break;
      case 'stop':
        void (async () => {
          await http.stop();
          await rpc?.close();
          await shards.closeAll();
          authenticator.close();
          services.storageHealth?.close();
          control.close();
          stopLoopAndGc();
          logger.flush();
          post({ type: 'stopped' });
        })();
        break;
    }
  };
  loadSqlBuilder();
  for (const shard of shards.all()) {
    const started = performance.now();
    const assets = warmReaderOverlay(shard);
    logger.debug({ shard: shard.index, assets, ms: Math.round(performance.now() - started) }, 're-read log read');
  }
  metrics.onCollect(() => {
    for (const shard of shards.all())
      if (shard.reader.open)
        metrics.set(
          'trackd_reread_overlay_assets',
          'Assets whose latest logged re-read this HTTP thread holds for the shard (it follows the log between requests)',
          { thread: `http-${data.thread}`, shard: shard.index },
          readerOverlayOf(shard).heldAssets(),
        );
  });
  post({ type: 'ready' });
} catch (err) {
  // The main thread then stops every thread; one that failed has nothing to stop but must still say so,
  // or the failed start waits for it forever instead of reporting why (a route table error did that).
  command = (message) => {
    if (message.type === 'stop') post({ type: 'stopped' });
  };
  post({ type: 'failed', message: (err as Error).message });
}
