import { MessageChannel, Worker, type MessagePort } from 'node:worker_threads';
import type { Clock } from '../clock.js';
import { ShardGenerations } from './generations.js';
import type { JournalSettings } from './journal.js';
import type { JournalEvent } from './journaled.js';
import { PortMailbox } from './mailbox.js';
import type { RelaySettings } from '../events/relay.js';
import type { SnapshotPolicy } from './snapshotSchedule.js';
import type { ActorLink } from './registry.js';
import type { FromShardWorker, ReportIndexFigures, ShardWorkerData, ToShardWorker } from './worker.js';
import { threadFile } from '../runtime/threadFile.js';

interface Actor {
  worker: Worker;
  generations: SharedArrayBuffer;
}

/** A new mailbox port to a shard actor, with its generation counters: what any thread needs to reach it. */
export interface ActorPort {
  port: MessagePort;
  generations: SharedArrayBuffer;
}

/** A shard this process does not serve now (cluster mode: another node owns it, or it is starting or stopping here). */
export class NotServedHere extends Error {
  override name = 'NotServedHere';
}

/**
 * The process's shard actors, each on its own worker thread (started on first use). Any thread may
 * be connected to an actor: it gets a MessagePort of its own (its mailbox) and the actor's shared
 * generation counters.
 */
export class ShardActors {
  private readonly actors = new Map<number, Promise<Actor>>();
  private readonly started = new Map<number, Worker>();
  private relaySettings: RelaySettings | undefined;
  /** Cluster mode: the shards this node may run (its leases); undefined: every shard (one node). */
  private admitted: Set<number> | undefined;

  constructor(
    private readonly dataDir: string,
    private readonly onCrash: (index: number, err: Error) => void,
    private readonly onStarted: (index: number, reportIndex: ReportIndexFigures) => void = () => {},
    private readonly recordDir?: string,
    /** Journal every commit (settings read when an actor starts: the broker may start after this object). */
    private readonly journal?: {
      settings: () => JournalSettings;
      snapshots?: SnapshotPolicy;
      onEvent: (index: number, event: JournalEvent) => void;
    },
    /** Cluster mode: where the actors reserve id blocks (the cluster's control bucket). */
    private readonly clusterIds?: ShardWorkerData['clusterIds'],
    /** SHARD_CACHE_MB: the page cache of each actor's writing connection. */
    private readonly cacheMb?: number,
  ) {}

  private start(index: number): Promise<Actor> {
    let actor = this.actors.get(index);
    if (actor === undefined) {
      actor = new Promise<Actor>((resolve, reject) => {
        const generations = new ShardGenerations().buffer;
        const workerData: ShardWorkerData = {
          dataDir: this.dataDir,
          index,
          generations,
          recordDir: this.recordDir,
          journal: this.journal?.settings(),
          snapshots: this.journal?.snapshots,
          clusterIds: this.clusterIds,
          cacheMb: this.cacheMb,
        };
        const worker = new Worker(threadFile('shards/worker.js'), { workerData, name: `shard-${index}` });
        let started = false;
        worker.on('message', (message: FromShardWorker) => {
          if (message.type === 'journal') this.journal?.onEvent(index, message.event);
          else if (message.type === 'ready') {
            started = true;
            this.onStarted(index, message.reportIndex);
            this.started.set(index, worker);
            if (this.relaySettings !== undefined)
              worker.postMessage({ type: 'relay', settings: this.relaySettings } satisfies ToShardWorker);
            resolve({ worker, generations });
          } else if (message.type === 'failed') reject(new Error(`shard ${index}: ${message.message}`));
        });
        worker.on('error', (err) => (started ? this.onCrash(index, err) : reject(err)));
      });
      this.actors.set(index, actor);
    }
    return actor;
  }

  /** Starts each actor's event relay (events/relay.ts), now for the started ones and at start for the others. */
  relayEvents(settings: RelaySettings): void {
    this.relaySettings = settings;
    for (const worker of this.started.values()) worker.postMessage({ type: 'relay', settings } satisfies ToShardWorker);
  }

  /** The worker of each started actor, by thread name (for per-thread CPU figures). */
  workers(): [string, Worker][] {
    return [...this.started].map(([index, worker]) => [`shard-${index}`, worker]);
  }

  /** From now on only shards admitted by `admit` start or connect (cluster mode); the others are NotServedHere. */
  admitOnly(): void {
    this.admitted ??= new Set();
  }

  /** Lets shard `index` start and connect (its lease is held). */
  admit(index: number): void {
    this.admitted?.add(index);
  }

  /** The shards admitted now, ascending (cluster mode; every started one otherwise). */
  admittedShards(): number[] {
    return [...(this.admitted ?? this.started.keys())].sort((a, b) => a - b);
  }

  /**
   * Stops shard `index`'s actor (its lease is gone): no thread connects to it any more, the
   * commands already in its mailboxes run (a journaled actor that lost its shard has them refused
   * by the journal), then the worker ends, which closes every thread's port to it.
   */
  async close(index: number): Promise<void> {
    this.admitted?.delete(index);
    const actor = this.actors.get(index);
    if (actor === undefined) return;
    this.actors.delete(index);
    this.started.delete(index);
    const settled = await actor.then(
      (a) => a,
      () => undefined,
    );
    if (settled !== undefined) await closeWorker(settled.worker);
  }

  /** A new mailbox port to shard `index`'s actor (started if needed). */
  async connect(index: number): Promise<ActorPort> {
    if (this.admitted !== undefined && !this.admitted.has(index))
      throw new NotServedHere(`Shard ${index} is not served by this node now; retry shortly`);
    const actor = await this.start(index);
    const channel = new MessageChannel();
    actor.worker.postMessage({ type: 'connect', port: channel.port1 } satisfies ToShardWorker, [channel.port1]);
    return { port: channel.port2, generations: actor.generations };
  }

  /** The link for a registry on this thread; its commands carry `clock`'s readings. */
  link(clock?: Clock): ActorLink {
    return async (index, onGone) => {
      const { port, generations } = await this.connect(index);
      return { mailbox: new PortMailbox(port, clock, onGone), generations: new ShardGenerations(generations) };
    };
  }

  /** Closes every actor after the commands already in its mailboxes (callers stop sending first). */
  async closeAll(): Promise<void> {
    const actors = await Promise.allSettled(this.actors.values());
    await Promise.all(actors.map((settled) => (settled.status === 'fulfilled' ? closeWorker(settled.value.worker) : undefined)));
    this.actors.clear();
    this.started.clear();
  }
}

/** Asks an actor's worker to close (after the commands in its mailboxes), then ends it. */
async function closeWorker(worker: Worker): Promise<void> {
  const closed = new Promise<void>((resolve) => {
    worker.on('message', (message: FromShardWorker) => message.type === 'closed' && resolve());
    worker.once('exit', () => resolve());
  });
  worker.postMessage({ type: 'close' } satisfies ToShardWorker);
  await closed;
  await worker.terminate();
}
