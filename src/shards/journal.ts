import type { NatsConnection } from '@nats-io/transport-node';
import { splitPartition } from '../scans/partition.js';
import { IdleWatch } from './idleWatch.js';
import {
  DeliverPolicy,
  JetStreamApiCodes,
  jetstream,
  jetstreamManager,
  type JetStreamClient,
  type Consumer,
  type JetStreamManager,
  type JsMsg,
  type OrderedConsumerOptions,
} from '@nats-io/jetstream';
import { ADMIN_OPTIONS, connectNats, ensureStream, isApiError, retryOnTimeout } from '../scans/streams.js';
import { JOURNAL_STREAM, JournalInputsGone, journalSubject, type StreamInputs, type StreamMessage } from './journalEntry.js';

export interface JournalSettings {
  natsUrl: string;
  /** Copies JetStream keeps of the journal stream when it creates it (1 on one server, 3 in a cluster). */
  replicas: number;
  /**
   * Cluster mode by lease: the number of shards, each with its own consumer per input stream
   * (`<durable>-s<n>`). A purge of the inputs then needs every one of them listed.
   */
  shardConsumers?: number;
}

/**
 * Whether two creation times read from the journal stream name the same stream. nats-server 2.9
 * reports a replicated stream's creation time as the replica answering made it, so the time read
 * after a leader change differs by some milliseconds (seen in the 3-node test: 16:05:13.888412641Z
 * against .876662494Z, the stream never created again, and a rebuild refused as "a history this
 * shard's state is not from"). A stream deleted and created again is further apart than a minute.
 */
export function sameJournalStream(a: string, b: string): boolean {
  if (a === b) return true;
  const [ta, tb] = [Date.parse(a), Date.parse(b)];
  return a !== '' && b !== '' && Number.isFinite(ta) && Number.isFinite(tb) && Math.abs(ta - tb) < 60_000;
}

/**
 * An append refused because the journal's last entry on the shard's subject is not the one this
 * writer appended last: another writer has appended since, so this one no longer owns the shard.
 */
export class JournalFenced extends Error {
  constructor(
    readonly index: number,
    readonly expected: number,
    detail: string,
  ) {
    super(`shard ${index}: journal append after entry ${expected} refused (${detail}); another writer owns the shard now`);
    this.name = 'JournalFenced';
  }
}

/** When JetStream stored a message, in ms (the consumer's streamTime). */
const storedAt = (msg: JsMsg) => Math.floor(msg.info.timestampNanos / 1_000_000);

/**
 * One shard's journal on JetStream, and the input streams its entries refer to. Appends carry
 * Nats-Expected-Last-Subject-Sequence, so an append lands only directly after the entry its writer
 * knows as the last one.
 */
export class ShardJournal implements StreamInputs {
  readonly subject: string;

  private constructor(
    readonly index: number,
    private readonly nc: NatsConnection,
    private readonly js: JetStreamClient,
    private readonly jsm: JetStreamManager,
    /** The journal stream's creation time: which incarnation the shard's position refers to. */
    readonly created: string,
  ) {
    this.subject = journalSubject(index);
  }

  static async open(settings: JournalSettings, index: number): Promise<ShardJournal> {
    const nc = await connectNats(settings.natsUrl, `trackd-journal-${index}`, { reconnect: true, noAsyncTraces: true });
    try {
      const stream = await ensureStream(await jetstreamManager(nc, ADMIN_OPTIONS), JOURNAL_STREAM, 'journal.*', settings.replicas);
      // The admin client's 30 s would hold a recovery that long on a request lost to a disconnection.
      return new ShardJournal(index, nc, jetstream(nc), await jetstreamManager(nc), stream.created);
    } catch (err) {
      await nc.close();
      throw err;
    }
  }

  /** The largest message the server takes: an entry is split below it. */
  get maxPayload(): number {
    return this.nc.info?.max_payload ?? 1024 * 1024;
  }

  /** The sequence of the last entry on this shard's subject (0: none). */
  async last(): Promise<number> {
    const msg = await this.jsm.streams.getMessage(JOURNAL_STREAM, { last_by_subj: this.subject });
    return msg?.seq ?? 0;
  }

  /** How many entries the shard's subject holds (after a purge: those since the latest snapshot, and its own). */
  async count(): Promise<number> {
    const info = await this.jsm.streams.info(JOURNAL_STREAM, { subjects_filter: this.subject });
    return info.state.subjects?.[this.subject] ?? 0;
  }

  /**
   * Appends an entry right after entry `expected` (0: the first on the subject); resolves with its
   * sequence once JetStream has stored it. Throws JournalFenced when another entry came after
   * `expected`; any other failure (timeout, broker away) leaves the outcome unknown.
   */
  async append(payload: Uint8Array, expected: number): Promise<number> {
    try {
      const ack = await this.js.publish(this.subject, payload, { expect: { lastSubjectSequence: expected } });
      return ack.seq;
    } catch (err) {
      if (isApiError(err, JetStreamApiCodes.StreamWrongLastSequence)) throw new JournalFenced(this.index, expected, (err as Error).message);
      throw err;
    }
  }

  /** The entries on this shard's subject after `after`, up to `upTo`, in order. */
  async *entries(after: number, upTo: number): AsyncGenerator<{ seq: number; data: Uint8Array }> {
    if (upTo <= after) return;
    for await (const msg of this.read(JOURNAL_STREAM, after + 1, upTo, this.subject)) yield { seq: msg.seq, data: msg.data };
  }

  async messages(stream: string, seqs: number[]): Promise<StreamMessage[]> {
    const out: StreamMessage[] = [];
    const first = seqs[0];
    const last = seqs.at(-1);
    if (first === undefined || last === undefined) return out;
    const gone = (seq: number) => new JournalInputsGone(`${stream} message ${seq} is gone (the journal refers to it)`);
    let i = 0;
    for await (const msg of this.read(stream, first, last)) {
      if (msg.seq > seqs[i]!) throw gone(seqs[i]!);
      if (msg.seq === seqs[i]) {
        // Stored with its partition token (partitioned input subjects): routed as published.
        out.push({ seq: msg.seq, subject: splitPartition(msg.subject).subject, data: msg.data, at: storedAt(msg) });
        if (++i === seqs.length) break;
      }
    }
    if (i < seqs.length) throw gone(seqs[i]!);
    return out;
  }

  private read(stream: string, first: number, last: number, subject?: string): AsyncGenerator<JsMsg> {
    return readStream(this.js, this.jsm, stream, first, last, subject);
  }

  /** JetStream on this journal's connection (the purges after a snapshot). */
  get jetstream(): { js: JetStreamClient; jsm: JetStreamManager } {
    return { js: this.js, jsm: this.jsm };
  }

  async close(): Promise<void> {
    await this.nc.close();
  }
}

/**
 * The messages of `stream` from `first` through `last` (of `subject` only, when given), read with
 * an ordered consumer. Throws when the stream no longer holds `first` (JournalInputsGone) or not
 * yet `last`.
 */
export async function* readStream(
  js: JetStreamClient,
  jsm: JetStreamManager,
  stream: string,
  first: number,
  last: number,
  subject?: string,
): AsyncGenerator<JsMsg> {
  const { state } = await jsm.streams.info(stream);
  // One subject's messages are a subset: those below the stream's first may be gone for good (a
  // purge), which the reader of the subject judges (a journal entry names the one before it).
  const from = subject === undefined ? first : Math.max(first, state.first_seq);
  // Only a read of the whole stream can start below its first: the inputs a journal entry refers to.
  if (from < state.first_seq) throw new JournalInputsGone(`${stream} message ${from} is gone (the journal refers to it)`);
  if (last > state.last_seq) throw new Error(`${stream} holds ${state.first_seq}..${state.last_seq}; ${first}..${last} is wanted`);
  const messages = await retryOnTimeout(async () => {
    const consumer = await hedgedOrderedConsumer(js, stream, {
      deliver_policy: DeliverPolicy.StartSequence,
      opt_start_seq: from,
      ...(subject === undefined ? {} : { filter_subjects: subject }),
    });
    return consumer.consume({ max_messages: 1000 });
  });
  // The last resort: an ordered consumer that stops delivering (its re-creation after a reconnect
  // placed on a server that has died, before 2.12) would wait for ever: nothing for READ_IDLE_MS
  // ends the read as a timeout, to be retried.
  const watch = new IdleWatch(READ_IDLE_MS, () => void messages.close());
  try {
    for await (const msg of messages) {
      watch.stop();
      yield msg;
      if (msg.seq >= last) break;
      watch.touch();
    }
    if (watch.fired) throw watch.timeout(`reading ${stream} from ${from}`);
  } finally {
    watch.stop();
    await messages.close();
  }
}

/** A stream read that receives nothing for this long is given up (and retried by its caller). */
const READ_IDLE_MS = 15_000;

/** How long a consumer's creation may go unanswered before another is asked for beside it. */
const HEDGE_MS = 500;
/** Creations asked for at most, HEDGE_MS apart, before the read fails (to be retried by its caller). */
const HEDGE_ATTEMPTS = 8;

/**
 * An ordered consumer of `stream`, asked for again beside the first request when that one is not
 * answered within HEDGE_MS (then every HEDGE_MS), the first answered used and the others deleted as
 * they answer. nats-server before 2.12 places an ephemeral consumer of a replicated stream on one of
 * the stream's servers at random, a dead one included (`createGroupForConsumer` and `setPreferred`
 * in server/jetstream_cluster.go at v2.9.10; fixed by nats-server pull request 7165), and only the
 * server it is placed on answers its creation: with one server of three down, one creation in three
 * went unanswered until the client's timeout (5 s), then the read was tried again from the start.
 * Each request is placed anew, so HEDGE_ATTEMPTS of them all on the dead server is a chance of 3^-8.
 * A bulk read still goes through one consumer (several times faster than a get by sequence per message).
 */
function hedgedOrderedConsumer(js: JetStreamClient, stream: string, options: Partial<OrderedConsumerOptions>): Promise<Consumer> {
  return new Promise((resolve, reject) => {
    let settled = false;
    let launched = 0;
    let pending = 0;
    let timer: NodeJS.Timeout | undefined;
    const settle = (done: () => void) => {
      settled = true;
      clearTimeout(timer);
      done();
    };
    const launch = () => {
      launched++;
      pending++;
      if (launched < HEDGE_ATTEMPTS) timer = setTimeout(launch, HEDGE_MS);
      js.consumers.get(stream, { ...options }).then(
        (consumer) => {
          pending--;
          if (settled) void consumer.delete().catch(() => undefined);
          else settle(() => resolve(consumer));
        },
        (err: Error) => {
          pending--;
          if (settled) return;
          // A refusal is the stream's (gone, no leader): every request would get it.
          if (err.name !== 'TimeoutError') settle(() => reject(err));
          else if (pending === 0 && launched >= HEDGE_ATTEMPTS) settle(() => reject(err));
          else if (pending === 0) {
            clearTimeout(timer);
            launch();
          }
        },
      );
    };
    launch();
  });
}
