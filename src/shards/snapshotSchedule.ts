import fs from 'node:fs';
import { Worker } from 'node:worker_threads';
import type { SnapshotOutcome } from './snapshots.js';
import type { FromSnapshotWorker, SnapshotWorkerData } from './snapshotWorker.js';
import { threadFile } from '../runtime/threadFile.js';

/** When a shard takes a snapshot: after `everyEntries` journal entries, or `everySeconds` after the last one if it appended since. */
export interface SnapshotPolicy {
  everyEntries: number;
  everySeconds: number;
}

export type SnapshotEvent =
  | { kind: 'snapshot'; position: number; bytes: number; ms: number; journalPurged: number; inputsPurged: Record<string, number> }
  | { kind: 'snapshot failed'; detail: string };

/** After a failed snapshot, the next is tried no sooner than this (or the policy's period, if shorter). */
const RETRY_MS = 30_000;

/**
 * One shard's snapshot schedule, on its actor thread: counts the journal entries the shard
 * appends and takes a snapshot (on a thread of its own, snapshotWorker.ts) once enough entries or
 * enough time have passed. One snapshot at a time; entries appended meanwhile count for the next.
 */
export class SnapshotSchedule {
  /** Entries the journal held beyond the latest snapshot at start (their sequences unknown here). */
  private atStart: number;
  /** The sequences of the entries appended since, not yet in a stored snapshot. */
  private appendedSeqs: number[] = [];
  private lastAt = Date.now();
  private notBefore = 0;
  private running: Worker | undefined;
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly policy: SnapshotPolicy,
    private readonly target: Omit<SnapshotWorkerData, 'killMidUpload'>,
    /** Entries the journal holds beyond the latest snapshot when the shard starts. */
    entriesAtStart: number,
    private readonly onEvent: (event: SnapshotEvent) => void,
    /** Tests only: once this file exists, the process kills itself halfway through uploading the next snapshot. */
    private readonly killArmedBy?: string,
  ) {
    this.atStart = entriesAtStart;
    const everyMs = policy.everySeconds * 1000;
    this.timer = setInterval(() => this.due() && this.start(), Math.max(50, Math.min(everyMs / 4, 60_000)));
    if (this.atStart >= policy.everyEntries) this.start();
  }

  /** Entries the journal holds beyond the latest snapshot. */
  private get sinceLast(): number {
    return this.atStart + this.appendedSeqs.length;
  }

  /** The actor committed a round that appended these entries. */
  appended(seqs: number[]): void {
    this.appendedSeqs.push(...seqs);
    if (this.due()) this.start();
  }

  private due(): boolean {
    if (this.running !== undefined || this.sinceLast === 0 || Date.now() < this.notBefore) return false;
    return this.sinceLast >= this.policy.everyEntries || Date.now() - this.lastAt >= this.policy.everySeconds * 1000;
  }

  private start(): void {
    if (this.running !== undefined) return;
    const started = performance.now();
    const workerData: SnapshotWorkerData = {
      ...this.target,
      killMidUpload: this.killArmedBy !== undefined && fs.existsSync(this.killArmedBy),
    };
    const worker = new Worker(threadFile('shards/snapshotWorker.js'), { workerData, name: `snapshot-${this.target.index}` });
    this.running = worker;
    const finish = (result: FromSnapshotWorker) => {
      if (this.running !== worker) return;
      this.running = undefined;
      void worker.terminate();
      if (result.ok) {
        // The copy holds every entry up to its position, some appended while it was taken.
        const position = result.outcome.snapshot.journalPosition;
        this.atStart = 0;
        this.appendedSeqs = this.appendedSeqs.filter((seq) => seq > position);
        this.lastAt = Date.now();
        this.onEvent(eventOf(result.outcome, Math.round(performance.now() - started)));
      } else {
        this.notBefore = Date.now() + Math.min(RETRY_MS, this.policy.everySeconds * 1000);
        this.onEvent({ kind: 'snapshot failed', detail: result.message });
      }
      // Entries appended while this one was taken may already call for the next: waiting for the
      // timer (up to a minute) or for another append (none, on a shard gone quiet) would hold the
      // journal and the inputs back meanwhile.
      if (this.due()) this.start();
    };
    worker.once('message', finish);
    worker.once('error', (err) => finish({ ok: false, message: err.message }));
    worker.once('exit', (code) => finish({ ok: false, message: `the snapshot thread exited (${code})` }));
  }

  /** Stops the schedule; a snapshot under way is abandoned (the object store keeps the previous one). */
  async close(): Promise<void> {
    clearInterval(this.timer);
    const running = this.running;
    this.running = undefined;
    await running?.terminate();
  }
}

const eventOf = ({ snapshot, journalPurged, inputs }: SnapshotOutcome, ms: number): SnapshotEvent => ({
  kind: 'snapshot',
  position: snapshot.journalPosition,
  bytes: snapshot.bytes,
  ms,
  journalPurged,
  inputsPurged: Object.fromEntries(inputs.map((p) => [p.stream, p.purged])),
});
