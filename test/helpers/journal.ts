/** A shard's journal as JetStream holds it: what the journal and snapshot tests read back. */
import { DeliverPolicy, jetstream, jetstreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { JOURNAL_STREAM, type JournalEntry } from '../../src/shards/journalEntry.js';
import { ensureStream, SCANS_STREAM } from '../../src/scans/streams.js';
import { natsClient, publish, scanBody } from './scans.js';
import { startNats, type Teardown } from './trackd.js';

/** A nats-server with SCANS (holding `scans` scan messages of org 1) and an empty journal, for the retention tests. */
export async function scansAndJournal(t: Teardown, scans = 20) {
  const nc = await natsClient(t, (await startNats(t)).url);
  const jsm = await jetstreamManager(nc);
  const js = jetstream(nc);
  await ensureStream(jsm, SCANS_STREAM, 'scans.>');
  await ensureStream(jsm, JOURNAL_STREAM, 'journal.*');
  for (let i = 0; i < scans; i++) await publish(nc, 'scans.1.fixed', scanBody('DOCK', ['rfid:E2']));
  return { nc, jsm, js };
}

/** Every entry the journal still holds for one shard, in order. */
export async function journalEntries(nc: NatsConnection, shard: number): Promise<{ seq: number; entry: JournalEntry }[]> {
  const jsm = await jetstreamManager(nc);
  const last = (await jsm.streams.getMessage(JOURNAL_STREAM, { last_by_subj: `journal.${shard}` }))?.seq ?? 0;
  if (last === 0) return [];
  const consumer = await jetstream(nc).consumers.get(JOURNAL_STREAM, {
    filter_subjects: `journal.${shard}`,
    deliver_policy: DeliverPolicy.All,
  });
  const entries: { seq: number; entry: JournalEntry }[] = [];
  const messages = await consumer.consume();
  for await (const msg of messages) {
    entries.push({ seq: msg.seq, entry: msg.json<JournalEntry>() });
    if (msg.seq >= last) break;
  }
  await messages.close();
  return entries;
}
