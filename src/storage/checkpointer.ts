import { Worker } from 'node:worker_threads';
import { threadFile } from '../runtime/threadFile.js';

/**
 * WAL checkpoints off the writers' thread. A checkpoint copies the WAL back into the database file
 * and syncs it; left to SQLite's autocheckpoint (every 1,000 WAL pages) it ran inside whichever
 * commit crossed the threshold, on the thread that serves HTTP and applies scans: 25-35 ms stalls
 * every few scan batches (ingest-field trace), enough to queue a live feed. One worker per process
 * checkpoints every shard file 20 times a second, PASSIVE (it never waits for or blocks the writer
 * or the readers); a writer still checkpoints itself past SAFETY_NET_PAGES should the worker fall
 * behind or die.
 *
 * The net is above what a few large batches write: a 100,000-read field batch at 1,000,000 assets
 * writes about 13,700 pages, and under a net of 10,000 each such commit checkpointed on the shard
 * thread, 170-190 of its 900-1,100 ms (the copy, then two fsyncs). So the WAL may reach 256 MiB per
 * shard during a burst. The writer restarts it from the start when a batch begins after a complete
 * copy; in the large bench's burst it still reached the net at times (docs/field-rereads.md).
 */
const SAFETY_NET_PAGES = 65_536;

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
