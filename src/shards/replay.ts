import fs from 'node:fs';
import path from 'node:path';
import { scanPlacement } from '../scans/placement.js';
import './commandIndex.js';
import { ShardGenerations } from './generations.js';
import { ShardJournal, type JournalSettings } from './journal.js';
import { reconcile } from './journaled.js';
import { restoreSnapshot, type SnapshotInfo } from './snapshots.js';
import type { ShardRecord } from './records.js';
import { ShardWriter, type IdSource } from './writer.js';

/** A replay draws no ids: every id comes from the records. */
const recordedIdsOnly: IdSource = {
  reserveIds(entity) {
    throw new Error(`replay: a command drew a ${entity} id that its record does not hold`);
  },
};

/** A writer on a new shard file (the shard migrations applied), drawing only recorded ids. */
async function openFresh(file: string, index: number): Promise<ShardWriter> {
  if (fs.existsSync(file)) throw new Error(`replay: ${file} exists; a replay starts from a fresh shard file`);
  return openReplayWriter(file, index);
}

/** A writer on shard file `file` that applies journal entries only (a rebuild, a standby): it draws no ids. */
export const openReplayWriter = (file: string, index: number) =>
  ShardWriter.open(path.dirname(file), index, recordedIdsOnly, new ShardGenerations(), { placement: scanPlacement }, file);

/**
 * Applies a shard's records, in order, to a fresh shard file (created with the shard migrations),
 * on this thread, with each record's own `now` and ids: neither the wall clock nor the control
 * plane is read. Its tables then equal those of the shard that wrote the records. Throws at the
 * first record that fails or diverges (other ids drawn than recorded).
 */
export async function replayInto(file: string, records: Iterable<ShardRecord>, index = 0): Promise<number> {
  const writer = await openFresh(file, index);
  let applied = 0;
  try {
    for (const record of records) {
      try {
        writer.replay(record);
      } catch (err) {
        throw new Error(`replay: record ${applied + 1} (${record.name}) failed: ${(err as Error).message}`);
      }
      applied++;
    }
  } finally {
    writer.close();
  }
  return applied;
}

/**
 * Rebuilds shard `index` into `file` (which must not exist) from what NATS holds: its latest
 * snapshot, when `fromSnapshot` and there is one, then every journal entry after the snapshot's
 * position (all of them without a snapshot), with the inputs they refer to read back from their
 * streams. What a new owner does (step 4 of docs/cluster.md); returns the snapshot restored, the
 * position reached and the entries applied on top.
 */
export async function rebuildShard(
  file: string,
  settings: JournalSettings,
  index: number,
  options: { fromSnapshot: boolean },
): Promise<{ snapshot?: SnapshotInfo; position: number; replayed: number }> {
  const snapshot = options.fromSnapshot ? await restoreSnapshot(settings, index, file) : undefined;
  const writer = snapshot === undefined ? await openFresh(file, index) : await openReplayWriter(file, index);
  const journal = await ShardJournal.open(settings, index);
  try {
    return { snapshot, ...(await reconcile(writer, journal, () => {})) };
  } finally {
    writer.close();
    await journal.close();
  }
}
