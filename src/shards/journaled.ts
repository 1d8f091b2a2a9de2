import { ApiError } from '../errors/catalog.js';
import { unavailable } from '../errors/domain.js';
import { Backoff } from '../scans/backoff.js';
import { commandNamed } from './commands.js';
import { JournalFenced, sameJournalStream, type ShardJournal } from './journal.js';
import { entryGroups, entryPayload, fitsOneEntry, journaledJson, recordsOf } from './journalEntry.js';
import { decodeError, encodeError, type CommandAnswer, type CommandMessage } from './mailbox.js';
import type { ShardRecord } from './records.js';
import type { SnapshotEvent } from './snapshotSchedule.js';
import type { ShardWriter, Staged } from './writer.js';

type Reply = (answer: CommandAnswer) => void;

interface Pending {
  message: CommandMessage;
  reply: Reply;
}

/** What the actor tells its process (logged there). */
export type JournalEvent =
  | { kind: 'reconciled'; position: number; replayed: number }
  | { kind: 'rebased'; position: number; detail: string }
  | { kind: 'fenced'; detail: string }
  | { kind: 'recovering'; detail: string }
  | { kind: 'recovered'; position: number; replayed: number }
  | { kind: 'restored'; position: number; bytes: number; ms: number; replayed: number }
  | { kind: 'set aside'; file: string; detail: string }
  | SnapshotEvent;

/** Most commands in one round (one transaction, one journal entry or a few). */
const MAX_ROUND = 512;
/** Room left in an entry for the envelope and NATS headers. */
const ENTRY_HEADROOM = 4096;

/**
 * The shard's journal against its SQLite state when the actor (re)starts: entries appended but not
 * committed here (a crash between the two, another writer's entries) are applied from the journal,
 * each in one transaction with the position it brings the shard to. Returns the position.
 */
export async function reconcile(
  writer: ShardWriter,
  journal: ShardJournal,
  onEvent: (event: JournalEvent) => void,
  /** Checked before each entry: an abort ends the replay there (each entry applied is committed with its position). */
  signal?: AbortSignal,
): Promise<{ position: number; replayed: number }> {
  const at = writer.journalPosition();
  const last = await journal.last();
  let from: number;
  if (sameJournalStream(at.created, journal.created)) {
    from = at.seq;
    if (last < from) {
      // The journal lost entries the shard holds (a broker that lost unsynced writes): go on from its
      // last, and say so, since a replay of the journal no longer yields this shard.
      writer.setJournalPosition(journal.created, last);
      onEvent({ kind: 'rebased', position: last, detail: `the journal ends at ${last}, the shard holds entries up to ${from}` });
      return { position: last, replayed: 0 };
    }
  } else if (last === 0) {
    writer.setJournalPosition(journal.created, 0);
    if (at.created !== '')
      onEvent({ kind: 'rebased', position: 0, detail: `the journal stream was created again (${at.created} -> ${journal.created})` });
    return { position: 0, replayed: 0 };
  } else if (at.created === '' && writer.isEmpty()) {
    from = 0;
  } else {
    throw new Error(
      `shard ${journal.index}: the journal holds entries up to ${last} of a history this shard's state is not from (its journal: ${at.created || 'none'}, now ${journal.created})`,
    );
  }
  let position = from;
  let replayed = 0;
  for await (const entry of journal.entries(from, last)) {
    signal?.throwIfAborted();
    await applyEntry(writer, journal.created, entry.seq, await recordsOf(entry.data, position, journal));
    position = entry.seq;
    replayed++;
  }
  if (position !== last) throw new Error(`shard ${journal.index}: the journal's entries ended at ${position}, before ${last}`);
  return { position, replayed };
}

/** Applies one journal entry's records and its position in one transaction. */
function applyEntry(writer: ShardWriter, created: string, seq: number, records: ShardRecord[]): void {
  writer.begin();
  const staged: Staged[] = [];
  try {
    for (const record of records) staged.push({ answer: { id: 0, value: undefined }, record, effects: writer.replay(record) });
    writer.setJournalPosition(created, seq);
    writer.commit();
  } catch (err) {
    writer.rollback();
    throw new Error(`journal entry ${seq}: ${(err as Error).message}`);
  }
  for (const s of staged) writer.publish(s);
}

/**
 * A shard actor whose commits are journaled first (docs/cluster.md). Commands that arrive while a
 * round is out form the next round: one SQLite transaction, each command in a savepoint, then one
 * journal entry with the records of those that changed state (split only past the broker's
 * payload limit), appended right after the entry the shard holds last. SQLite commits only once
 * JetStream has stored the entry; then the effects are published and every command answered.
 *
 * - A refused append (another writer appended since): the round rolls back, its commands answer
 *   503, and the shard is fenced: it commits nothing more (reads of committed state still run).
 * - Any other failure (broker away, timeout, storage): the round rolls back and answers 503, the
 *   writer is reopened (its in-memory state followed the rolled-back round) and reconciled with the
 *   journal, which applies the entry if it was stored after all; writes answer 503 meanwhile.
 */
export class JournaledActor {
  private readonly queue: Pending[] = [];
  private running = false;
  private state: 'serving' | 'recovering' | 'fenced' = 'serving';
  private writer: ShardWriter | undefined;

  constructor(
    writer: ShardWriter,
    private position: number,
    private readonly journal: ShardJournal,
    private readonly reopen: () => Promise<ShardWriter>,
    private readonly onEvent: (event: JournalEvent) => void,
    /** Told the sequences of the entries each committed round appended (the snapshot schedule counts them). */
    private readonly onAppended: (seqs: number[]) => void = () => {},
    /** Tests only: the process kills itself after appending an entry with this command, before the commit (a crash between the two). */
    private readonly killAfterAppendOf?: string,
  ) {
    this.writer = writer;
  }

  submit(message: CommandMessage, reply: Reply): void {
    this.queue.push({ message, reply });
    if (!this.running) void this.pump();
  }

  /** The writer, for closing (undefined while it is reopened). */
  current(): ShardWriter | undefined {
    return this.writer;
  }

  /** Waits for the round in progress; then nothing is staged. */
  async idle(): Promise<void> {
    while (this.running) await new Promise((r) => setTimeout(r, 1));
  }

  private async pump(): Promise<void> {
    this.running = true;
    try {
      while (this.queue.length > 0) {
        const round = this.queue.splice(0, MAX_ROUND);
        if (this.state === 'serving' && this.writer !== undefined) await this.round(this.writer, round);
        else for (const p of round) p.reply(this.refuse(p.message));
      }
    } finally {
      this.running = false;
    }
  }

  /** Outside service: a read-only command still runs on the committed state; a write answers 503. */
  private refuse(message: CommandMessage): CommandAnswer {
    const command = commandNamed(message.name);
    if (command !== undefined && !command.recorded && this.writer !== undefined) return this.writer.execute(message);
    const detail =
      this.state === 'fenced'
        ? `Shard ${this.journal.index} is owned by another writer now; nothing was changed`
        : `Shard ${this.journal.index} is catching up with its journal; nothing was changed; retry shortly`;
    return { id: message.id, error: encodeError(unavailable(detail, 1)) };
  }

  private async round(writer: ShardWriter, round: Pending[]): Promise<void> {
    const maxBytes = this.journal.maxPayload - ENTRY_HEADROOM;
    const json = new Map<ShardRecord, string>();
    const check = (record: ShardRecord) => {
      const text = journaledJson(record);
      if (!fitsOneEntry(text, maxBytes))
        throw new ApiError('payload_too_large', `The change is larger than the shard's journal takes (${maxBytes} bytes)`);
      json.set(record, text);
    };
    const staged: Staged[] = [];
    let appending = false;
    try {
      writer.begin();
      for (const { message } of round) {
        const one = writer.stage(message, check);
        staged.push(one);
        // SQLite rolls a transaction back by itself on some failures (a full disk): the round is gone.
        if (!writer.writer.inTransaction)
          throw one.answer.error === undefined ? new Error('the storage rolled the round back') : decodeError(one.answer.error);
      }
      const records = staged.flatMap((s) => (s.record === undefined ? [] : [json.get(s.record)!]));
      let seq = this.position;
      const appended: number[] = [];
      if (records.length > 0) {
        appending = true;
        for (const group of entryGroups(records, maxBytes)) {
          seq = await this.journal.append(entryPayload(this.journal.index, seq, group), seq);
          appended.push(seq);
        }
        if (this.killAfterAppendOf !== undefined && staged.some((s) => s.record?.name === this.killAfterAppendOf))
          process.kill(process.pid, 'SIGKILL');
        writer.setJournalPosition(this.journal.created, seq);
      }
      writer.commit();
      this.position = seq;
      if (appended.length > 0) this.onAppended(appended);
    } catch (err) {
      this.fail(writer, round, staged, err, appending);
      return;
    }
    this.settle(writer, round, staged);
  }

  private settle(writer: ShardWriter, round: Pending[], staged: Staged[]): void {
    for (let i = 0; i < round.length; i++) {
      writer.publish(staged[i]!);
      round[i]!.reply(staged[i]!.answer);
    }
  }

  /**
   * A round that did not commit: rolled back, its commands answered. Before any append nothing is
   * anywhere, and the cause itself is the answer (a full disk: the storage 503); from the append on
   * the entry may be in the journal, to be applied when the shard catches up.
   */
  private fail(writer: ShardWriter, round: Pending[], staged: Staged[], err: unknown, appending: boolean): void {
    try {
      writer.rollback();
    } catch {
      // The writer is reopened below either way.
    }
    const fenced = err instanceof JournalFenced;
    const answer = fenced
      ? encodeError(unavailable(`Shard ${this.journal.index} is owned by another writer now; nothing was changed`, 1))
      : appending
        ? encodeError(
            unavailable(
              `Shard ${this.journal.index} could not journal the write (${(err as Error).message}); it may still be applied once the shard catches up with its journal; retry shortly`,
              1,
            ),
          )
        : encodeError(err);
    for (let i = 0; i < round.length; i++) {
      const failedAlone = staged[i]?.answer.error !== undefined;
      round[i]!.reply(failedAlone ? staged[i]!.answer : { id: round[i]!.message.id, error: answer });
    }
    if (fenced) {
      this.state = 'fenced';
      this.onEvent({ kind: 'fenced', detail: (err as Error).message });
    } else void this.recover(err);
  }

  /** Reopens the writer and reconciles it with the journal, retrying until both work. */
  private async recover(cause: unknown): Promise<void> {
    this.state = 'recovering';
    this.onEvent({ kind: 'recovering', detail: (cause as Error).message });
    try {
      this.writer?.close();
    } catch {
      // A writer that cannot close cleanly is dropped all the same: a new one is opened.
    }
    this.writer = undefined;
    const backoff = new Backoff(100, 1_000);
    for (;;) {
      try {
        const writer = await this.reopen();
        try {
          const { position, replayed } = await reconcile(writer, this.journal, this.onEvent);
          this.writer = writer;
          this.position = position;
          this.state = 'serving';
          this.onEvent({ kind: 'recovered', position, replayed });
          return;
        } catch (err) {
          writer.close();
          throw err;
        }
      } catch (err) {
        this.onEvent({ kind: 'recovering', detail: (err as Error).message });
        await backoff.wait();
      }
    }
  }
}
