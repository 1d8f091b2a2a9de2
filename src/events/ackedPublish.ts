import { createInbox, type Msg, type MsgHdrs, type NatsConnection, type Subscription } from '@nats-io/transport-node';

export interface StreamMessage {
  subject: string;
  data: string;
  /** Must hold `Nats-Msg-Id` when re-publishes are to be dropped by the stream. */
  headers: MsgHdrs;
}

/** How long a batch may wait for its acks (as `js.publish`'s default timeout). */
const ACK_TIMEOUT_MS = 5_000;

interface Batch {
  id: number;
  acked: Uint8Array;
  remaining: number;
  resolve: () => void;
  reject: (err: Error) => void;
  timer: NodeJS.Timeout;
}

/**
 * JetStream publishes whose acks come back on one subscription of our own: each message is a core
 * publish with a reply subject naming its batch and index, and a batch resolves when every index
 * was acknowledged by a stream. The same wire exchange as `js.publish`, without its per-message
 * cost: `js.publish` is a request, and nats-core's RequestOne, on every successful reply, also
 * builds `new RequestError("cancelled")` (an Error with its stack: its resolver calls cancel(),
 * which rejects the settled promise anyway; @nats-io/nats-core 3.4 lib/request.js), plus a timer
 * and promises per message; `noAsyncTraces` does not avoid that one. That was about a third of the
 * event relay's time on the shard thread during an import (README, "Bulk import and export").
 * One batch at a time.
 */
export class AckedPublisher {
  private readonly prefix = createInbox();
  private readonly sub: Subscription;
  private batch: Batch | undefined;
  private batches = 0;

  constructor(
    private readonly nc: NatsConnection,
    private readonly timeoutMs = ACK_TIMEOUT_MS,
  ) {
    this.sub = nc.subscribe(`${this.prefix}.>`, { callback: (err, msg) => this.onReply(err, msg) });
  }

  /** Publishes every message; resolves once a stream acknowledged each one, rejects on an error ack, no stream (no responders), or the timeout. */
  publishAll(messages: StreamMessage[]): Promise<void> {
    if (this.batch !== undefined) return Promise.reject(new Error('a batch is still waiting for its acks'));
    if (messages.length === 0) return Promise.resolve();
    const id = ++this.batches;
    return this.awaitAcks(id, messages.length, messages.length, () => {
      for (let i = 0; i < messages.length; i++) {
        const m = messages[i]!;
        this.nc.publish(m.subject, m.data, { headers: m.headers, reply: `${this.prefix}.${id}.${i}` });
      }
    });
  }

  /**
   * Publishes protocol frames built by the caller: `build` gets the reply prefix of this batch and
   * returns whole `HPUB` frames, each with the reply `<prefix>i`, i distinct and below `span`, or
   * nothing to send. Resolves to the number of frames once each was acknowledged, as publishAll.
   * For a caller that builds frames cheaper than nc.publish does (the relay: in SQL, beside the rows).
   */
  async publishFrames(build: (replyPrefix: string) => { frames: Buffer[]; span: number } | undefined): Promise<number> {
    if (this.batch !== undefined) throw new Error('a batch is still waiting for its acks');
    if (this.nc.isClosed()) throw new Error('connection closed');
    const id = ++this.batches;
    const built = build(`${this.prefix}.${id}.`);
    if (built === undefined || built.frames.length === 0) return 0;
    // nats-core has no public call that writes bytes as they are; its publish ends in this same
    // sendCommand (protocol.js publish), which queues them as one write.
    await this.awaitAcks(id, built.frames.length, built.span, () => protocolOf(this.nc).sendCommand(Buffer.concat(built.frames)));
    return built.frames.length;
  }

  private awaitAcks(id: number, count: number, span: number, send: () => void): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => this.fail(id, new Error(`no ack for ${this.batch?.remaining} of ${count} messages within ${this.timeoutMs} ms`)),
        this.timeoutMs,
      );
      this.batch = { id, acked: new Uint8Array(span), remaining: count, resolve, reject, timer };
      try {
        send();
      } catch (err) {
        this.fail(id, err as Error);
      }
    });
  }

  /** Rejects the batch waiting, if any (the connection is about to close), and ends the subscription. */
  close(): void {
    if (this.batch !== undefined) this.fail(this.batch.id, new Error('publisher closed'));
    this.sub.unsubscribe();
  }

  private onReply(err: Error | null, msg: Msg): void {
    const batch = this.batch;
    if (batch === undefined) return;
    if (err !== null) {
      this.fail(batch.id, err);
      return;
    }
    // `<prefix>.<batch>.<index>`; a reply to an earlier (failed) batch is ignored.
    const tail = msg.subject.slice(this.prefix.length + 1);
    const dot = tail.indexOf('.');
    if (Number(tail.slice(0, dot)) !== batch.id) return;
    const index = Number(tail.slice(dot + 1));
    if (!(index >= 0 && index < batch.acked.length) || batch.acked[index] === 1) return;
    const problem = ackProblem(msg);
    if (problem !== undefined) {
      this.fail(batch.id, problem);
      return;
    }
    batch.acked[index] = 1;
    if (--batch.remaining === 0) {
      this.batch = undefined;
      clearTimeout(batch.timer);
      batch.resolve();
    }
  }

  private fail(id: number, err: Error): void {
    const batch = this.batch;
    if (batch === undefined || batch.id !== id) return;
    this.batch = undefined;
    clearTimeout(batch.timer);
    batch.reject(err);
  }
}

/** The connection's protocol handler (nats-core 3.4 NatsConnectionImpl.protocol, not in its public types). */
function protocolOf(nc: NatsConnection): { sendCommand(cmd: Uint8Array): void } {
  return (nc as unknown as { protocol: { sendCommand(cmd: Uint8Array): void } }).protocol;
}

/** How every pub ack starts (nats-server marshals `error` before `stream`, so an error reply never does). */
const ACK_START = Buffer.from('{"stream":"');

/** Why a reply is no ack: no stream listens (503, no responders), an API error, or no stream named; undefined for an ack. */
function ackProblem(msg: Msg): Error | undefined {
  const data = msg.data;
  if (data.length > ACK_START.length + 1 && ACK_START.compare(data, 0, ACK_START.length) === 0 && data[ACK_START.length] !== 34)
    return undefined;
  if (msg.data.length === 0 && msg.headers?.code === 503) return new Error('no stream takes this subject (no responders)');
  let ack: { stream?: unknown; error?: { code?: number; description?: string } };
  try {
    ack = msg.json();
  } catch {
    return new Error('unreadable ack');
  }
  if (ack.error !== undefined) return new Error(`JetStream refused the message: ${ack.error.code} ${ack.error.description}`);
  if (typeof ack.stream !== 'string' || ack.stream === '') return new Error('invalid ack: no stream');
  return undefined;
}
