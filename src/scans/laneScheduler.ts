import { Backoff } from './backoff.js';
import type { ScanOutcome } from './apply.js';
import { atLimit, batchLength, keepGathering, type BatchLimits, type Queued } from './lanes.js';

/** What the scheduler asks of the consumer that owns it (the JetStream session and the shards). */
export interface LaneHooks<M extends Queued> {
  /** Binds shard `index` to the stream's current incarnation (once per session and lane). */
  bind(index: number): Promise<void>;
  /**
   * Applies one batch on shard `index`; resolves once it is committed, with one outcome per scan.
   * `previous`: the batch sent just before it and not yet answered, which the shard must have
   * applied first (it refuses this one otherwise: ApplyOptions.afterSeq).
   */
  apply(index: number, batch: M[], previous?: M[]): Promise<ScanOutcome[]>;
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

type Answer = { outcomes: ScanOutcome[] } | { err: unknown };

/** A batch sent to its shard and not yet settled. */
interface Flight<M> {
  batch: M[];
  answer: Promise<Answer>;
}

/**
 * One lane per shard: messages in stream order, applied in batches (lanes.ts decides their size
 * and whether to gather), settled after each commit in order, a failed batch retried with backoff.
 * A full batch behind the one being applied is sent before that one's answer (at most two per
 * shard), so that the shard goes from one to the next without waiting for this thread to settle
 * the first (acks, dead letters) and send the next: in the large field burst those waits were 25
 * to 256 ms between batches of about a second. The shard applies the second only once the first
 * is applied (ApplyOptions.afterSeq): should the first fail, both are retried, in order. Knows
 * nothing of JetStream: the hooks do.
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
    const flights: Flight<M>[] = [];
    try {
      for (;;) {
        await this.send(lane, flights);
        const head = flights.shift();
        if (head === undefined) break;
        const answer = await head.answer;
        if ('err' in answer) {
          this.hooks.failed(lane.index, head.batch, answer.err);
          // The batch behind it is refused by the shard (or, had the first been applied after all,
          // applied): either way it is retried after the first, from the head of the queue.
          const retried = [head];
          for (const f of flights.splice(0)) {
            const behind = await f.answer;
            if ('err' in behind) this.hooks.failed(lane.index, f.batch, behind.err);
            retried.push(f);
          }
          if (this.hooks.stopping()) {
            givenUp = true;
            return;
          }
          for (const f of retried) for (const b of f.batch) b.msg.working();
          await backoff.wait();
          continue;
        }
        backoff.reset();
        lane.queue.splice(0, head.batch.length);
        for (const b of head.batch) {
          lane.scans -= b.scans;
          lane.reads -= b.reads;
        }
        // The next full batch goes to the shard before this one is settled (its acks, dead letters).
        await this.send(lane, flights, true);
        await this.hooks.settle(head.batch, answer.outcomes);
        // With a backlog, what is left gathers more before the next batch (unless one is in flight).
        if (flights.length === 0 && this.hooks.backlog()) break;
      }
    } finally {
      lane.running = false;
      lane.since = performance.now();
      if (!givenUp) this.schedule(lane, false);
    }
  }

  /**
   * Sends the next batch when none is in flight (`onlyFull`: if it is full), and a full one behind a
   * single batch in flight (or, behind a full one, the rest of a backlog the stream has delivered).
   */
  private async send(lane: Lane<M>, flights: Flight<M>[], onlyFull = false): Promise<void> {
    while (flights.length < 2) {
      let sent = 0;
      for (const f of flights) sent += f.batch.length;
      if (sent >= lane.queue.length) return;
      const rest = sent === 0 ? lane.queue : lane.queue.slice(sent);
      const batch = rest.slice(0, batchLength(rest, this.limits));
      const previous = flights.at(-1)?.batch;
      // Behind a full batch, the last of a backlog goes too when the stream has nothing more to deliver.
      const last = previous !== undefined && atLimit(previous, this.limits) && !this.hooks.backlog();
      if ((previous !== undefined || onlyFull) && !(batch.length < rest.length || atLimit(batch, this.limits) || last)) return;
      if (!lane.bound) {
        // A new session binds before its first batch; nothing is sent behind a batch of the last one.
        if (previous !== undefined) return;
        try {
          await this.hooks.bind(lane.index);
          lane.bound = true;
        } catch (err) {
          flights.push({ batch, answer: Promise.resolve({ err }) });
          return;
        }
      }
      const answer: Promise<Answer> = this.hooks.apply(lane.index, batch, previous).then(
        (outcomes) => ({ outcomes }),
        (err: unknown) => ({ err }),
      );
      flights.push({ batch, answer });
    }
  }
}
