import { Backoff } from './backoff.js';
import type { ScanOutcome } from './apply.js';
import { batchLength, keepGathering, type BatchLimits, type Queued } from './lanes.js';

/** What the scheduler asks of the consumer that owns it (the JetStream session and the shards). */
export interface LaneHooks<M extends Queued> {
  /** Binds shard `index` to the stream's current incarnation (once per session and lane). */
  bind(index: number): Promise<void>;
  /** Applies one batch on shard `index`; resolves once it is committed, with one outcome per scan. */
  apply(index: number, batch: M[]): Promise<ScanOutcome[]>;
  /** After the commit: dead letters, acks, metrics. */
  settle(batch: M[], outcomes: ScanOutcome[]): Promise<void>;
  /** A batch failed; it is retried after a backoff unless the consumer is stopping. */
  failed(index: number, batch: M[], err: unknown): void;
  /** The stream holds messages not yet delivered (batches gather). */
  backlog(): boolean;
  stopping(): boolean;
}

interface Lane<M> {
  index: number;
  queue: M[];
  scans: number;
  reads: number;
  /** Queue length at the last gather check: a batch gathers only while messages keep arriving. */
  gathered: number;
  /** When the oldest message in the queue arrived (performance.now()). */
  since: number;
  running: boolean;
  scheduled: boolean;
  bound: boolean;
}

/**
 * One lane per shard: messages in stream order, applied in batches (lanes.ts decides their size
 * and whether to gather), one batch at a time per shard, settled after each commit, a failed batch
 * retried with backoff. Knows nothing of JetStream: the hooks do.
 */
export class LaneScheduler<M extends Queued & { msg: { working(): void } }> {
  private readonly lanes = new Map<number, Lane<M>>();

  constructor(
    private readonly limits: BatchLimits,
    private readonly hooks: LaneHooks<M>,
  ) {}

  enqueue(index: number, message: M): void {
    let lane = this.lanes.get(index);
    if (lane === undefined) {
      lane = { index, queue: [], scans: 0, reads: 0, gathered: 0, since: 0, running: false, scheduled: false, bound: false };
      this.lanes.set(index, lane);
    }
    if (lane.queue.length === 0) lane.since = performance.now();
    lane.queue.push(message);
    lane.scans += message.scans;
    lane.reads += message.reads;
    this.schedule(lane, false);
  }

  /** A new session: every lane binds again before its next batch. */
  unbindAll(): void {
    for (const lane of this.lanes.values()) lane.bound = false;
  }

  /** A batch is being applied or about to be. */
  active(): boolean {
    return [...this.lanes.values()].some((l) => l.running || l.scheduled);
  }

  /** Anything queued or in progress. */
  busy(): boolean {
    return [...this.lanes.values()].some((l) => l.running || l.scheduled || l.queue.length > 0);
  }

  /**
   * Applies the lane's queue once every message already read from the socket has joined it. With a
   * backlog in the stream it first gathers a bigger batch, for as long as messages keep arriving
   * (up to maxBatch/maxBatchReads or maxGatherMs): a commit costs about the pages it dirties, and
   * a batch of 10,000 random re-reads dirties hardly more pages than one of 300 (the socket's
   * chunk), so a drain costs far less per message. Without a backlog (a live feed) a batch is
   * applied at once, so gathering never adds latency there.
   */
  private schedule(lane: Lane<M>, gathering: boolean): void {
    if (lane.running || lane.scheduled || lane.queue.length === 0) return;
    lane.scheduled = true;
    const check = () => {
      lane.scheduled = false;
      if (lane.running) return;
      const state = {
        queued: lane.queue.length,
        gathered: lane.gathered,
        scans: lane.scans,
        reads: lane.reads,
        waitedMs: performance.now() - lane.since,
      };
      if (keepGathering(state, this.hooks.backlog(), this.hooks.stopping(), this.limits)) {
        lane.gathered = lane.queue.length;
        this.schedule(lane, true);
        return;
      }
      lane.gathered = 0;
      void this.flush(lane);
    };
    // A timer lets the poll phase wait (about 1 ms) for the next socket read; setImmediate does not.
    if (gathering) setTimeout(check, 1);
    else setImmediate(check);
  }

  private async flush(lane: Lane<M>): Promise<void> {
    if (lane.running) return;
    lane.running = true;
    const backoff = new Backoff(100);
    let givenUp = false;
    try {
      while (lane.queue.length > 0) {
        const batch = lane.queue.slice(0, batchLength(lane.queue, this.limits));
        let outcomes: ScanOutcome[];
        try {
          if (!lane.bound) {
            await this.hooks.bind(lane.index);
            lane.bound = true;
          }
          outcomes = await this.hooks.apply(lane.index, batch);
        } catch (err) {
          this.hooks.failed(lane.index, batch, err);
          if (this.hooks.stopping()) {
            givenUp = true;
            return;
          }
          for (const b of batch) b.msg.working();
          await backoff.wait();
          continue;
        }
        backoff.reset();
        await this.hooks.settle(batch, outcomes);
        lane.queue.splice(0, batch.length);
        for (const b of batch) {
          lane.scans -= b.scans;
          lane.reads -= b.reads;
        }
        // With a backlog, what is left gathers more before the next batch.
        if (this.hooks.backlog()) break;
      }
    } finally {
      lane.running = false;
      lane.since = performance.now();
      if (!givenUp) this.schedule(lane, false);
    }
  }
}
