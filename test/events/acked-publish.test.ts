/**
 * The event relay's publisher (src/events/ackedPublish.ts) against a real nats-server: a batch
 * resolves only when the stream acknowledged every message, re-publishes are dropped by their
 * Nats-Msg-Id and still acknowledged, and every way of not being stored rejects the batch (no
 * stream takes the subject, the stream refuses the message, the publisher closes while acks are out).
 */
import t from 'tap';
import { jetstreamManager } from '@nats-io/jetstream';
import { headers } from '@nats-io/transport-node';
import { AckedPublisher, type StreamMessage } from '../../src/events/ackedPublish.js';
import { natsClient } from '../helpers/scans.js';
import { startNats } from '../helpers/trackd.js';

const nats = await startNats(t);
const nc = await natsClient(t, nats.url);
const jsm = await jetstreamManager(nc);
await jsm.streams.add({ name: 'ACKED', subjects: ['acked.>'], duplicate_window: 60_000_000_000 });
await jsm.streams.add({ name: 'SMALL', subjects: ['small.>'], max_msg_size: 64 });

const message = (subject: string, id: string, data = `{"id":"${id}"}`): StreamMessage => {
  const h = headers();
  h.set('Nats-Msg-Id', id);
  return { subject, data, headers: h };
};
const batch = (from: number, count: number) => Array.from({ length: count }, (_, i) => message(`acked.${from + i}`, `m-${from + i}`));
const stored = async (name: string) => (await jsm.streams.info(name)).state.messages;

t.test('a batch resolves once every message is in the stream; the same ids again are acknowledged and dropped', async (t) => {
  const publisher = new AckedPublisher(nc);
  t.teardown(() => publisher.close());
  await publisher.publishAll(batch(0, 300));
  t.equal(await stored('ACKED'), 300, 'all 300 stored when the batch resolved');
  await publisher.publishAll(batch(200, 200));
  t.equal(await stored('ACKED'), 400, 'the 100 ids seen before are dropped, the 100 new ones stored');
  await t.resolves(publisher.publishAll([]), 'an empty batch resolves');
});

t.test('every way of not being stored rejects the batch, and the publisher goes on afterwards', async (t) => {
  const publisher = new AckedPublisher(nc);
  t.teardown(() => publisher.close());
  await t.rejects(publisher.publishAll([message('nostream.x', 'n-1')]), /no responders/, 'no stream takes the subject');
  await t.rejects(
    publisher.publishAll([message('small.x', 's-1', 'x'.repeat(200))]),
    /JetStream refused the message/,
    'the stream refuses a message larger than its limit',
  );
  const waiting = publisher.publishAll(batch(1000, 50));
  await t.rejects(publisher.publishAll(batch(2000, 1)), /still waiting/, 'one batch at a time');
  await waiting;
  t.equal(await stored('ACKED'), 450, 'the batch that was waiting was stored whole');
});

t.test('a publisher closed while acks are out rejects its batch', async (t) => {
  const publisher = new AckedPublisher(nc);
  const waiting = publisher.publishAll(batch(3000, 100));
  publisher.close();
  await t.rejects(waiting, /publisher closed/);
});

t.test('a batch whose acks do not all come within the timeout rejects', async (t) => {
  const publisher = new AckedPublisher(nc, 200);
  t.teardown(() => publisher.close());
  // No stream captures `quiet.>`, but a subscriber that never answers is there: no ack and no 503 comes.
  const silent = nc.subscribe('quiet.>', { callback: () => undefined });
  t.teardown(() => silent.unsubscribe());
  await nc.flush();
  await t.rejects(publisher.publishAll([message('quiet.x', 'q-1')]), /no ack for 1 of 1 messages within 200 ms/);
});

t.test('frames built by the caller: stored once each, counted, and refused like messages', async (t) => {
  const publisher = new AckedPublisher(nc);
  t.teardown(() => publisher.close());
  const frame = (reply: string, i: number, subject: string, id: string, data: string) => {
    const h = `NATS/1.0\r\nNats-Msg-Id: ${id}\r\n\r\n`;
    const bytes = Buffer.byteLength(h) + Buffer.byteLength(data);
    return Buffer.from(`HPUB ${subject} ${reply}${i} ${Buffer.byteLength(h)} ${bytes}\r\n${h}${data}\r\n`);
  };
  const before = await stored('ACKED');
  // Replies 0, 2, 4, ... 78: indexes with gaps, as positions past a batch's start can have.
  const sent = await publisher.publishFrames((reply) => ({
    frames: Array.from({ length: 40 }, (_, i) => frame(reply, 2 * i, `acked.f${i}`, `f-${i}`, `{"n":${i},"name":"Süd ✓"}`)),
    span: 80,
  }));
  t.equal(sent, 40, 'the number of frames sent');
  t.equal(await stored('ACKED'), before + 40, 'every frame stored when the batch resolved');
  const last = await jsm.streams.getMessage('ACKED', { last_by_subj: 'acked.f39' });
  t.equal(last?.string(), '{"n":39,"name":"Süd ✓"}', 'the data as framed, multi-byte characters counted in bytes');
  t.equal(await publisher.publishFrames(() => undefined), 0, 'nothing to send: nothing waited for');
  await t.rejects(
    publisher.publishFrames((reply) => ({ frames: [frame(reply, 0, 'small.f', 'sf-1', 'x'.repeat(200))], span: 1 })),
    /JetStream refused the message/,
    'an error ack rejects a batch of frames too',
  );
  await t.rejects(
    publisher.publishFrames((reply) => ({ frames: [frame(reply, 0, 'nostream.f', 'nf-1', '{}')], span: 1 })),
    /no responders/,
  );
});
