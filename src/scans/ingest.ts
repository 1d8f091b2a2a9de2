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
import { applyScanBatch, bindStream, type ScanOutcome } from './apply.js';
import type { SourcedScan } from './canonical.js';
import { decodeScanMessage, routeSubject, type DeadLetter } from './decode.js';
import { connectNats, ensureScanStreams, isApiError, SCANS_STREAM } from './streams.js';

export interface ScanIngest {
  stop(): Promise<void>;
}

export interface IngestOptions {
  /** Most messages applied in one shard transaction. */
  maxBatch: number;
  /** Messages the pull consumer keeps buffered in the client. */
  maxMessages: number;
}

const DURABLE = 'trackd-scans';
const ACK_WAIT_MS = 60_000;
const MAX_ACK_PENDING = 20_000;
const DEFAULT_OPTIONS: IngestOptions = { maxBatch: 2000, maxMessages: 2000 };

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface InHand {
  msg: JsMsg;
  item: SourcedScan;
}

/** One shard's queue: messages in stream order, applied in batches, one batch at a time. */
interface Lane {
  index: number;
  queue: InHand[];
  running: boolean;
  scheduled: boolean;
  bound: boolean;
}

const headerSafe = (text: string) => text.replace(/[\r\n]+/g, ' ').slice(0, 2000);

/**
 * The SCANS consumer (STYLE pattern 7). Exactly-once effect rests on one invariant: each shard
 * applies its messages in stream order with no gap, so that its applied sequence (committed with
 * the effects) says exactly which messages are in. Delivery is in order within a consume session;
 * anything that can break the order (a restart with unacked messages, a reconnect, a delivery
 * sequence gap) ends the session, flushes what is in hand, and re-creates the durable consumer at
 * its ack floor. Redeliveries at or below a shard's applied sequence are then acked without effect.
 */
class ScanConsumer implements ScanIngest {
  private readonly lanes = new Map<number, Lane>();
  private readonly inHand = new Set<number>();
  private readonly sideTasks = new Set<Promise<void>>();
  private messages: ConsumerMessages | undefined;
  private sessionBroken = false;
  private lastDelivery: number | undefined;
  private stopping = false;
  private streamCreated = '';
  private readonly loop: Promise<void>;
  private readonly historyGapMs: number;

  constructor(
    private readonly services: Services,
    private readonly nc: NatsConnection,
    private readonly jsm: JetStreamManager,
    private readonly js: JetStreamClient,
    private readonly options: IngestOptions,
  ) {
    this.historyGapMs = services.config.HISTORY_GAP_SECONDS * 1000;
    const { metrics } = services;
    metrics.onCollect(() => metrics.set('trackd_scans_in_hand', 'Scan messages delivered and not yet acked', {}, this.inHand.size));
    void this.watchStatus();
    this.loop = this.run();
  }

  private async watchStatus(): Promise<void> {
    for await (const s of this.nc.status()) {
      if (s.type === 'disconnect') this.services.readiness.consumer = false;
      if (s.type === 'reconnect') this.endSession('reconnected to nats-server');
    }
  }

  private endSession(reason: string): void {
    if (this.sessionBroken) return;
    this.sessionBroken = true;
    this.services.logger.info({ reason }, 'scan consumer session ends; resuming from the ack floor');
    void this.messages?.close();
  }

  private async run(): Promise<void> {
    let backoff = 250;
    while (!this.stopping) {
      try {
        await this.prepareConsumer();
        const consumer = await this.js.consumers.get(SCANS_STREAM, DURABLE);
        this.sessionBroken = false;
        this.lastDelivery = undefined;
        this.messages = await consumer.consume({ max_messages: this.options.maxMessages });
        this.services.readiness.consumer = true;
        backoff = 250;
        for await (const msg of this.messages) this.accept(msg);
      } catch (err) {
        if (!this.stopping) this.services.logger.warn({ err: (err as Error).message }, 'scan consumer interrupted');
      }
      this.services.readiness.consumer = false;
      await this.drain();
      if (!this.stopping) {
        await sleep(backoff);
        backoff = Math.min(backoff * 2, 5000);
      }
    }
  }

  /** Ensures the streams and the durable consumer; re-creates it at its ack floor when it holds unacked deliveries. */
  private async prepareConsumer(): Promise<void> {
    const { scans } = await ensureScanStreams(this.jsm);
    this.streamCreated = scans.created;
    for (const lane of this.lanes.values()) lane.bound = false;
    let info: ConsumerInfo | undefined;
    try {
      info = await this.jsm.consumers.info(SCANS_STREAM, DURABLE);
    } catch (err) {
      if (!isApiError(err, JetStreamApiCodes.ConsumerNotFound)) throw err;
    }
    if (info !== undefined) this.setPending(info.num_pending);
    if (info !== undefined && info.num_ack_pending === 0) return;
    const start = info === undefined ? 1 : info.ack_floor.stream_seq + 1;
    if (info !== undefined) await this.jsm.consumers.delete(SCANS_STREAM, DURABLE);
    await this.jsm.consumers.add(SCANS_STREAM, {
      durable_name: DURABLE,
      ack_policy: AckPolicy.Explicit,
      ack_wait: nanos(ACK_WAIT_MS),
      max_ack_pending: MAX_ACK_PENDING,
      max_deliver: -1,
      ...(start > 1 ? { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: start } : { deliver_policy: DeliverPolicy.All }),
    });
    this.services.logger.info({ start_seq: start }, 'scan consumer created');
  }

  private setPending(pending: number): void {
    this.services.metrics.set('trackd_scans_consumer_pending', 'Messages in SCANS not yet delivered to trackd (consumer lag)', {}, pending);
  }

  private accept(msg: JsMsg): void {
    if (this.sessionBroken) return;
    const info = msg.info;
    if (this.lastDelivery !== undefined && info.deliverySequence !== this.lastDelivery + 1) {
      // A delivery we never saw: applying this one could move a shard's applied sequence past it.
      this.endSession(`delivery sequence gap (${this.lastDelivery} -> ${info.deliverySequence})`);
      return;
    }
    this.lastDelivery = info.deliverySequence;
    this.setPending(info.pending);
    const seq = msg.seq;
    if (this.inHand.has(seq)) return;
    this.inHand.add(seq);
    const route = routeSubject(msg.subject);
    if ('dead' in route) return this.deadLetter(msg, route.orgToken, route.dead);
    const shardIndex = this.services.shards.shardIndexOf(route.orgId);
    if (shardIndex === undefined) return this.deadLetter(msg, route.orgToken, { reason: 'unknown_org', detail: `organization ${route.orgId} does not exist` });
    const decoded = decodeScanMessage(route.orgId, msg.data, Date.now());
    if ('dead' in decoded) return this.deadLetter(msg, route.orgToken, decoded.dead);
    let lane = this.lanes.get(shardIndex);
    if (lane === undefined) this.lanes.set(shardIndex, (lane = { index: shardIndex, queue: [], running: false, scheduled: false, bound: false }));
    lane.queue.push({ msg, item: { scan: decoded.scan, stream: SCANS_STREAM, seq } });
    if (!lane.running && !lane.scheduled) {
      lane.scheduled = true;
      // Let every message already read from the socket join the batch first.
      const l = lane;
      setImmediate(() => {
        l.scheduled = false;
        void this.flush(l);
      });
    }
  }

  private async flush(lane: Lane): Promise<void> {
    if (lane.running) return;
    lane.running = true;
    const { metrics, logger } = this.services;
    let backoff = 100;
    try {
      while (lane.queue.length > 0) {
        const batch = lane.queue.slice(0, this.options.maxBatch);
        let outcomes: ScanOutcome[];
        try {
          const shard = await this.services.shards.open(lane.index);
          if (!lane.bound) {
            await bindStream(shard, SCANS_STREAM, this.streamCreated);
            lane.bound = true;
          }
          const started = performance.now();
          outcomes = await applyScanBatch(shard, batch.map((b) => b.item), { historyGapMs: this.historyGapMs });
          metrics.observe('trackd_scan_batch_seconds', 'Time to apply one shard batch of scans', { shard: lane.index }, (performance.now() - started) / 1000);
        } catch (err) {
          metrics.inc('trackd_scan_batch_failures_total', 'Shard batches that failed and will be retried', { shard: lane.index });
          logger.error({ err: (err as Error).message, shard: lane.index, messages: batch.length }, 'scan batch failed; retrying');
          if (this.stopping) return;
          for (const b of batch) b.msg.working();
          await sleep(backoff);
          backoff = Math.min(backoff * 2, 5000);
          continue;
        }
        backoff = 100;
        await this.settle(batch, outcomes);
        lane.queue.splice(0, batch.length);
      }
    } finally {
      lane.running = false;
    }
  }

  /** After the commit: dead letters first (persisted by JetStream), then the acks. */
  private async settle(batch: InHand[], outcomes: ScanOutcome[]): Promise<void> {
    const { metrics } = this.services;
    let applied = 0;
    let redelivered = 0;
    let duplicate = 0;
    let reads = 0;
    let unknownTags = 0;
    let locationTags = 0;
    const dead: Promise<void>[] = [];
    for (let i = 0; i < batch.length; i++) {
      const o = outcomes[i];
      const { msg, item } = batch[i];
      switch (o.kind) {
        case 'applied':
          applied++;
          reads += o.readsApplied;
          unknownTags += o.unknownTags;
          locationTags += o.locationTags;
          break;
        case 'redelivered':
          redelivered++;
          break;
        case 'duplicate':
          duplicate++;
          break;
        case 'dead':
          dead.push(this.publishDead(msg, String(item.scan.orgId), o));
          continue;
      }
      msg.ack();
      this.inHand.delete(msg.seq);
    }
    if (applied) metrics.inc('trackd_scans_applied_total', 'Scan messages applied', {}, applied);
    if (redelivered) metrics.inc('trackd_scans_redelivered_total', 'Redelivered scan messages acked without effect (already applied)', {}, redelivered);
    if (duplicate) metrics.inc('trackd_scans_duplicate_total', 'Scan messages whose event_id was already applied', {}, duplicate);
    if (reads) metrics.inc('trackd_scan_reads_applied_total', 'Tag reads applied to assets', {}, reads);
    if (unknownTags) metrics.inc('trackd_scan_reads_skipped_total', 'Tag reads skipped', { reason: 'unknown_tag' }, unknownTags);
    if (locationTags) metrics.inc('trackd_scan_reads_skipped_total', 'Tag reads skipped', { reason: 'location_tag' }, locationTags);
    await Promise.all(dead);
  }

  private deadLetter(msg: JsMsg, orgToken: string, dead: DeadLetter): void {
    const task = this.publishDead(msg, orgToken, dead).finally(() => this.sideTasks.delete(task));
    this.sideTasks.add(task);
  }

  /** Copies a message that can never apply to scans_dead.<org_id> with its reason, then acks it. */
  private async publishDead(msg: JsMsg, orgToken: string, dead: DeadLetter): Promise<void> {
    const h = headers();
    h.set('Trackd-Dead-Reason', dead.reason);
    h.set('Trackd-Dead-Detail', headerSafe(dead.detail));
    h.set('Trackd-Original-Subject', msg.subject);
    h.set('Trackd-Original-Seq', String(msg.seq));
    const original = msg.headers?.get('Nats-Msg-Id');
    if (original) h.set('Trackd-Original-Msg-Id', headerSafe(original));
    let backoff = 100;
    for (;;) {
      try {
        // The msg id makes a re-dead-lettering after a restart a no-op within the duplicate window.
        await this.js.publish(`scans_dead.${orgToken}`, msg.data, { headers: h, msgID: `SCANS-${this.streamCreated}-${msg.seq}` });
        break;
      } catch (err) {
        if (this.stopping) return;
        this.services.logger.warn({ err: (err as Error).message }, 'dead letter publish failed; retrying');
        await sleep(backoff);
        backoff = Math.min(backoff * 2, 5000);
      }
    }
    this.services.metrics.inc('trackd_scans_dead_lettered_total', 'Scan messages copied to scans_dead.<org_id>', { reason: dead.reason });
    this.services.logger.info({ reason: dead.reason, detail: dead.detail, subject: msg.subject, seq: msg.seq }, 'scan dead-lettered');
    msg.ack();
    this.inHand.delete(msg.seq);
  }

  /** Waits until every message in hand is committed and acked (or given up on at shutdown). */
  private async drain(): Promise<void> {
    for (;;) {
      const busy = [...this.lanes.values()].some((l) => l.running || l.scheduled || l.queue.length > 0);
      if (!busy && this.sideTasks.size === 0) break;
      if (this.stopping && ![...this.lanes.values()].some((l) => l.running || l.scheduled) && this.sideTasks.size === 0) break;
      await sleep(5);
    }
    this.inHand.clear();
  }

  async stop(): Promise<void> {
    this.stopping = true;
    this.services.readiness.consumer = false;
    await this.messages?.close();
    await this.loop;
    await this.nc.drain();
  }
}

/** Connects to NATS, ensures the streams and consumes SCANS into the shards. */
export async function startScanIngest(services: Services, natsUrl: string, options: Partial<IngestOptions> = {}): Promise<ScanIngest> {
  const nc = await connectNats(natsUrl, 'trackd-ingest', { reconnect: true });
  const jsm = await jetstreamManager(nc);
  const js = jetstream(nc);
  return new ScanConsumer(services, nc, jsm, js, { ...DEFAULT_OPTIONS, ...options });
}
