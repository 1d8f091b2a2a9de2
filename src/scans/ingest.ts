import { performance } from 'node:perf_hooks';
import { headers, nanos, type NatsConnection } from '@nats-io/transport-node';
import {
  AckPolicy,
  DeliverPolicy,
  JetStreamApiCodes,
  jetstream,
  jetstreamManager,
  type ConsumerInfo,
  type ConsumerMessages,
  type JetStreamClient,
  type JetStreamManager,
  type JsMsg,
} from '@nats-io/jetstream';
import type { Services } from '../services.js';
import { Backoff } from './backoff.js';
import { LaneScheduler } from './laneScheduler.js';
import { settleOutcomes } from './settle.js';
import { applyScanBatch, appliedSeqOf, bindStream, type ScanOutcome } from './apply.js';
import type { SourcedScan } from './canonical.js';
import type { DeadLetter } from './decode.js';
import { scansSource, type MessageRoute, type MetricLabels, type ScanSource } from './source.js';
import { partitionFilter, partitionedSubjects, splitPartition } from './partition.js';
import { sourcedItems } from './sources.js';
import { connectNats, ensureStream, isApiError, SCANS_DEAD_STREAM } from './streams.js';
import { pauseTraceOn, traceLine } from '../runtime/pauseTrace.js';

export interface ScanIngest {
  stop(): Promise<void>;
  /**
   * Per input stream, the sequence through which this process has seen every message of its
   * consumer's and settled it (applied, dead-lettered or found not its shard's, and acked); null
   * for a filtered consumer (partitioned subjects), whose stream sequences cannot be checked for
   * gaps. Undefined until every consumer has begun a session. The retention purge trusts this
   * over a consumer's ack floor (nats-server#6566 can move a floor past messages never delivered).
   */
  settledThrough(): Record<string, number | null> | undefined;
}

export interface IngestOptions {
  /** Most scans applied in one shard transaction. */
  maxBatch: number;
  /** Most tag reads applied in one shard transaction (bounds how long one batch holds the thread). */
  maxBatchReads: number;
  /** Messages the pull consumer keeps buffered in the client. */
  maxMessages: number;
  /** Longest a backlog batch waits for more messages before it is applied. */
  maxGatherMs: number;
}

const ACK_WAIT_MS = 60_000;
/** At most how often an idle session checks whether it is stalled (checkStalled; SCAN_STALL_SECONDS is how long it may be idle). */
const STALL_CHECK_MS = 5_000;
/** How long a stall check waits for the consumer's state (at most the stall time itself). */
const STALL_INFO_TIMEOUT_MS = 5_000;
const MAX_ACK_PENDING = 20_000;
const DEFAULT_OPTIONS: IngestOptions = {
  // Tests make batches small so that a short backlog fills several (batches sent behind one in flight).
  maxBatch: Number(process.env.TRACKD_TEST_MAX_BATCH) || 10_000,
  maxBatchReads: 100_000,
  maxMessages: 10_000,
  maxGatherMs: 200,
};

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A message in hand: its scans (one or more, applied together in one batch) and its metric labels. */
interface InHand {
  msg: JsMsg;
  orgToken: string;
  items: SourcedScan[];
  labels: MetricLabels;
  labelKey: string;
  /** Scans (`items.length`) and tag reads in `items`: what the batch rules weigh. */
  scans: number;
  reads: number;
  /** When JetStream stored the message (ms): the message's "now" (see streamTime). */
  at: number;
  /** When this process took it from the consumer (ms, wall clock: the debug line's stages). */
  acceptedAt: number;
}

/**
 * The time of a message is when JetStream stored it, not when trackd happens to read it: the same
 * message then gets the same decisions (future_observed_at, the event-id horizon) on a redelivery,
 * a replay or another node. Milliseconds as nats.js derives them (`JsMsg.time`).
 */
const streamTime = (msg: JsMsg) => Math.floor(msg.info.timestampNanos / 1_000_000);

interface RouteEntry {
  route: MessageRoute;
  labels: MetricLabels;
  labelKey: string;
}

const headerSafe = (text: string) => text.replace(/[\r\n]+/g, ' ').slice(0, 2000);

/**
 * The consumer of one scan source (SCANS, READERS; STYLE pattern 7). Exactly-once effect rests on one invariant: each shard
 * applies its messages in stream order with no gap, so that its applied sequence (committed with
 * the effects) says exactly which messages are in. Delivery is in order within a consume session;
 * anything that can break the order (a restart with unacked messages, a reconnect, a delivery
 * sequence gap) ends the session, flushes what is in hand, and re-creates the durable consumer at
 * its ack floor. Redeliveries at or below a shard's applied sequence are then acked without effect.
 */
class ScanConsumer {
  private readonly lanes: LaneScheduler<InHand>;
  private readonly inHand = new Set<number>();
  private readonly sideTasks = new Set<Promise<void>>();
  private readonly routes = new Map<string, RouteEntry>();
  /** Messages in the stream not yet delivered to this consumer, as of the last delivery. */
  private pending = 0;
  private messages: ConsumerMessages | undefined;
  private sessionBroken = false;
  /** The consumer's last delivery (its sequence) this session saw, or that the consumer had made when the session began. */
  private lastDelivery = 0;
  /**
   * The stream sequence the next first delivery must have (undefined: not known yet). The consumers
   * take every message of their stream, so first deliveries come one stream sequence after another.
   */
  private nextStreamSeq: number | undefined;
  /** The highest stream sequence this consumer has taken in order, every one before it included (this process). */
  private takenThrough = 0;
  /** A session has begun (its start checked against what is known to be in): takenThrough means something. */
  private started = false;
  /** Stream sequences a first delivery jumped over, to look up before the next session: skipped, or gone from the stream? */
  private jumped: { from: number; to: number } | undefined;
  /** Stream sequences found gone from the stream (deleted by an operator): a jump over them is no skip. */
  private absent: { from: number; to: number } | undefined;
  /** The stream holds messages not yet delivered to us (a backlog): batches gather instead of applying at once. */
  private backlog = false;
  /** When the session last received a delivery (or began). */
  private lastDeliveryAt = 0;
  private checkingStall = false;
  private stopping = false;
  private streamCreated = '';
  private readonly loop: Promise<void>;
  private readonly historyGapMs: number;
  private readonly eventIdRetentionMs: number;
  /**
   * Tests only (TRACKD_TEST_FOLD_SLICE): positions each batch folds the re-read log into
   * (rereadLog.ts; default DEFAULT_FOLD_SLICE), so that a small data set takes several batches per
   * fold cycle. Carried in the batch's options, so a replay of its records folds the same slices.
   */
  private readonly foldSlice = Number(process.env.TRACKD_TEST_FOLD_SLICE) || undefined;
  /** Connected and consuming (readiness). */
  ready = false;
  /** The durable consumer's name: the source's, or per shard (`trackd-scans-s3`) in cluster mode. */
  private readonly durable: string;
  /** Partitioned input subjects (scans/partition.ts): each message's subject ends with its shard. */
  private readonly partitioned: boolean;
  /** The consumer's filter subject: with partitioned subjects, its shard's (shard 0's takes everything, to dead-letter invalid subjects). */
  private readonly filter: string | undefined;

  constructor(
    private readonly services: Services,
    private readonly source: ScanSource,
    private readonly js: JetStreamClient,
    private readonly jsm: JetStreamManager,
    private readonly options: IngestOptions,
    private readonly onReadiness: () => void,
    /** Cluster mode: this consumer applies only this shard's messages (and acks the others untouched). */
    private readonly only?: ShardFilter,
  ) {
    this.durable = only === undefined ? source.durable : `${source.durable}-s${only.index}`;
    this.partitioned = only !== undefined && partitionedSubjects(services.config);
    this.filter = this.partitioned && only!.index !== 0 ? partitionFilter(source.subjects.split('.')[0]!, only!.index) : undefined;
    this.historyGapMs = services.config.HISTORY_GAP_SECONDS * 1000;
    this.eventIdRetentionMs = services.config.EVENT_ID_RETENTION_SECONDS * 1000;
    const { metrics } = services;
    metrics.onCollect(() => {
      metrics.set('trackd_scans_in_hand', 'Scan messages delivered and not yet acked', source.labels, this.inHand.size);
      metrics.set(
        'trackd_scans_consumer_pending',
        'Messages in the stream not yet delivered to trackd (consumer lag)',
        source.labels,
        this.pending,
      );
    });
    this.lanes = new LaneScheduler<InHand>(options, {
      bind: async (index) => bindStream(await this.services.shards.open(index), this.source.stream, this.streamCreated),
      apply: (index, batch, previous) => this.apply(index, batch, previous),
      settle: (batch, outcomes) => this.settle(batch, outcomes),
      failed: (index, batch, err) => {
        metrics.inc('trackd_scan_batch_failures_total', 'Shard batches that failed and will be retried', {
          ...this.source.labels,
          shard: index,
        });
        services.logger.error({ err: (err as Error).message, shard: index, messages: batch.length }, 'scan batch failed; retrying');
        services.storageHealth?.report(err);
      },
      backlog: () => this.backlog,
      stopping: () => this.stopping,
    });
    this.loop = this.run();
  }

  private setReady(ready: boolean): void {
    this.ready = ready;
    this.onReadiness();
  }

  disconnected(): void {
    this.setReady(false);
  }

  endSession(reason: string): void {
    if (this.sessionBroken) return;
    this.sessionBroken = true;
    this.services.logger.info(
      { reason, stream: this.source.stream, consumer: this.durable },
      'scan consumer session ends; resuming from the ack floor',
    );
    void this.messages?.close();
  }

  /**
   * A session that holds nothing and has received nothing for SCAN_STALL_SECONDS while the consumer
   * has messages to deliver is stuck: its pull requests were lost (seen in the 3-node test after a
   * nats-server leading the consumer was killed: pending 263, no waiting pull, for over a minute;
   * the client's own heartbeat check had not pulled again). It ends, and the next session pulls anew.
   * The consumer's pending count is asked for, not taken from the last delivery: a stall that begins
   * once the stream is caught up has nothing pending as of its last delivery.
   */
  private async checkStalled(): Promise<void> {
    const stallMs = this.services.config.SCAN_STALL_SECONDS * 1000;
    if (this.checkingStall || this.sessionBroken || this.stopping || this.inHand.size > 0) return;
    if (Date.now() - this.lastDeliveryAt < stallMs) return;
    this.checkingStall = true;
    const session = this.messages;
    const idleAndHeld = () => this.inHand.size === 0 && this.messages === session && !this.stopping;
    let timer: NodeJS.Timeout | undefined;
    try {
      const info = await Promise.race([
        this.jsm.consumers.info(this.source.stream, this.durable),
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Error('no answer')), Math.min(STALL_INFO_TIMEOUT_MS, stallMs));
        }),
      ]);
      const idle = Date.now() - this.lastDeliveryAt;
      if (info.num_pending > 0 && idle >= stallMs && idleAndHeld())
        this.endSession(`no delivery for ${Math.round(idle / 1000)} s with ${info.num_pending} messages pending`);
    } catch (err) {
      // The broker away or electing a leader: checked again later. But a session idle for twice
      // the stall time whose consumer cannot be asked ends too: its pulls may be as lost as the
      // question, and ending one that is merely caught up costs a pull. (A 3-node run after a
      // broker's kill had a session with no waiting pull and 1,698 messages pending for over a
      // minute; whether its checks were answered is not known.)
      const idle = Date.now() - this.lastDeliveryAt;
      if (idle >= 2 * stallMs && idleAndHeld())
        this.endSession(`no delivery for ${Math.round(idle / 1000)} s and the consumer's state unreadable (${(err as Error).message})`);
    } finally {
      clearTimeout(timer);
      this.checkingStall = false;
    }
  }

  private async run(): Promise<void> {
    const backoff = new Backoff(250);
    while (!this.stopping) {
      try {
        const delivered = await this.prepareConsumer();
        // Everything before the session's first stream sequence is in: the start was checked (mustStartBy).
        if (this.nextStreamSeq !== undefined) this.takenThrough = Math.max(this.takenThrough, this.nextStreamSeq - 1);
        this.started = true;
        const consumer = await this.js.consumers.get(this.source.stream, this.durable);
        this.sessionBroken = false;
        // The first delivery is checked too: another client pulling from this durable (a paused
        // former owner's pull request, still queued at the server) may take the next one first.
        this.lastDelivery = delivered;
        this.messages = await consumer.consume({ max_messages: this.options.maxMessages });
        // A stop that came while this session was being prepared found no session to close: without
        // this the session would run on and stop() would wait for it for ever.
        if (this.stopping) void this.messages.close();
        this.services.logger.info({ stream: this.source.stream, consumer: this.durable, delivered }, 'scan consumer session starts');
        this.setReady(true);
        backoff.reset();
        this.lastDeliveryAt = Date.now();
        const stallMs = this.services.config.SCAN_STALL_SECONDS * 1000;
        const watch = setInterval(() => void this.checkStalled(), Math.min(STALL_CHECK_MS, Math.max(100, stallMs / 4)));
        try {
          for await (const msg of this.messages) this.accept(msg);
        } finally {
          clearInterval(watch);
        }
      } catch (err) {
        if (!this.stopping)
          this.services.logger.warn({ err: (err as Error).message, stream: this.source.stream }, 'scan consumer interrupted');
      }
      this.setReady(false);
      await this.drain();
      if (!this.stopping) await backoff.wait();
    }
  }

  /**
   * Ensures the streams and the durable consumer; re-creates it at its ack floor when it holds
   * unacked deliveries. Returns the consumer's last delivery sequence (0 for a new one).
   */
  private async prepareConsumer(): Promise<number> {
    if (this.only?.owned !== undefined && !(await this.only.owned()))
      throw new Error(`shard ${this.only.index} is no longer owned here: its consumer is left to its owner`);
    // In a cluster the inputs need the journal's copies: a lost server must not lose acknowledged scans.
    const replicas = this.services.config.JOURNAL_REPLICAS;
    const stream = await ensureStream(this.jsm, this.source.stream, this.source.subjects, replicas);
    await ensureStream(this.jsm, SCANS_DEAD_STREAM, 'scans_dead.>', replicas);
    this.streamCreated = stream.created;
    this.lanes.unbindAll();
    let info: ConsumerInfo | undefined;
    try {
      info = await this.jsm.consumers.info(this.source.stream, this.durable);
    } catch (err) {
      if (!isApiError(err, JetStreamApiCodes.ConsumerNotFound)) throw err;
    }
    if (info !== undefined) this.setPending(info.num_pending);
    const floor = info?.ack_floor.stream_seq ?? 0;
    const must = await this.mustStartBy(floor, stream.created);
    const firstSeq = stream.state.first_seq;
    this.services.logger.info(
      {
        stream: this.source.stream,
        consumer: this.durable,
        delivered: info?.delivered.stream_seq ?? null,
        ack_floor: info === undefined ? null : floor,
        ack_pending: info?.num_ack_pending ?? null,
        must_start_by: must ?? null,
        first_seq: firstSeq,
      },
      'scan consumer state',
    );
    const sameFilter = (info?.config.filter_subject || undefined) === this.filter;
    // Settled: nothing awaits an ack, and nothing was delivered past the floor. A replicated consumer
    // on 2.9 has been seen with ack_pending 0 yet delivered 78 over a floor of 72 after its holder
    // was killed: the delivered message 78, never applied, would not have come again.
    const settled = info !== undefined && info.num_ack_pending === 0 && info.delivered.stream_seq <= floor;
    if (info !== undefined && settled && sameFilter && (must === undefined || must > floor)) {
      this.nextStreamSeq = Math.max(info.delivered.stream_seq + 1, firstSeq);
      return info.delivered.consumer_seq;
    }
    const start = info === undefined ? 1 : Math.min(floor + 1, must ?? Number.POSITIVE_INFINITY);
    this.nextStreamSeq = Math.max(start, firstSeq);
    if (info !== undefined) await this.jsm.consumers.delete(this.source.stream, this.durable);
    const created = await this.jsm.consumers.add(this.source.stream, {
      durable_name: this.durable,
      ack_policy: AckPolicy.Explicit,
      ack_wait: nanos(ACK_WAIT_MS),
      max_ack_pending: MAX_ACK_PENDING,
      max_deliver: -1,
      ...(this.filter === undefined ? {} : { filter_subject: this.filter }),
      ...(start > 1 ? { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: start } : { deliver_policy: DeliverPolicy.All }),
    });
    this.services.logger.info({ start_seq: start, stream: this.source.stream, consumer: this.durable }, 'scan consumer created');
    return created.delivered.consumer_seq;
  }

  /**
   * The stream sequence the session must start at or before, when the durable's ack floor is past
   * messages this consumer never took (acked by another client of the durable, or by the server
   * itself: a replicated consumer on nats-server before 2.11 can move its ack floor past a message
   * never delivered, nats-server#6566). What is known to be in: what this process took in order
   * and, in cluster mode, what the shard has applied (its consumer takes only that shard's
   * messages to heart); a process that took nothing yet in single-node mode has only the floor.
   * Undefined: the floor holds.
   */
  private async mustStartBy(floor: number, created: string): Promise<number | undefined> {
    let must: number | undefined;
    if (this.jumped !== undefined) {
      // A message the server skipped: the session starts there at the latest.
      const present = await this.firstPresent(this.jumped);
      if (present === undefined) {
        this.services.logger.warn(
          { stream: this.source.stream, ...this.jumped },
          'scan messages gone from the stream (deleted): passed over',
        );
        this.absent = this.jumped;
      } else must = present;
      this.jumped = undefined;
    }
    if (floor > this.takenThrough) {
      let known = this.takenThrough === 0 ? floor : this.takenThrough;
      if (this.only !== undefined)
        known = Math.max(
          this.takenThrough,
          await appliedSeqOf(await this.services.shards.open(this.only.index), this.source.stream, created),
        );
      if (known < floor) must = Math.min(must ?? Number.POSITIVE_INFINITY, known + 1);
    }
    return must;
  }

  private isAbsent(from: number, to: number): boolean {
    return this.absent !== undefined && from >= this.absent.from && to <= this.absent.to;
  }

  /** The first message of `range` the stream holds (undefined: none). A long range is taken as held from its start. */
  private async firstPresent(range: { from: number; to: number }): Promise<number | undefined> {
    if (range.to - range.from >= 1000) return range.from;
    for (let seq = range.from; seq <= range.to; seq++) {
      if ((await this.jsm.streams.getMessage(this.source.stream, { seq })) !== null) return seq;
    }
    return undefined;
  }

  private setPending(pending: number): void {
    this.pending = pending;
  }

  /** A subject's route with its metric labels, computed once per subject (a handful per org). */
  private routeOf(subject: string): RouteEntry {
    let entry = this.routes.get(subject);
    if (entry === undefined) {
      const route = this.source.route(subject);
      const labels = { ...this.source.labels, ...route.labels };
      entry = { route, labels, labelKey: JSON.stringify(labels) };
      if (this.routes.size >= 10_000) this.routes.clear();
      this.routes.set(subject, entry);
    }
    return entry;
  }

  private accept(msg: JsMsg): void {
    if (this.sessionBroken) return;
    const info = msg.info;
    if (info.deliverySequence !== this.lastDelivery + 1) {
      // A delivery we never saw: applying this one could move a shard's applied sequence past it.
      this.endSession(`delivery sequence gap (${this.lastDelivery} -> ${info.deliverySequence})`);
      return;
    }
    this.lastDelivery = info.deliverySequence;
    this.lastDeliveryAt = Date.now();
    if (!info.redelivered && this.filter === undefined) {
      const next = this.nextStreamSeq;
      if (next !== undefined && msg.seq !== next && !this.isAbsent(next, msg.seq - 1)) {
        // A replicated consumer of nats-server before 2.11 can skip messages after a leader change
        // (nats-server#6566): a message past one never delivered must not move a shard's applied sequence past it.
        if (msg.seq > next) this.jumped = { from: next, to: msg.seq - 1 };
        this.endSession(`stream sequence gap (${next - 1} -> ${msg.seq})`);
        return;
      }
      this.nextStreamSeq = msg.seq + 1;
      if (msg.seq > this.takenThrough) this.takenThrough = msg.seq;
    }
    this.setPending(info.pending);
    this.backlog = info.pending > 0;
    const seq = msg.seq;
    if (this.inHand.has(seq)) return;
    this.inHand.add(seq);
    const { subject, partition } = this.partitioned ? splitPartition(msg.subject) : { subject: msg.subject, partition: undefined };
    const { route, labels, labelKey } = this.routeOf(subject);
    const shardIndex = 'dead' in route ? undefined : this.services.shards.shardIndexOf(route.orgId);
    if (this.only !== undefined && !(this.partitioned ? this.minePartition(partition) : this.mine(route, shardIndex))) {
      // Another shard's message: its own consumer (on its owner) applies it; this one has nothing to do with it.
      msg.ack();
      this.inHand.delete(seq);
      return;
    }
    if ('dead' in route) {
      this.deadLetter(msg, route.orgToken, route.dead, labels);
      return;
    }
    if (shardIndex === undefined) {
      this.deadLetter(msg, route.orgToken, { reason: 'unknown_org', detail: `organization ${route.orgId} does not exist` }, labels);
      return;
    }
    if (partition !== undefined && partition !== shardIndex) {
      // Published with a partition token of its own (the mapping adds one only to subjects without it).
      const detail = `subject ${msg.subject}: partition ${partition} is not the shard of organization ${route.orgId} (${shardIndex})`;
      this.deadLetter(msg, route.orgToken, { reason: 'invalid_subject', detail }, labels);
      return;
    }
    const at = streamTime(msg);
    const decoded = this.source.decode(subject, route.orgId, msg.data, at);
    if ('dead' in decoded) {
      this.deadLetter(msg, route.orgToken, decoded.dead, labels);
      return;
    }
    if (decoded.scans.length === 0) {
      // Nothing to apply (a reader message without tag reads): no shard state depends on it.
      this.services.metrics.inc('trackd_scans_applied_total', 'Scan messages applied', labels);
      msg.ack();
      this.inHand.delete(seq);
      return;
    }
    const items = sourcedItems(decoded.scans, this.source.stream, seq);
    let reads = 0;
    for (const s of decoded.scans) reads += s.reads.length;
    const acceptedAt = Date.now();
    this.lanes.enqueue(shardIndex, { msg, orgToken: route.orgToken, items, labels, labelKey, scans: items.length, reads, at, acceptedAt });
  }

  /**
   * Whether a message is this shard's to apply or dead-letter (cluster mode): its org's shard; an
   * unknown org's would-be shard (orgs are numbered onto shards, `(id - 1) % SHARDS`); shard 0 for
   * a subject that names no org. So each message is settled by exactly one shard's consumer.
   */
  private mine(route: MessageRoute, shardIndex: number | undefined): boolean {
    const only = this.only!;
    if ('dead' in route) return only.index === 0;
    return (shardIndex ?? (route.orgId - 1) % only.count) === only.index;
  }

  /**
   * With partitioned subjects: a message with this shard's partition token, or (shard 0, whose
   * consumer takes every message) one the mapping did not touch, an invalid subject to dead-letter.
   */
  private minePartition(partition: number | undefined): boolean {
    return partition === undefined ? this.only!.index === 0 : partition === this.only!.index;
  }

  /** One batch on its shard, timed. */
  private async apply(index: number, batch: InHand[], previous?: InHand[]): Promise<ScanOutcome[]> {
    const shard = await this.services.shards.open(index);
    const started = performance.now();
    const startedAt = Date.now();
    // One time per transaction: the latest of its messages' (a batch holds one stream's messages in order).
    let now = 0;
    for (const b of batch) if (b.at > now) now = b.at;
    const outcomes = await applyScanBatch(
      shard,
      batch.flatMap((b) => b.items),
      {
        historyGapMs: this.historyGapMs,
        eventIdRetentionMs: this.eventIdRetentionMs,
        foldSlice: this.foldSlice,
        now,
        ...(previous === undefined ? {} : { afterSeq: Math.max(...previous.map((b) => b.msg.seq)) }),
      },
    );
    if (this.services.logger.isLevelEnabled('debug'))
      this.services.logger.debug(
        {
          stream: this.source.stream,
          shard: index,
          seqs: batch.map((b) => b.msg.seq),
          kinds: outcomes.map((o) => o.kind[0]).join(''),
          // Where a scan's time goes before its events exist (bench/lib/eventStages.ts): the
          // batch's time (its events' occurred_at), when its last message was taken, when the
          // shard was asked, when its answer came back (after the commit and the report index update).
          now,
          accepted_at: batch.at(-1)!.acceptedAt,
          started_at: startedAt,
          // The shard's last commit with events (shared memory): this batch's commit when it made events
          // (a write of another command between its commit and this answer would be later).
          committed_at: shard.generations.lastEventsAt(),
          applied_at: Date.now(),
          backlog: this.backlog,
        },
        'scan batch applied',
      );
    if (pauseTraceOn)
      traceLine('batch', {
        msgs: batch.length,
        reads: batch.reduce((n, b) => n + b.reads, 0),
        now,
        first_accepted: batch[0]!.acceptedAt,
        accepted: batch.at(-1)!.acceptedAt,
        started: startedAt,
        committed: shard.generations.lastEventsAt(),
        answered: Date.now(),
      });
    this.services.metrics.observe(
      'trackd_scan_batch_seconds',
      'Time to apply one shard batch of scans',
      { ...this.source.labels, shard: index },
      (performance.now() - started) / 1000,
    );
    return outcomes;
  }

  /**
   * After the commit: dead letters first (persisted by JetStream), then the acks. A message whose
   * first scan was already applied is a redelivery as a whole; a message with scans that can never
   * apply is dead-lettered once (with every reason) after the rest of it applied.
   */
  private async settle(batch: InHand[], outcomes: ScanOutcome[]): Promise<void> {
    const { ack, redelivered, duplicates, dead, tallies } = settleOutcomes(batch, outcomes);
    if (duplicates.length > 0)
      // Re-publishes of applied event ids: what to look for when a scan is missing, with the redeliveries below.
      this.services.logger.info(
        {
          stream: this.source.stream,
          consumer: this.durable,
          seqs: duplicates.slice(0, 50).map((d) => d.msg.seq),
          count: duplicates.length,
        },
        'scan messages with event ids already applied: acked without effect',
      );
    if (redelivered.length > 0)
      // Rare outside restarts, and what to look for when a scan is missing: its message acked as applied.
      this.services.logger.info(
        {
          stream: this.source.stream,
          consumer: this.durable,
          count: redelivered.length,
          first: redelivered[0]!.msg.seq,
          last: redelivered.at(-1)!.msg.seq,
        },
        'scan messages redelivered, already applied: acked without effect',
      );
    const deadLettered = dead.map(({ message, detail }) =>
      this.publishDead(message.msg, message.orgToken, { reason: 'unknown_location', detail }, message.labels),
    );
    for (const { msg } of ack) {
      msg.ack();
      this.inHand.delete(msg.seq);
    }
    const { metrics } = this.services;
    for (const t of tallies) {
      if (t.applied) metrics.inc('trackd_scans_applied_total', 'Scan messages applied', t.labels, t.applied);
      if (t.redelivered)
        metrics.inc(
          'trackd_scans_redelivered_total',
          'Redelivered scan messages acked without effect (already applied)',
          t.labels,
          t.redelivered,
        );
      if (t.duplicate)
        metrics.inc('trackd_scans_duplicate_total', 'Scan messages whose event ids were all already applied', t.labels, t.duplicate);
      if (t.reads) metrics.inc('trackd_scan_reads_applied_total', 'Tag reads applied to assets', t.labels, t.reads);
      if (t.unknownTags)
        metrics.inc('trackd_scan_reads_skipped_total', 'Tag reads skipped', { reason: 'unknown_tag', ...t.labels }, t.unknownTags);
      if (t.locationTags)
        metrics.inc('trackd_scan_reads_skipped_total', 'Tag reads skipped', { reason: 'location_tag', ...t.labels }, t.locationTags);
    }
    await Promise.all(deadLettered);
  }

  private deadLetter(msg: JsMsg, orgToken: string, dead: DeadLetter, labels: MetricLabels): void {
    const task = this.publishDead(msg, orgToken, dead, labels).finally(() => this.sideTasks.delete(task));
    this.sideTasks.add(task);
  }

  /** Copies a message that can never apply to scans_dead.<org_id> with its reason, then acks it. */
  private async publishDead(msg: JsMsg, orgToken: string, dead: DeadLetter, labels: MetricLabels): Promise<void> {
    const h = headers();
    h.set('Trackd-Dead-Reason', dead.reason);
    h.set('Trackd-Dead-Detail', headerSafe(dead.detail));
    h.set('Trackd-Original-Subject', msg.subject);
    h.set('Trackd-Original-Seq', String(msg.seq));
    const original = msg.headers?.get('Nats-Msg-Id');
    if (original) h.set('Trackd-Original-Msg-Id', headerSafe(original));
    const backoff = new Backoff(100);
    for (;;) {
      try {
        // The msg id makes a re-dead-lettering after a restart a no-op within the duplicate window.
        await this.js.publish(`scans_dead.${orgToken}`, msg.data, {
          headers: h,
          msgID: `${this.source.stream}-${this.streamCreated}-${msg.seq}`,
        });
        break;
      } catch (err) {
        if (this.stopping) return;
        this.services.logger.warn({ err: (err as Error).message }, 'dead letter publish failed; retrying');
        await backoff.wait();
      }
    }
    this.services.metrics.inc('trackd_scans_dead_lettered_total', 'Scan messages copied to scans_dead.<org_id>', {
      reason: dead.reason,
      ...labels,
    });
    this.services.logger.info({ reason: dead.reason, detail: dead.detail, subject: msg.subject, seq: msg.seq }, 'scan dead-lettered');
    msg.ack();
    this.inHand.delete(msg.seq);
  }

  /** Waits until every message in hand is committed and acked (or given up on at shutdown). */
  private async drain(): Promise<void> {
    for (;;) {
      if (!this.lanes.busy() && this.sideTasks.size === 0) break;
      if (this.stopping && !this.lanes.active() && this.sideTasks.size === 0) break;
      await sleep(5);
    }
    // Given up on (stopping, or a batch that failed): not settled, so not taken as far as anyone relies on it.
    this.takenThrough = this.settledSeq() ?? this.takenThrough;
    this.inHand.clear();
  }

  get stream(): string {
    return this.source.stream;
  }

  /** This consumer's part of ScanIngest.settledThrough: what it took in order less what it still holds. */
  settledSeq(): number | null | undefined {
    if (this.filter !== undefined) return null;
    if (!this.started) return undefined;
    // In hand: taken, not yet settled.
    let through = this.takenThrough;
    for (const seq of this.inHand) if (seq <= through) through = seq - 1;
    return through;
  }

  async stop(): Promise<void> {
    this.stopping = true;
    this.setReady(false);
    await this.messages?.close().catch(() => undefined);
    await this.loop;
  }
}

/**
 * Connects to NATS, ensures the streams and consumes every source (SCANS by default) into the
 * shards over one connection; /readyz is ready while every consumer is.
 */
export async function startScanIngest(
  services: Services,
  natsUrl: string | NatsConnection,
  sources: ScanSource[] = [scansSource],
  options: Partial<IngestOptions> & ShardIngestOptions = {},
): Promise<ScanIngest> {
  const own = typeof natsUrl === 'string';
  const nc = own ? await connectNats(natsUrl, 'trackd-ingest', { reconnect: true }) : natsUrl;
  const jsm = await jetstreamManager(nc);
  const js = jetstream(nc);
  const consumers: ScanConsumer[] = [];
  const setReady = options.onReadiness ?? ((ready: boolean) => (services.readiness.consumer = ready));
  const onReadiness = () => setReady(consumers.length === sources.length && consumers.every((c) => c.ready));
  for (const source of sources)
    consumers.push(new ScanConsumer(services, source, js, jsm, { ...DEFAULT_OPTIONS, ...options }, onReadiness, options.shard));
  void watchStatus(nc, consumers);
  return {
    settledThrough() {
      const out: Record<string, number | null> = {};
      for (const consumer of consumers) {
        const through = consumer.settledSeq();
        if (through === undefined) return undefined;
        out[consumer.stream] = through;
      }
      return out;
    },
    async stop() {
      await Promise.all(consumers.map((c) => c.stop()));
      // A broker that is away cannot be drained; nothing is in hand once the consumers stopped.
      if (own) await nc.drain().catch(() => nc.close());
    },
  };
}

/** One shard's messages only (cluster mode): `index` of the cluster's `count` shards. */
export interface ShardFilter {
  index: number;
  count: number;
  /**
   * Whether this node still owns the shard, asked before each session touches the shared durable
   * consumer (re-creating it under its new owner would take deliveries from that owner).
   */
  owned?: () => Promise<boolean>;
}

export interface ShardIngestOptions {
  /** Consume for this shard only, with a durable consumer of its own (cluster mode). */
  shard?: ShardFilter;
  /** Told whether every consumer is connected and consuming (default: the process's readiness flag). */
  onReadiness?: (ready: boolean) => void;
}

async function watchStatus(nc: NatsConnection, consumers: ScanConsumer[]): Promise<void> {
  for await (const s of nc.status()) {
    for (const c of consumers) {
      if (s.type === 'disconnect') c.disconnected();
      if (s.type === 'reconnect') c.endSession('reconnected to nats-server');
    }
  }
}
