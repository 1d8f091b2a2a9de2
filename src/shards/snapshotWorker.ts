/**
 * A thread that takes one snapshot of a shard and purges what it covers (snapshots.ts), started by
 * the shard's actor thread so that neither the copy (`VACUUM INTO`, synchronous) nor the upload
 * stalls the actor's commands.
 */
import { parentPort, workerData } from 'node:worker_threads';
import type { JournalSettings } from './journal.js';
import { nameThread, runAsBackgroundThread } from '../runtime/threadPriority.js';
import { snapshotAndPurge, type SnapshotOutcome } from './snapshots.js';

export interface SnapshotWorkerData {
  file: string;
  settings: JournalSettings;
  index: number;
  /** Tests only: the process kills itself once half the copy is uploaded (kill -9 during a snapshot). */
  killMidUpload?: boolean;
}

export type FromSnapshotWorker = { ok: true; outcome: SnapshotOutcome } | { ok: false; message: string };

const data = workerData as SnapshotWorkerData;
nameThread(`snap-${data.index}`);
runAsBackgroundThread();
const killMidUpload = data.killMidUpload
  ? (read: number, total: number) => {
      if (read * 2 >= total) process.kill(process.pid, 'SIGKILL');
    }
  : undefined;
/** Tests only (TRACKD_TEST_SNAPSHOT_HOLD_MS): how long a snapshot, once stored, waits before it reports (a slow upload). */
const holdMs = Number(process.env.TRACKD_TEST_SNAPSHOT_HOLD_MS) || 0;
try {
  const outcome = await snapshotAndPurge(data.file, data.settings, data.index, killMidUpload);
  if (holdMs > 0) await new Promise((r) => setTimeout(r, holdMs));
  parentPort!.postMessage({ ok: true, outcome } satisfies FromSnapshotWorker);
} catch (err) {
  parentPort!.postMessage({ ok: false, message: (err as Error).message } satisfies FromSnapshotWorker);
}
