/**
 * The purge of the inputs after a snapshot (src/shards/retention.ts purgeInputs) in cluster mode,
 * where every shard has its own consumer per input stream: it purges below the lowest ack floor of
 * those consumers, and not at all while one of them is missing (a node taking a shard over
 * re-creates its consumer: delete, then add), or it would remove scans that shard has not applied.
 * Nor past what each shard's holder reports settled with its lease: nats-server before 2.11 can move
 * a replicated consumer's floor past messages it never delivered (nats-server#6566).
 */
import { AckPolicy } from '@nats-io/jetstream';
import t from 'tap';
import { LeaseBucket } from '../../src/cluster/leaseBucket.js';
import type { Lease } from '../../src/cluster/leases.js';
import { purgeInputs } from '../../src/shards/retention.js';
import { SCANS_STREAM } from '../../src/scans/streams.js';
import { scansAndJournal } from '../helpers/journal.js';

t.test(
  'in cluster mode the inputs are purged below every shard consumer’s floor and holder’s report, and not while one is missing',
  async (t) => {
    const { nc, jsm, js } = await scansAndJournal(t);
    const ack = async (durable: string, count: number) => {
      const messages = await (await js.consumers.get(SCANS_STREAM, durable)).fetch({ max_messages: count, expires: 5000 });
      for await (const msg of messages) await msg.ackAck();
    };
    for (const durable of ['trackd-scans-s0', 'trackd-scans-s1'])
      await jsm.consumers.add(SCANS_STREAM, { durable_name: durable, ack_policy: AckPolicy.Explicit });
    await ack('trackd-scans-s0', 10);
    await ack('trackd-scans-s1', 4);
    const leases = await LeaseBucket.open(nc, 1, 5000);
    const revisions = [0, 0];
    const lease = async (shard: number, value: Lease) => {
      revisions[shard] = await leases.put(`shard.${shard}`, value, revisions[shard]!);
    };
    const firstSeq = async () => (await jsm.streams.info(SCANS_STREAM)).state.first_seq;
    const purgedBelow = async () => (await purgeInputs(js, jsm, 2)).map((p) => [p.stream, p.below]);

    t.same(await purgedBelow(), [], 'no lease reports anything yet: nothing is purged');
    await lease(0, { node: 'a', inputs: { SCANS: 10, READERS: 0 } });
    t.same(await purgedBelow(), [], 'shard 1 has no report (a holder that has not renewed since its claim): nothing is purged');
    await lease(1, { node: 'b', inputs: { SCANS: 4, READERS: 0 } });
    t.same(await purgedBelow(), [[SCANS_STREAM, 5]], 'both shard consumers listed and reported: purged below the lower floor (4) plus one');
    t.equal(await firstSeq(), 5);

    // The server says shard 1's consumer is done through 12; its holder settled only through 7 (what
    // nats-server#6566 looks like from here): the messages after 7 stay for its next session.
    await ack('trackd-scans-s1', 8);
    await lease(1, { node: 'b', inputs: { SCANS: 7, READERS: 0 } });
    t.same(await purgedBelow(), [[SCANS_STREAM, 8]], 'purged below what the holder settled (7) plus one, not below the floor');
    t.equal(await firstSeq(), 8);

    // Filtered consumers (partitioned subjects) report null: their floors stand.
    await lease(0, { node: 'a', inputs: { SCANS: null, READERS: null } });
    await lease(1, { node: 'b', inputs: { SCANS: null, READERS: null } });
    t.same(await purgedBelow(), [[SCANS_STREAM, 11]], 'null reports: purged below the lower floor (10) plus one');

    // Shard 1's consumer is being re-created by a node taking the shard over: gone for a moment.
    await jsm.consumers.delete(SCANS_STREAM, 'trackd-scans-s1');
    t.same(await purgeInputs(js, jsm, 2), [], 'shard 1 has no consumer listed: nothing is purged');
    t.equal(await firstSeq(), 11, 'the messages shard 1 has not applied are still there');

    // What the guard prevents: the other consumer's floor alone would take them.
    await ack('trackd-scans-s0', 10);
    t.same(
      (await purgeInputs(js, jsm)).map((p) => [p.stream, p.below]),
      [[SCANS_STREAM, 21]],
      'without the shard count the purge follows the consumers it lists',
    );
  },
);
