import { commandNamed } from './commands.js';
import { decodeError, encodeError, type CommandAnswer, type CommandMessage } from './mailbox.js';
import type { ShardWriter, Staged } from './writer.js';
import { pauseTraceOn, traceSpan } from '../runtime/pauseTrace.js';

type Reply = (answer: CommandAnswer) => void;

interface Pending {
  message: CommandMessage;
  reply: Reply;
}

/** Most commands in one round: bounds what a command waits for the others of its round. */
export const MAX_ROUND = 64;

function ownsTransaction(message: CommandMessage): boolean {
  return commandNamed(message.name)?.ownsTransaction === true;
}

/** Whether a command may share a round: a state change that runs in the transaction it is given. */
function sharesRounds(message: CommandMessage): boolean {
  const command = commandNamed(message.name);
  return command?.recorded === true && !command.ownsTransaction;
}

/**
 * The shard actor without a journal (single node). The writes that arrived together (in one turn of
 * the event loop, as under a load of many connections) commit in one transaction, each in a
 * savepoint so that its failure undoes it alone, and are answered after that commit. Each commit
 * writes the pages those commands share once (the q text index's new segment and structure, the
 * event log's head and last page, the tables' last pages) instead of once per command: a write with
 * its text index row and its event cost the shard thread twice the CPU committed alone (README,
 * "Single node since the cluster work"). A command alone, a read-only one and one that owns its
 * transaction (a scan batch) run as before, one transaction each, in arrival order.
 *
 * A round that does not commit (a full disk) is rolled back and each of its commands answered with
 * the failure (or its own); the writer-side state, which followed the commands staged in it (the
 * report index's positions), is dropped for a fresh writer over the same connection (`renewed`).
 */
export class RoundActor {
  private queue: Pending[] = [];
  private scheduled = false;
  /**
   * How many transactions of each size ran: `sizes[n]` counts those of n state changes that share
   * rounds (n = 1: one that arrived alone), `sizes[0]` the commands that never share one
   * (read-only, a scan batch). One increment per transaction; read by `roundSizes` (the worker
   * writes them out at close when TRACKD_ROUND_SIZES names a file).
   */
  private readonly sizes: number[] = new Array(MAX_ROUND + 1).fill(0);

  constructor(private writer: ShardWriter) {}

  submit(message: CommandMessage, reply: Reply): void {
    this.queue.push({ message, reply });
    if (!this.scheduled) {
      this.scheduled = true;
      setImmediate(() => this.drain(true));
    }
  }

  /** The writer now (another one after a round that did not commit). */
  current(): ShardWriter {
    return this.writer;
  }

  /** The transactions run so far by size (`sizes[n]`: of n commands sharing a round), and the commands run apart. */
  roundSizes(): { sizes: Record<number, number>; others: number } {
    const sizes: Record<number, number> = {};
    for (let n = 1; n <= MAX_ROUND; n++) if (this.sizes[n]! > 0) sizes[n] = this.sizes[n]!;
    return { sizes, others: this.sizes[0]! };
  }

  /**
   * Runs everything submitted so far (the scheduled turn finds nothing after it); `yielding` (the
   * scheduled turns): a scan batch with more behind it ends the turn (below).
   */
  drain(yielding = false): void {
    this.scheduled = false;
    while (this.queue.length > 0) {
      const pending = this.queue;
      this.queue = [];
      for (let i = 0; i < pending.length; ) {
        let end = i;
        while (end < pending.length && end - i < MAX_ROUND && sharesRounds(pending[end]!.message)) end++;
        this.sizes[end - i]!++;
        if (end - i > 1) {
          const span = traceSpan('round');
          this.round(pending.slice(i, end));
          span({ n: end - i });
          i = end;
        } else {
          const { message, reply } = pending[i++]!;
          const span = traceSpan('cmd');
          const answer = this.writer.execute(message);
          // The fields only when traced: a command alone is this loop's most frequent case.
          if (pauseTraceOn) span({ name: message.name, id: message.id, committed: this.writer.generations.lastEventsAt() });
          reply(answer);
          // One that owns its transaction (a scan batch: up to about a second at 1,000,000 assets)
          // ends the turn when more wait, so that its answer goes out now (the worker sends a turn's
          // answers together) and not with the next one's: the scan consumer, which keeps the next
          // batch waiting here, then sends the one after it meanwhile (laneScheduler.ts).
          if (yielding && i < pending.length && ownsTransaction(message)) {
            this.queue = pending.slice(i);
            this.scheduled = true;
            setImmediate(() => this.drain(true));
            return;
          }
        }
      }
    }
  }

  private round(round: Pending[]): void {
    const writer = this.writer;
    const staged: Staged[] = [];
    try {
      writer.begin();
      for (const { message } of round) {
        const one = writer.stage(message);
        staged.push(one);
        // SQLite rolls a transaction back by itself on some failures (a full disk): the round is gone.
        if (!writer.writer.inTransaction)
          throw one.answer.error === undefined ? new Error('the storage rolled the round back') : decodeError(one.answer.error);
      }
      writer.commit();
    } catch (err) {
      try {
        writer.rollback();
      } catch {
        // The rollback's own failure changes nothing here: the writer is renewed below either way.
      }
      this.writer = writer.renewed();
      const answer = encodeError(err);
      for (let i = 0; i < round.length; i++) {
        const failedAlone = staged[i]?.answer.error !== undefined;
        round[i]!.reply(failedAlone ? staged[i]!.answer : { id: round[i]!.message.id, error: answer });
      }
      return;
    }
    for (let i = 0; i < round.length; i++) {
      writer.publish(staged[i]!);
      round[i]!.reply(staged[i]!.answer);
    }
  }
}
