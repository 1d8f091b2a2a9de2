import type { JetStreamClient, JetStreamManager } from '@nats-io/jetstream';
import { LEASE_BUCKET } from '../cluster/leaseBucket.js';
import type { Lease } from '../cluster/leases.js';
import { scanSources } from '../scans/sources.js';
import { readStream } from './journal.js';
import { JOURNAL_STREAM, type JournalEntry } from './journalEntry.js';

const decoder = new TextDecoder();

/**
 * Drops shard `subject`'s journal entries below `position` (a snapshot's). The entry at `position`
 * stays, so the subject's last sequence (what the next append expects) never changes, and the
 * entry after it still names it as `prev`. Returns the entries dropped.
 */
export async function purgeJournalBelow(jsm: JetStreamManager, subject: string, position: number): Promise<number> {
  if (position <= 1) return 0;
  return (await jsm.streams.purge(JOURNAL_STREAM, { filter: subject, seq: position })).purged;
}

/** What the purge of one input stream did: messages below `below` are gone. */
export interface InputPurge {
  stream: string;
  below: number;
  purged: number;
}

/**
 * Drops the SCANS / READERS messages that no one can need again (docs/cluster.md, "Retention"):
 * below every consumer's ack floor (the live consumers are done with them) and below the smallest
 * sequence any journal entry still kept refers to (a recovery from the latest snapshot replays only
 * kept entries). The ack floors are read first: a message acked after that read was applied by an
 * entry appended before its ack, which the walk of the journal then sees. A stream without a
 * consumer keeps everything, and so does one that lacks a shard's consumer in cluster mode.
 *
 * In cluster mode the floors are not taken on the server's word alone: a replicated consumer of
 * nats-server before 2.11 can move its ack floor past messages it never delivered
 * (nats-server#6566; trackd's consumer notices at its next session and reads them then), and a
 * purge in between would remove them. So the purge also stays at or below what each shard's
 * holder reports settled with its lease, and waits while a shard has no such report.
 */
export async function purgeInputs(
  js: JetStreamClient,
  jsm: JetStreamManager,
  shardConsumers?: number,
  /** Per shard, the journal position of its latest snapshot (of this journal): the entries through it are not needed. */
  snapshotPositions: ReadonlyMap<number, number> = new Map(),
): Promise<InputPurge[]> {
  const floors = new Map<string, number>();
  for (const { stream, durable } of scanSources) {
    const expected = shardConsumers === undefined ? [] : Array.from({ length: shardConsumers }, (_, i) => `${durable}-s${i}`);
    const floor = await ackFloor(jsm, stream, expected);
    if (floor !== undefined) floors.set(stream, floor);
  }
  if (shardConsumers !== undefined) {
    const settled = await settledByHolders(jsm, shardConsumers);
    for (const [stream, floor] of floors) {
      const through = settled.get(stream);
      if (through === undefined) floors.delete(stream);
      else floors.set(stream, Math.min(floor, through));
    }
  }
  if (floors.size === 0) return [];
  const needed = await oldestReferences(js, jsm, new Set(floors.keys()), snapshotPositions);
  const out: InputPurge[] = [];
  for (const [stream, floor] of floors) {
    const below = Math.min(floor + 1, needed.get(stream) ?? Number.POSITIVE_INFINITY);
    const { state } = await jsm.streams.info(stream);
    if (below <= state.first_seq) continue;
    out.push({ stream, below, purged: (await jsm.streams.purge(stream, { seq: below })).purged });
  }
  return out;
}

/**
 * The lowest ack floor among a stream's consumers; undefined when it has none (or is missing), or
 * when one of `expected` is not listed. In a cluster each shard has its own consumer, and a node
 * taking a shard over re-creates it (delete, then add): a purge that listed the others in between
 * would remove scans that shard has not applied yet.
 */
async function ackFloor(jsm: JetStreamManager, stream: string, expected: string[] = []): Promise<number | undefined> {
  let floor: number | undefined;
  const listed = new Set<string>();
  try {
    // A filtered consumer (partitioned subjects) with nothing to deliver or ack is done with every
    // message up to here: its own floor stays at its last message, however far the stream has gone.
    const last = (await jsm.streams.info(stream)).state.last_seq;
    for await (const consumer of jsm.consumers.list(stream)) {
      listed.add(consumer.name);
      const done = consumer.config.filter_subject && consumer.num_pending === 0 && consumer.num_ack_pending === 0 ? last : 0;
      floor = Math.min(floor ?? Number.POSITIVE_INFINITY, Math.max(consumer.ack_floor.stream_seq, done));
    }
  } catch {
    return undefined;
  }
  return expected.every((name) => listed.has(name)) ? floor : undefined;
}

/**
 * Per input stream, the lowest sequence the shards' holders report settled with their leases
 * (Lease.inputs): absent when one shard reports nothing for it (no holder, or one that has not
 * renewed since its claim), infinite when every report is null (filtered consumers: the server's
 * floors stand).
 */
async function settledByHolders(jsm: JetStreamManager, shards: number): Promise<Map<string, number>> {
  const settled = new Map<string, number>(scanSources.map(({ stream }) => [stream, Number.POSITIVE_INFINITY]));
  for (let shard = 0; shard < shards; shard++) {
    const msg = await jsm.streams.getMessage(`KV_${LEASE_BUCKET}`, { last_by_subj: `$KV.${LEASE_BUCKET}.shard.${shard}` });
    const inputs = msg === null ? undefined : msg.json<Lease>().inputs;
    for (const [stream, lowest] of settled) {
      const through = inputs?.[stream];
      if (through === undefined) settled.delete(stream);
      else if (through !== null) settled.set(stream, Math.min(lowest, through));
    }
  }
  return settled;
}

/**
 * Per input stream, the smallest sequence any journal entry after its shard's latest snapshot
 * refers to. The entry at a snapshot's position stays in the journal (the next append names it),
 * but the snapshot holds its effects: a recovery replays only what follows, so its references do
 * not count (they used to, and a shard gone quiet after a READERS batch held READERS whole for good).
 * A shard refers to a stream's messages in ascending order (it never applies one at or below its
 * applied sequence), so each shard's walk stops at its first entry referring to every stream; a
 * shard that applied no scans since its snapshot walks its kept entries to the end.
 */
async function oldestReferences(
  js: JetStreamClient,
  jsm: JetStreamManager,
  streams: Set<string>,
  snapshotPositions: ReadonlyMap<number, number>,
): Promise<Map<string, number>> {
  const oldest = new Map<string, number>();
  const info = await jsm.streams.info(JOURNAL_STREAM, { subjects_filter: 'journal.*' });
  for (const subject of Object.keys(info.state.subjects ?? {})) {
    const last = (await jsm.streams.getMessage(JOURNAL_STREAM, { last_by_subj: subject }))?.seq ?? 0;
    const from = Math.max(info.state.first_seq, (snapshotPositions.get(shardOfSubject(subject)) ?? 0) + 1);
    if (last < from) continue;
    const seen = new Set<string>();
    for await (const msg of readStream(js, jsm, JOURNAL_STREAM, from, last, subject)) {
      const entry = JSON.parse(decoder.decode(msg.data)) as JournalEntry;
      for (const record of entry.records) {
        const ref = record.ref as { stream?: string; first?: number } | undefined;
        if (ref?.stream === undefined || ref.first === undefined || !streams.has(ref.stream)) continue;
        seen.add(ref.stream);
        oldest.set(ref.stream, Math.min(oldest.get(ref.stream) ?? Number.POSITIVE_INFINITY, ref.first));
      }
      if (seen.size === streams.size) break;
    }
  }
  return oldest;
}

const shardOfSubject = (subject: string) => Number(subject.slice(subject.lastIndexOf('.') + 1));
