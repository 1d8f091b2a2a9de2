/** The checkpoint worker of checkpointer.ts: PASSIVE WAL checkpoints of the registered files. */
import { parentPort } from 'node:worker_threads';
import Database from 'better-sqlite3';
import { nameThread } from '../runtime/threadPriority.js';
import { tracePauses, traceSpan } from '../runtime/pauseTrace.js';

tracePauses('checkpoint');
// At the process's priority, not BACKGROUND_NICE: niced, it slowed the shards' writers (small
// ingest-field: 22,208 and 22,291 reads/s niced, 157,053 not; docs/field-rereads.md), by all signs
// waiting for a core while it held the WAL's locks.
nameThread('ckpt');

/** Often enough that a batch's pages are copied before the writer's next batch, so that it can restart the WAL. */
const INTERVAL_MS = 50;
const open = new Map<string, Database.Database>();

parentPort!.on('message', (message: { add?: string; remove?: string }) => {
  if (message.add !== undefined && !open.has(message.add)) {
    const db = new Database(message.add, { fileMustExist: true });
    // Checkpoints sync the WAL and the database as the writers' own would (WAL, synchronous NORMAL).
    db.pragma('synchronous = NORMAL');
    open.set(message.add, db);
  }
  if (message.remove !== undefined) {
    open.get(message.remove)?.close();
    open.delete(message.remove);
  }
});

setInterval(() => {
  for (const db of open.values()) {
    try {
      const span = traceSpan('ckpt');
      const r = db.pragma('wal_checkpoint(PASSIVE)');
      span({ r });
    } catch {
      // Busy or gone: the next round (or the writer's safety net) checkpoints it.
    }
  }
}, INTERVAL_MS);
