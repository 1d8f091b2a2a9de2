import { commandNamed } from './commands.js';
import type { DrawnIds, ShardRecord } from './records.js';

/** The stream of every shard's journal; shard n appends to `journal.<n>`. */
export const JOURNAL_STREAM = 'TRACKD_JOURNAL';
export const journalSubject = (index: number) => `journal.${index}`;

/**
 * The format of a shard's journal (docs/cluster.md): one entry (one JetStream message on
 * `journal.<shard>`) per round of commands the shard committed together, holding their records in
 * commit order. A record holds its command's name, `now` and drawn ids, and either its arguments in
 * full (`args`) or, for commands with a journal form, that form (`ref`: a scan batch is the
 * sequences of the stream messages it applied, read back from their stream on replay).
 */
export interface JournalEntry {
  v: 1;
  shard: number;
  /** The entry it was appended after (0: the first): a replay checks that entries follow each other. */
  prev: number;
  records: JournaledRecord[];
}

export interface JournaledRecord {
  name: string;
  now: number;
  ids: DrawnIds;
  args?: unknown;
  ref?: unknown;
}

/** A message read back from an input stream (SCANS, READERS) by sequence. */
export interface StreamMessage {
  seq: number;
  subject: string;
  data: Uint8Array;
  /** When JetStream stored it (ms): the time the consumer gave it. */
  at: number;
}

/** Where a replay reads the inputs that journal entries refer to. */
export interface StreamInputs {
  /** The messages of `stream` with these sequences (ascending), in that order; throws when one is gone. */
  messages(stream: string, seqs: number[]): Promise<StreamMessage[]>;
}

/** A record's JSON in the journal (its reference form when its command has one and it applies). */
export function journaledJson(record: ShardRecord): string {
  const ref = commandNamed(record.name)?.journal?.encode(record.args);
  const journaled: JournaledRecord =
    ref === undefined
      ? { name: record.name, now: record.now, ids: record.ids, args: record.args }
      : { name: record.name, now: record.now, ids: record.ids, ref };
  return JSON.stringify(journaled);
}

const encoder = new TextEncoder();

/**
 * The records of a round grouped into as few entries as fit in `maxBytes` each: split only between
 * records, so that every entry is a prefix-closed step (a replay that stops after any entry has
 * applied whole commands). A record alone over the limit is the caller's to refuse before it
 * commits (see `fitsOneEntry`).
 */
export function entryGroups(records: string[], maxBytes: number): string[][] {
  const room = maxBytes - entryOverhead;
  const groups: string[][] = [];
  let group: string[] = [];
  let size = 0;
  for (const record of records) {
    const bytes = Buffer.byteLength(record) + 1;
    if (group.length > 0 && size + bytes > room) {
      groups.push(group);
      group = [];
      size = 0;
    }
    group.push(record);
    size += bytes;
  }
  if (group.length > 0) groups.push(group);
  return groups;
}

/** An entry's bytes: its records (JSON each), appended right after entry `prev` of the shard's subject. */
export const entryPayload = (shard: number, prev: number, records: string[]): Uint8Array =>
  encoder.encode(`{"v":1,"shard":${shard},"prev":${prev},"records":[${records.join(',')}]}`);

/** The envelope's bytes around the records, with room for the largest sequence. */
const entryOverhead = entryPayload(0, Number.MAX_SAFE_INTEGER, []).length + 8;

/** Whether one record fits an entry of its own under `maxBytes`. */
export const fitsOneEntry = (record: string, maxBytes: number) => entryOverhead + Buffer.byteLength(record) <= maxBytes;

const decoder = new TextDecoder();

/** The journal no longer holds the entries after the shard's position (purged below a later snapshot, or lost). */
export class JournalGap extends Error {
  constructor(
    readonly prev: number,
    readonly position: number,
  ) {
    super(`the entry follows entry ${prev}, not ${position}: the journal is missing entries (purged?)`);
    this.name = 'JournalGap';
  }
}

/**
 * A journal entry after the shard's position refers to input messages the stream no longer holds:
 * they were purged because a later snapshot covers that entry (a purge keeps only what entries
 * after each shard's latest snapshot refer to). Like a JournalGap, the way on is that snapshot.
 */
export class JournalInputsGone extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'JournalInputsGone';
  }
}

/**
 * The records of an entry, in order, with every reference read back from its input stream. Throws
 * unless the entry was appended right after `position` (the entry the shard holds last).
 */
export async function recordsOf(data: Uint8Array, position: number, inputs: StreamInputs): Promise<ShardRecord[]> {
  const entry = JSON.parse(decoder.decode(data)) as JournalEntry;
  if (entry.v !== 1) throw new Error(`journal entry version ${String(entry.v)} is not one this trackd reads`);
  if (entry.prev !== position) throw new JournalGap(entry.prev, position);
  const records: ShardRecord[] = [];
  for (const r of entry.records) {
    let args = r.args;
    if (r.ref !== undefined) {
      const codec = commandNamed(r.name)?.journal;
      if (codec === undefined) throw new Error(`journal: ${r.name} has a reference but no journal form`);
      args = await codec.decode(r.ref, inputs);
    }
    records.push({ name: r.name, now: r.now, ids: r.ids, args });
  }
  return records;
}
