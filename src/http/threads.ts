import net from 'node:net';
import { Worker, type TransferListItem } from 'node:worker_threads';
import type { Config } from '../config.js';
import { freePort } from '../nats/embedded.js';
import type { Logger } from '../log.js';
import { Metrics, type MetricsSnapshot } from '../ops/metrics.js';
import type { Readiness } from '../ops/readiness.js';
import { NotServedHere, type ShardActors } from '../shards/actors.js';
import { rateLimitBuffers } from './rateLimit.js';
import type { FromHttpWorker, HttpWorkerData, ToHttpWorker } from './worker.js';
import { threadFile } from '../runtime/threadFile.js';

interface Thread {
  worker: Worker;
  /** Resolves the next answer of a kind this thread sends once (ready, listening, stopped). */
  next: Map<string, (message: FromHttpWorker) => void>;
}

/**
 * The HTTP threads of the process, run from the main thread: N workers, each with its own uWS App
 * on one port (SO_REUSEPORT: the kernel spreads connections over them). The main thread links them
 * to shard actors on request, merges their metrics on scrape and stops them on shutdown.
 */
export class HttpThreads {
  private readonly threads: Thread[] = [];
  private nextRequest = 1;
  private readonly snapshots = new Map<number, (snapshot: MetricsSnapshot) => void>();
  /** The process's one rate-limit table: every thread (and the in-process injector) takes from the same budgets. */
  readonly rateLimit = rateLimitBuffers();

  constructor(
    private readonly config: Config,
    private readonly logger: Logger,
    private readonly readiness: Readiness,
    private readonly actors: ShardActors,
    private readonly mainMetrics: Metrics,
    private readonly onCrash: (err: Error) => void,
    private readonly logFile?: string,
    /** Cluster mode: the node's OwnershipTable buffer, shared with every thread. */
    private readonly ownership?: SharedArrayBuffer,
  ) {}

  /** Starts the threads (each loads its modules, opens its connections and builds its routes) without listening yet. */
  async start(count: number): Promise<void> {
    for (let i = 0; i < count; i++) {
      const workerData: HttpWorkerData = {
        config: this.config,
        thread: i,
        readiness: this.readiness.buffer,
        rateLimit: this.rateLimit,
        logFile: this.logFile,
        ownership: this.ownership,
      };
      const worker = new Worker(threadFile('http/worker.js'), { workerData, name: `http-${i}` });
      const thread: Thread = { worker, next: new Map() };
      worker.on('message', (message: FromHttpWorker) => this.onMessage(thread, message));
      worker.on('error', (err) => this.onCrash(err));
      worker.on('exit', () => {
        for (const resolve of thread.next.values()) resolve({ type: 'stopped' });
        thread.next.clear();
      });
      this.threads.push(thread);
    }
    await Promise.all(this.threads.map((t) => this.expect(t, 'ready')));
  }

  /** Has every thread listen on one port; resolves with it. */
  async listenAll(): Promise<number> {
    const port = await this.listenFirst();
    await Promise.all(this.threads.slice(1).map((t) => this.listen(t, port)));
    return port;
  }

  /**
   * The first thread binds, the others then join its port. A socket the kernel bound to a port of
   * its choice (port 0) does not let others join it with SO_REUSEPORT (measured: the second listen
   * fails), so for PORT=0 a free port is chosen here first and bound explicitly, retried should
   * another process take it in between.
   */
  private firstThread(): Thread {
    const [first] = this.threads;
    if (first === undefined) throw new Error('no HTTP thread started');
    return first;
  }

  private async listenFirst(): Promise<number> {
    if (this.config.PORT !== 0) {
      // uWS listens with SO_REUSEPORT (so that the threads share the port), which would also let a
      // second trackd join a port already served and split the clients between two services. A plain
      // bind first, without that option, fails on any port another process is listening on.
      await assertPortFree(this.config.HOST, this.config.PORT);
      return this.listen(this.firstThread(), this.config.PORT);
    }
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.listen(this.firstThread(), await freePort(this.config.HOST));
      } catch (err) {
        if (attempt >= 5) throw err;
      }
    }
  }

  private async listen(thread: Thread, port: number): Promise<number> {
    const answer = this.expect(thread, 'listening');
    this.post(thread, { type: 'listen', port });
    const message = await answer;
    return (message as { port: number }).port;
  }

  /** The next message of `type` from the thread; a `failed` message rejects. */
  private expect(thread: Thread, type: 'ready' | 'listening' | 'stopped'): Promise<FromHttpWorker> {
    return new Promise((resolve, reject) => {
      thread.next.set(type, resolve);
      thread.next.set('failed', (m) => reject(new Error((m as { message: string }).message)));
    });
  }

  private post(thread: Thread, message: ToHttpWorker, transfer?: TransferListItem[]): void {
    thread.worker.postMessage(message, transfer);
  }

  private onMessage(thread: Thread, message: FromHttpWorker): void {
    switch (message.type) {
      case 'link':
        this.actors.connect(message.index).then(
          ({ port, generations }) => this.post(thread, { type: 'link', request: message.request, port, generations }, [port]),
          (err: Error) =>
            // Not served here (cluster mode: not this node's shard): that request answers 503; anything else is a crash.
            err instanceof NotServedHere
              ? this.post(thread, { type: 'link refused', request: message.request, detail: err.message })
              : this.onCrash(err),
        );
        break;
      case 'scrape':
        void this.scrape().then((text) => this.post(thread, { type: 'scraped', request: message.request, text }));
        break;
      case 'snapshot':
        this.snapshots.get(message.request)?.(message.snapshot);
        this.snapshots.delete(message.request);
        break;
      default: {
        const resolve = thread.next.get(message.type);
        thread.next.delete(message.type);
        resolve?.(message);
      }
    }
  }

  /** The worker of each HTTP thread, by thread name (for per-thread CPU figures). */
  workers(): [string, Worker][] {
    return this.threads.map((t, i) => [`http-${i}`, t.worker]);
  }

  /** The whole process's metrics: the main thread's and every HTTP thread's, merged. */
  async scrape(): Promise<string> {
    const snapshots = await Promise.all(
      this.threads.map(
        (thread) =>
          new Promise<MetricsSnapshot>((resolve) => {
            const request = this.nextRequest++;
            this.snapshots.set(request, resolve);
            this.post(thread, { type: 'snapshot', request });
          }),
      ),
    );
    return Metrics.renderMerged([this.mainMetrics.snapshot(), ...snapshots]);
  }

  /** Each thread stops accepting, finishes its requests in flight and closes; then the workers end. */
  async stop(): Promise<void> {
    await Promise.all(
      this.threads.map(async (thread) => {
        const stopped = this.expect(thread, 'stopped').catch(() => undefined);
        this.post(thread, { type: 'stop' });
        await stopped;
        await thread.worker.terminate();
      }),
    );
    this.logger.debug({ threads: this.threads.length }, 'http threads stopped');
  }
}

/** Throws when `port` on `host` cannot be bound (another process listens on it). */
function assertPortFree(host: string, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', (err: NodeJS.ErrnoException) =>
      reject(
        new Error(
          err.code === 'EADDRINUSE'
            ? `cannot listen on ${host}:${port}: the port is in use by another process`
            : `cannot listen on ${host}:${port}: ${err.message}`,
        ),
      ),
    );
    server.listen({ port, host, exclusive: true }, () => server.close(() => resolve()));
  });
}
