import { connect, headers, type NatsConnection } from '@nats-io/transport-node';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { ulid } from 'ulid';
import { eventually, type Teardown, type Trackd } from './trackd.js';

export async function natsClient(t: Teardown, url: string): Promise<NatsConnection> {
  const nc = await connect({ servers: url, maxReconnectAttempts: -1, reconnectTimeWait: 100 });
  t.teardown(() => nc.close());
  return nc;
}

export interface ScanBody {
  event_id?: string;
  observed_at?: string;
  location?: Record<string, unknown>;
  reads?: { tag_type: string; value: string }[];
  [key: string]: unknown;
}

export function scanBody(
  location: string,
  tags: string[],
  observedAt: Date | string = new Date(),
  extra: Partial<ScanBody> = {},
): ScanBody {
  return {
    event_id: ulid(),
    observed_at: typeof observedAt === 'string' ? observedAt : observedAt.toISOString(),
    location: { external_key: location },
    reads: tags.map((t) => ({ tag_type: t.slice(0, t.indexOf(':')), value: t.slice(t.indexOf(':') + 1) })),
    ...extra,
  };
}

/** Publishes to SCANS and waits for the PubAck; the Nats-Msg-Id defaults to the event id. */
export async function publish(
  nc: NatsConnection,
  subject: string,
  body: ScanBody | string | Uint8Array,
  msgId?: string | null,
): Promise<{ seq: number; duplicate: boolean }> {
  const data = typeof body === 'string' || body instanceof Uint8Array ? body : JSON.stringify(body);
  const h = headers();
  const id = msgId === undefined ? (typeof body === 'object' && !(body instanceof Uint8Array) ? body.event_id : undefined) : msgId;
  if (id) h.set('Nats-Msg-Id', id);
  const ack = await jetstream(nc).publish(subject, data, { headers: h });
  return { seq: ack.seq, duplicate: ack.duplicate };
}

export interface DeadLetterView {
  subject: string;
  reason: string | undefined;
  detail: string | undefined;
  originalSeq: string | undefined;
  originalSubject: string | undefined;
  data: string;
}

/** Every message in SCANS_DEAD, read by sequence. */
export async function deadLetters(nc: NatsConnection): Promise<DeadLetterView[]> {
  const jsm = await jetstreamManager(nc);
  let info: Awaited<ReturnType<typeof jsm.streams.info>>;
  try {
    info = await jsm.streams.info('SCANS_DEAD');
  } catch {
    return [];
  }
  const out: DeadLetterView[] = [];
  for (let seq = info.state.first_seq; seq <= info.state.last_seq && info.state.messages > 0; seq++) {
    const m = await jsm.streams.getMessage('SCANS_DEAD', { seq });
    if (m === null) continue;
    out.push({
      subject: m.subject,
      reason: m.header.get('Trackd-Dead-Reason') || undefined,
      detail: m.header.get('Trackd-Dead-Detail') || undefined,
      originalSeq: m.header.get('Trackd-Original-Seq') || undefined,
      originalSubject: m.header.get('Trackd-Original-Subject') || undefined,
      data: m.string(),
    });
  }
  return out;
}

/** The value of one Prometheus sample from /metrics (0 when absent). */
export async function metric(trackd: Trackd, name: string, labels = ''): Promise<number> {
  const res = await trackd.request('GET', '/metrics');
  const prefix = labels === '' ? `${name} ` : `${name}{${labels}} `;
  const line = res.text.split('\n').find((l) => l.startsWith(prefix));
  return line === undefined ? 0 : Number(line.slice(prefix.length));
}

/** Where trackd's durable consumer of a stream stands against the stream's last sequence now. */
export async function consumerReaches(
  nc: NatsConnection,
  reached: (c: { delivered: number; ackFloor: number; ackPending: number; pending: number }, last: number) => boolean,
  stream: string,
  durable: string,
  everyMs = 50,
): Promise<number> {
  // No account-info probe, and the stream's info retried: in a cluster, a request made while a
  // killed server's streams elect new leaders can time out (it did in CI, after the journal
  // leader's kill -9), and that says nothing about trackd's consumer.
  const jsm = await jetstreamManager(nc, { checkAPI: false });
  const { last } = await eventually(async () => ({ last: (await jsm.streams.info(stream)).state.last_seq }), 60_000, 200);
  let seen = 'no consumer info';
  await eventually(
    async () => {
      const c = await jsm.consumers.info(stream, durable).catch(() => undefined);
      if (c === undefined) return false;
      seen = `delivered ${c.delivered.stream_seq}, ack floor ${c.ack_floor.stream_seq}, ack pending ${c.num_ack_pending}, pending ${c.num_pending}, waiting pulls ${c.num_waiting}`;
      return reached(
        { delivered: c.delivered.stream_seq, ackFloor: c.ack_floor.stream_seq, ackPending: c.num_ack_pending, pending: c.num_pending },
        last,
      );
    },
    60_000,
    everyMs,
  ).catch((err: Error) => {
    throw new Error(`${durable} on ${stream} (last ${last}): ${seen}: ${err.message}`);
  });
  return last;
}

/**
 * Waits until trackd has settled every message its stream holds now: the consumer's ack floor is at
 * the stream's last sequence and nothing is in hand. trackd acks only after the commit, so a count
 * taken afterwards is final: no redelivery can still add to it ("exactly once", without a sleep).
 */
export function drained(nc: NatsConnection, stream = 'SCANS', durable = 'trackd-scans'): Promise<number> {
  // A filtered consumer's floor stays at its own last message: nothing left to deliver says the same.
  return consumerReaches(nc, (c, last) => c.ackPending === 0 && (c.ackFloor >= last || c.pending === 0), stream, durable);
}

/** Waits until trackd's consumer has been delivered every message the stream holds now (settled or not). */
export function delivered(nc: NatsConnection, stream = 'SCANS', durable = 'trackd-scans'): Promise<number> {
  return consumerReaches(nc, (c, last) => c.delivered >= last, stream, durable);
}

/** Publishes `bodies` to `subject`, 500 at a time. */
export async function publishAll(nc: NatsConnection, subject: string, bodies: Parameters<typeof publish>[2][]): Promise<void> {
  for (let i = 0; i < bodies.length; i += 500) await Promise.all(bodies.slice(i, i + 500).map((b) => publish(nc, subject, b)));
}

/**
 * Restarts a spawned trackd over a SCANS backlog and kills it (-9) once its consumer's ack floor
 * reaches `floor`: mid-drain. Returns the ack floor last seen before the kill.
 */
export async function restartAndKillMidDrain(trackd: Trackd, nc: NatsConnection, floor: number): Promise<number> {
  await trackd.restart();
  let killedAt = 0;
  await consumerReaches(
    nc,
    (c) => {
      killedAt = c.ackFloor;
      return c.ackFloor >= floor;
    },
    'SCANS',
    'trackd-scans',
    // Every 5 ms: a backlog's batches are large, and at 50 ms a drain of 8,000 scans could pass from
    // under the floor to its end between two polls (ack floor 1,735 then done), so the kill missed it.
    5,
  );
  trackd.process.kill('SIGKILL');
  await eventually(() => trackd.process.signalCode === 'SIGKILL', 5000);
  return killedAt;
}
