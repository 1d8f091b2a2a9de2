/**
 * The purge of the inputs after a snapshot (src/shards/retention.ts purgeInputs) in cluster mode,
 * where every shard has its own consumer per input stream: it purges below the lowest ack floor of
 * those consumers, and not at all while one of them is missing (a node taking a shard over
 * re-creates its consumer: delete, then add), or it would remove scans that shard has not applied.
 */
import { AckPolicy, jetstream, jetstreamManager } from '@nats-io/jetstream';
import t from 'tap';
import { JOURNAL_STREAM } from '../../src/shards/journalEntry.js';
import { purgeInputs } from '../../src/shards/retention.js';
import { ensureStream, SCANS_STREAM } from '../../src/scans/streams.js';
import { natsClient, publish, scanBody } from '../helpers/scans.js';
import { startNats } from '../helpers/trackd.js';

t.test('in cluster mode the inputs are purged below every shard consumer’s floor, and not while one is missing', async (t) => {
  const nats = await startNats(t);
  const nc = await natsClient(t, nats.url);
  const jsm = await jetstreamManager(nc);
  const js = jetstream(nc);
  await ensureStream(jsm, SCANS_STREAM, 'scans.>');
  await ensureStream(jsm, JOURNAL_STREAM, 'journal.*');
  for (let i = 0; i < 10; i++) await publish(nc, 'scans.1.fixed', scanBody('DOCK', ['rfid:E2']));
  const ackFirst = async (durable: string, count: number) => {
    await jsm.consumers.add(SCANS_STREAM, { durable_name: durable, ack_policy: AckPolicy.Explicit });
    const messages = await (await js.consumers.get(SCANS_STREAM, durable)).fetch({ max_messages: count, expires: 5000 });
    for await (const msg of messages) await msg.ackAck();
  };
  await ackFirst('trackd-scans-s0', 10);
  await ackFirst('trackd-scans-s1', 4);
  const firstSeq = async () => (await jsm.streams.info(SCANS_STREAM)).state.first_seq;

  const purged = await purgeInputs(js, jsm, 2);
  t.same(
    purged.map((p) => [p.stream, p.below]),
    [[SCANS_STREAM, 5]],
    'both shard consumers listed: purged below the lower floor (4) plus one',
  );
  t.equal(await firstSeq(), 5);

  // Shard 1's consumer is being re-created by a node taking the shard over: gone for a moment.
  await jsm.consumers.delete(SCANS_STREAM, 'trackd-scans-s1');
  t.same(await purgeInputs(js, jsm, 2), [], 'shard 1 has no consumer listed: nothing is purged');
  t.equal(await firstSeq(), 5, 'the messages shard 1 has not applied are still there');

  // What the guard prevents: the other consumer's floor alone would take them.
  t.same(
    (await purgeInputs(js, jsm)).map((p) => [p.stream, p.below]),
    [[SCANS_STREAM, 11]],
    'without the shard count the purge follows the consumers it lists',
  );
});
