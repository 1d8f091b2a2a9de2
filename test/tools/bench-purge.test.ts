/**
 * The bench's purge of a kept data dir's SCANS (bench/lib/ingest.ts purgeAppliedScans): only what
 * every consumer has acked goes, and the stream's sequences stay.
 */
import { AckPolicy, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import t from 'tap';
import { purgeAppliedScans } from '../../bench/lib/ingest.js';
import { startNats } from '../helpers/trackd.js';

t.test('purges up to the lowest ack floor of the consumers, and nothing without a stream or a consumer', async (t) => {
  const nats = await startNats(t);
  t.equal(await purgeAppliedScans(nats.url), 0, 'no SCANS stream: nothing');
  const nc = await connect({ servers: nats.url });
  t.teardown(() => nc.close());
  const jsm = await jetstreamManager(nc);
  const js = jetstream(nc);
  await jsm.streams.add({ name: 'SCANS', subjects: ['scans.>'] });
  for (let i = 1; i <= 10; i++) await js.publish('scans.1.fixed', `{"n":${i}}`);
  t.equal(await purgeAppliedScans(nats.url), 0, 'no consumer: nothing is known applied');

  const ackFirst = async (durable: string, count: number) => {
    await jsm.consumers.add('SCANS', { durable_name: durable, ack_policy: AckPolicy.Explicit });
    const consumer = await js.consumers.get('SCANS', durable);
    const batch = await consumer.fetch({ max_messages: count, expires: 2_000 });
    for await (const m of batch) await m.ackAck();
  };
  await ackFirst('ahead', 7);
  await ackFirst('behind', 4);
  t.equal(await purgeAppliedScans(nats.url), 4, 'the four messages both consumers acked');
  const after = (await jsm.streams.info('SCANS')).state;
  t.same(
    { first: after.first_seq, last: after.last_seq, messages: after.messages },
    { first: 5, last: 10, messages: 6 },
    'the rest stays, at its sequences',
  );
  t.equal(await purgeAppliedScans(nats.url), 0, 'again: nothing more is acked by both');
  const next = await js.publish('scans.1.fixed', '{"n":11}');
  t.equal(next.seq, 11, 'the stream goes on from its last sequence');
});
