import fs from 'node:fs';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import Database from 'better-sqlite3';
import { Objm, StorageType, type ObjectStore } from '@nats-io/obj';
import type { NatsConnection } from '@nats-io/transport-node';
import { connectNats } from '../scans/streams.js';
import type { JournalSettings } from './journal.js';
import { JOURNAL_STREAM } from './journalEntry.js';

/** The object store bucket of shard snapshots: object `shard-<n>` is shard n's latest. */
export const SNAPSHOT_BUCKET = 'trackd_snapshots';
export const snapshotName = (index: number) => `shard-${index}`;

/** What a snapshot holds: the shard's state as of this journal position (docs/cluster.md). */
export interface SnapshotInfo {
  journalCreated: string;
  journalPosition: number;
  bytes: number;
  takenAt: string;
}

async function withBucket<T>(settings: JournalSettings, use: (bucket: ObjectStore) => Promise<T>): Promise<T> {
  const nc: NatsConnection = await connectNats(settings.natsUrl, 'trackd-snapshots', { reconnect: false, noAsyncTraces: true });
  try {
    const bucket = await new Objm(nc).create(SNAPSHOT_BUCKET, { storage: StorageType.File, replicas: settings.replicas });
    return await use(bucket);
  } finally {
    await nc.close();
  }
}

/** The journal position a shard file's state includes. */
function positionOf(file: string): { created: string; seq: number } {
  const db = new Database(file, { readonly: true, fileMustExist: true });
  try {
    const row = db
      .prepare('SELECT stream_created AS created, applied_seq AS seq FROM scan_ingest_state WHERE stream = ?')
      .get(JOURNAL_STREAM) as { created: string; seq: number } | undefined;
    return row ?? { created: '', seq: 0 };
  } finally {
    db.close();
  }
}

/**
 * Stores a snapshot of a live shard file as the shard's latest: `VACUUM INTO` on a read-only
 * connection of its own (a consistent copy of the committed state, the journal position included,
 * while the shard's writer goes on), then the copy to the object store with its position.
 */
export async function takeSnapshot(file: string, settings: JournalSettings, index: number): Promise<SnapshotInfo> {
  const copy = `${file}.snapshot-${process.pid}-${Date.now()}`;
  try {
    const db = new Database(file, { readonly: true, fileMustExist: true });
    try {
      db.pragma('busy_timeout = 5000');
      db.prepare('VACUUM INTO ?').run(copy);
    } finally {
      db.close();
    }
    const position = positionOf(copy);
    const info: SnapshotInfo = {
      journalCreated: position.created,
      journalPosition: position.seq,
      bytes: fs.statSync(copy).size,
      takenAt: new Date().toISOString(),
    };
    await withBucket(settings, (bucket) =>
      bucket.put(
        {
          name: snapshotName(index),
          metadata: {
            journal_created: info.journalCreated,
            journal_position: String(info.journalPosition),
            taken_at: info.takenAt,
          },
        },
        Readable.toWeb(fs.createReadStream(copy)) as ReadableStream<Uint8Array>,
      ),
    );
    return info;
  } finally {
    fs.rmSync(copy, { force: true });
  }
}

/**
 * Writes shard `index`'s latest snapshot to `file` (which must not exist); undefined when the shard
 * has none. The file then holds the state as of the snapshot's journal position, which a reconcile
 * brings up to the journal's last entry.
 */
export async function restoreSnapshot(settings: JournalSettings, index: number, file: string): Promise<SnapshotInfo | undefined> {
  if (fs.existsSync(file)) throw new Error(`restore: ${file} exists`);
  return withBucket(settings, async (bucket) => {
    const object = await bucket.get(snapshotName(index));
    if (object === null) return undefined;
    const partial = `${file}.restoring`;
    await pipeline(Readable.fromWeb(object.data as never), fs.createWriteStream(partial));
    const failed = await object.error;
    if (failed) {
      fs.rmSync(partial, { force: true });
      throw failed;
    }
    fs.renameSync(partial, file);
    const meta = object.info.metadata ?? {};
    return {
      journalCreated: meta.journal_created ?? '',
      journalPosition: Number(meta.journal_position ?? 0),
      bytes: object.info.size,
      takenAt: meta.taken_at ?? '',
    };
  });
}
