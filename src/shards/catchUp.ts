import fs from 'node:fs';
import { performance } from 'node:perf_hooks';
import type { ShardJournal, JournalSettings } from './journal.js';
import { reconcile, type JournalEvent } from './journaled.js';
import { JournalGap, JournalInputsGone } from './journalEntry.js';
import { removeSnapshotLeftovers, restoreSnapshot } from './snapshots.js';
import type { ShardWriter } from './writer.js';

/**
 * A journaled shard's file `file` brought to the journal's last entry, and its writer. A node
 * without the file (a new node, a lost disk) restores the latest snapshot first; a file the journal
 * has moved past (its next entries purged below a later snapshot: a node that was away; or its next
 * entry kept but the inputs it refers to purged, since that snapshot covers it) is set aside for
 * the snapshot in the same way. Then the reconcile applies the journal's entries after
 * the position. The actor's start and a standby's follower both begin here.
 */
export async function catchUp(
  settings: JournalSettings,
  journal: ShardJournal,
  file: string,
  open: () => Promise<ShardWriter>,
  report: (event: JournalEvent) => void,
  /** A standby's stop: the snapshot download and the replay end early (an error), the file left as it was or absent. */
  signal?: AbortSignal,
): Promise<{ writer: ShardWriter; position: number }> {
  removeSnapshotLeftovers(file);
  let restored: { position: number; bytes: number; ms: number } | undefined;
  const restore = async () => {
    const started = performance.now();
    const snapshot = await restoreSnapshot(settings, journal.index, file, signal);
    if (snapshot !== undefined)
      restored = { position: snapshot.journalPosition, bytes: snapshot.bytes, ms: Math.round(performance.now() - started) };
  };
  if (!fs.existsSync(file)) await restore();
  let writer = await open();
  let outcome: { position: number; replayed: number };
  try {
    outcome = await reconcile(writer, journal, report, signal);
  } catch (err) {
    writer.close();
    if (!(err instanceof JournalGap || err instanceof JournalInputsGone) || restored !== undefined) throw err;
    const aside = `${file}.stale-${Date.now()}`;
    for (const suffix of ['', '-wal', '-shm']) if (fs.existsSync(file + suffix)) fs.renameSync(file + suffix, aside + suffix);
    report({ kind: 'set aside', file: aside, detail: err.message });
    await restore();
    writer = await open();
    outcome = await reconcile(writer, journal, report, signal);
  }
  if (restored !== undefined) report({ kind: 'restored', ...restored, replayed: outcome.replayed });
  report({ kind: 'reconciled', ...outcome });
  return { writer, position: outcome.position };
}
