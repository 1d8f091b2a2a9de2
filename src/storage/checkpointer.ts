import { Worker } from 'node:worker_threads';
import { threadFile } from '../runtime/threadFile.js';

/**
 * WAL checkpoints off the writers' thread. A checkpoint copies the WAL back into the database file
 * and syncs it; left to SQLite's autocheckpoint (every 1,000 WAL pages) it ran inside whichever
 * commit crossed the threshold, on the thread that serves HTTP and applies scans: 25-35 ms stalls
 * every few scan batches (ingest-field trace), enough to queue a live feed. One worker per process
 * checkpoints every shard file a few times a second, PASSIVE (it never waits for or blocks the
 * writer or the readers); a writer still checkpoints itself past SAFETY_NET_PAGES should the worker
 * fall behind or die.
 */
const SAFETY_NET_PAGES = 10_000;

let worker: Worker | undefined;

/** Registers a database for background checkpoints; returns the function that unregisters it. */
export function checkpointInBackground(file: string, writer: { pragma(source: string): unknown }): () => void {
  writer.pragma(`wal_autocheckpoint = ${SAFETY_NET_PAGES}`);
  if (worker === undefined) {
    const started = new Worker(threadFile('storage/checkpointWorker.js'));
    started.unref();
    // A failed worker leaves the writers' own (safety net) checkpoints; the next registration starts another.
    started.on('error', () => undefined);
    started.on('exit', () => {
      if (worker === started) worker = undefined;
    });
    worker = started;
  }
  const current = worker;
  current.postMessage({ add: file });
  return () => current.postMessage({ remove: file });
}
