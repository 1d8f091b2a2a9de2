/**
 * Raw JetStream ceiling: the same client library, message size and ack mode as trackd's consumer
 * (durable pull consumer, explicit per-message ack, consume() with the same buffer), on the same
 * nats-server, with no work per message. Own stream, deleted afterwards.
 * `node jetstream.js SPEC.json` prints {publish_rate, consume_rate, messages, bytes}.
 */
import fs from 'node:fs';
import { connect, headers, nanos } from '@nats-io/transport-node';
import { AckPolicy, DeliverPolicy, StorageType, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { ScanGenerator, type ScanPlan } from '../lib/scanPlan.js';
import { specArg } from '../lib/args.js';

interface Spec {
  natsUrl: string;
  plan: ScanPlan;
  maxMessages: number;
}

const spec = JSON.parse(fs.readFileSync(specArg(), 'utf8')) as Spec;
const nc = await connect({ servers: spec.natsUrl.split(','), name: 'bench-jetstream-ceiling' });
const jsm = await jetstreamManager(nc);
const js = jetstream(nc);
const stream = `BENCH_RAW_${process.pid}`;
const prefix = `benchraw${process.pid}`;
await jsm.streams.add({ name: stream, subjects: [`${prefix}.>`], storage: StorageType.File, duplicate_window: nanos(120_000) });
try {
  const generator = new ScanGenerator(spec.plan);
  const total = spec.plan.messages;
  let bytes = 0;
  const publishStarted = performance.now();
  let inFlight: Promise<unknown>[] = [];
  while (!generator.done) {
    const m = generator.next();
    bytes += m.body.length;
    const h = headers();
    h.set('Nats-Msg-Id', m.eventId);
    inFlight.push(js.publish(`${prefix}.1.fixed`, m.body, { headers: h }));
    if (inFlight.length >= 2_000) {
      await Promise.all(inFlight);
      inFlight = [];
    }
  }
  await Promise.all(inFlight);
  const publishSeconds = (performance.now() - publishStarted) / 1000;

  await jsm.consumers.add(stream, {
    durable_name: 'raw',
    ack_policy: AckPolicy.Explicit,
    deliver_policy: DeliverPolicy.All,
    ack_wait: nanos(60_000),
    max_ack_pending: 20_000,
  });
  const consumer = await js.consumers.get(stream, 'raw');
  const consumeStarted = performance.now();
  const messages = await consumer.consume({ max_messages: spec.maxMessages });
  let consumed = 0;
  for await (const msg of messages) {
    msg.ack();
    if (++consumed === total) break;
  }
  const consumeSeconds = (performance.now() - consumeStarted) / 1000;
  await messages.close();
  process.stdout.write(
    `${JSON.stringify({ messages: total, bytes_per_message: Math.round(bytes / total), publish_rate: Math.round(total / publishSeconds), consume_rate: Math.round(total / consumeSeconds) })}\n`,
  );
} finally {
  await jsm.streams.delete(stream).catch(() => undefined);
  await nc.close();
}
