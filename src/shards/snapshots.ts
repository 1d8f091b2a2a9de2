import fs from 'node:fs';
import path from 'node:path';
import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import Database from 'better-sqlite3';
import { Objm, StorageType, type ObjectInfo, type ObjectStore } from '@nats-io/obj';
import type { NatsConnection } from '@nats-io/transport-node';
import { jetstream, jetstreamManager, type JetStreamManager, type MsgRequest } from '@nats-io/jetstream';
import { ADMIN_OPTIONS, connectNats, retryOnTimeout, streamWithLeader } from '../scans/streams.js';
import { type JournalSettings, sameJournalStream } from './journal.js';
import { JOURNAL_STREAM, journalSubject } from './journalEntry.js';
import { purgeInputs, purgeJournalBelow, type InputPurge } from './retention.js';

/** The object store bucket of shard snapshots: object `shard-<n>` is shard n's latest. */
export const SNAPSHOT_BUCKET = 'trackd_snapshots';
export const snapshotName = (index: number) => `shard-${index}`;
function shardOfSnapshot(name: string): number | undefined {
  const digits = /^shard-(\d+)$/.exec(name)?.[1];
  return digits === undefined ? undefined : Number(digits);
}

/** What a snapshot holds: the shard's state as of this journal position (docs/cluster.md). */
export interface SnapshotInfo {
  journalCreated: string;
  journalPosition: number;
  bytes: number;
  takenAt: string;
}

/** A snapshot request's timeout: the first attempt of a restore waits less (below). */
const REQUEST_TIMEOUT_MS = 10_000;
/**
 * A restore's request timeout for its first RESTORE_SHORT_ATTEMPTS attempts (then REQUEST_TIMEOUT_MS,
 * twice more). A request to a stream whose leader has just died goes unanswered until the election
 * (5 to 7 s on nats-server 2.9): measured from a kill -9 of the bucket's leader, a restore took
 * 10.55 s with 10 s for every attempt, 6.6 or 14.6 s with 2 s doubled at each attempt, 6.6 to 8.6 s
 * with 2 s each (docs/cluster.md).
 */
const RESTORE_SHORT_TIMEOUT_MS = 2_000;
const RESTORE_SHORT_ATTEMPTS = 4;

async function withBucket<T>(
  settings: JournalSettings,
  use: (bucket: ObjectStore, jsm: JetStreamManager) => Promise<T>,
  timeoutMs = REQUEST_TIMEOUT_MS,
): Promise<T> {
  const nc: NatsConnection = await connectNats(settings.natsUrl, 'trackd-snapshots', { reconnect: false, noAsyncTraces: true });
  try {
    // Not the admin 30 s: a request lost with a server that died is retried sooner.
    const bucket = await new Objm(jetstream(nc, { timeout: timeoutMs })).create(SNAPSHOT_BUCKET, {
      storage: StorageType.File,
      replicas: settings.replicas,
    });
    await streamWithLeader(await jetstreamManager(nc, ADMIN_OPTIONS), `OBJ_${SNAPSHOT_BUCKET}`);
    return await use(bucket, await jetstreamManager(nc, { timeout: timeoutMs, checkAPI: false }));
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
export async function takeSnapshot(
  file: string,
  settings: JournalSettings,
  index: number,
  /** Called with the bytes of the copy read so far, as the upload reads it (a test's kill -9 mid-upload). */
  onUpload?: (read: number, total: number) => void,
): Promise<SnapshotInfo> {
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
        Readable.toWeb(uploadStream(copy, info.bytes, onUpload)) as ReadableStream<Uint8Array>,
      ),
    );
    return info;
  } finally {
    fs.rmSync(copy, { force: true });
  }
}

function uploadStream(copy: string, total: number, onUpload?: (read: number, total: number) => void): Readable {
  const stream = fs.createReadStream(copy);
  if (onUpload !== undefined) {
    let read = 0;
    stream.on('data', (chunk) => onUpload((read += chunk.length), total));
  }
  return stream;
}

/** What one scheduled snapshot did: the snapshot stored, then the journal and inputs it let go. */
export interface SnapshotOutcome {
  snapshot: SnapshotInfo;
  journalPurged: number;
  inputs: InputPurge[];
}

/**
 * A snapshot of a live shard stored as its latest, then what it makes unneeded dropped: the shard's
 * journal entries below the snapshot's position, and the input messages no kept entry refers to
 * (retention.ts). A failure before the snapshot is stored drops nothing.
 */
export async function snapshotAndPurge(
  file: string,
  settings: JournalSettings,
  index: number,
  onUpload?: (read: number, total: number) => void,
): Promise<SnapshotOutcome> {
  const snapshot = await takeSnapshot(file, settings, index, onUpload);
  const nc = await connectNats(settings.natsUrl, `trackd-retention-${index}`, { reconnect: false, noAsyncTraces: true });
  try {
    const jsm = await jetstreamManager(nc);
    const journalPurged = await purgeJournalBelow(jsm, journalSubject(index), snapshot.journalPosition);
    const positions = await snapshotPositions(settings, (await jsm.streams.info(JOURNAL_STREAM)).created);
    return { snapshot, journalPurged, inputs: await purgeInputs(jetstream(nc), jsm, settings.shardConsumers, positions) };
  } finally {
    await nc.close();
  }
}

/** Copies of a shard file left by a snapshot that did not finish (a process killed while taking it). */
export function removeSnapshotLeftovers(file: string): void {
  const dir = path.dirname(file);
  const prefix = `${path.basename(file)}.snapshot-`;
  if (!fs.existsSync(dir)) return;
  for (const name of fs.readdirSync(dir)) if (name.startsWith(prefix)) fs.rmSync(path.join(dir, name), { force: true });
}

const infoOf = (meta: Record<string, string> | undefined, bytes: number): SnapshotInfo => ({
  journalCreated: meta?.journal_created ?? '',
  journalPosition: Number(meta?.journal_position ?? 0),
  bytes,
  takenAt: meta?.taken_at ?? '',
});

/** What shard `index`'s latest snapshot holds, without reading it; undefined when it has none. */
export async function latestSnapshot(settings: JournalSettings, index: number): Promise<SnapshotInfo | undefined> {
  return retryOnTimeout(() =>
    withBucket(settings, async (bucket) => {
      const info = await bucket.info(snapshotName(index));
      return info === null || info.deleted ? undefined : infoOf(info.metadata, info.size);
    }),
  );
}

/**
 * Per shard, the journal position of its latest snapshot, for the snapshots taken of the journal
 * created at `journalCreated` (a snapshot of an earlier journal stream says nothing of this one's
 * sequences).
 */
export async function snapshotPositions(settings: JournalSettings, journalCreated: string): Promise<Map<number, number>> {
  return retryOnTimeout(() =>
    withBucket(settings, async (bucket) => {
      const positions = new Map<number, number>();
      for (const info of await bucket.list()) {
        const shard = shardOfSnapshot(info.name);
        const snapshot = infoOf(info.metadata, info.size);
        if (shard !== undefined && !info.deleted && sameJournalStream(snapshot.journalCreated, journalCreated))
          positions.set(shard, snapshot.journalPosition);
      }
      return positions;
    }),
  );
}

/**
 * Writes shard `index`'s latest snapshot to `file` (which must not exist); undefined when the shard
 * has none. The file then holds the state as of the snapshot's journal position, which a reconcile
 * brings up to the journal's last entry.
 *
 * The chunks are read one by one with `STREAM.MSG.GET` (`next_by_subj` from the previous chunk's
 * sequence), which the stream's leader answers, and checked against the object's digest: no
 * consumer. The object store's own reader is an ephemeral consumer, which nats-server before 2.12
 * places on any of the stream's servers, a dead one included (`createGroupForConsumer` and
 * `setPreferred` in server/jetstream_cluster.go at v2.9.10): with one server of three down, one
 * download in three waited for its consumer's creation to time out (10 s) before it was tried
 * again. Read this way a 32 MB snapshot comes as fast as through the consumer (docs/cluster.md).
 */
export async function restoreSnapshot(
  settings: JournalSettings,
  index: number,
  file: string,
  /** Ends the restore early (a standby whose node takes the shard over): nothing is left at `file`. */
  signal?: AbortSignal,
): Promise<SnapshotInfo | undefined> {
  if (fs.existsSync(file)) throw new Error(`restore: ${file} exists`);
  const partial = `${file}.restoring`;
  let attempts = 0;
  return retryOnTimeout(() => {
    const timeoutMs = ++attempts <= RESTORE_SHORT_ATTEMPTS ? RESTORE_SHORT_TIMEOUT_MS : REQUEST_TIMEOUT_MS;
    return withBucket(
      settings,
      async (bucket, jsm) => {
        for (let attempt = 1; ; attempt++) {
          signal?.throwIfAborted();
          const info = await bucket.info(snapshotName(index));
          if (info === null || info.deleted) return undefined;
          fs.mkdirSync(path.dirname(file), { recursive: true });
          try {
            await downloadChunks(jsm, info, partial, signal);
          } catch (err) {
            fs.rmSync(partial, { force: true });
            // A newer snapshot replaced this one meanwhile (its chunks purged): the newer one is read.
            if (err instanceof ChunkGone && attempt < 5) continue;
            throw err;
          }
          fs.renameSync(partial, file);
          return infoOf(info.metadata, info.size);
        }
      },
      timeoutMs,
    );
  }, RESTORE_SHORT_ATTEMPTS + 2);
}

class ChunkGone extends Error {}

/** An object's chunks, in order, written to `file`; throws unless they are all there and match its digest. */
async function downloadChunks(jsm: JetStreamManager, info: ObjectInfo, file: string, signal?: AbortSignal): Promise<void> {
  const stream = `OBJ_${SNAPSHOT_BUCKET}`;
  const subject = `$O.${SNAPSHOT_BUCKET}.C.${info.nuid}`;
  const hash = createHash('sha256');
  const out = await fs.promises.open(file, 'wx');
  let bytes = 0;
  try {
    for (let chunk = 0, seq = 0; chunk < info.chunks; chunk++) {
      signal?.throwIfAborted();
      // nats-server 2.9 takes next_by_subj with a start sequence (JSApiMsgGetRequest.NextFor); the
      // client's MsgRequest type does not list it.
      const msg = await jsm.streams.getMessage(stream, { seq: seq + 1, next_by_subj: subject } as unknown as MsgRequest);
      if (msg === null) throw new ChunkGone(`snapshot ${info.name}: chunk ${chunk + 1} of ${info.chunks} is gone`);
      seq = msg.seq;
      hash.update(msg.data);
      await out.write(msg.data);
      bytes += msg.data.length;
    }
  } finally {
    await out.close();
  }
  const digest = info.digest.startsWith('SHA-256=') ? Buffer.from(info.digest.slice('SHA-256='.length), 'base64url') : undefined;
  if (bytes !== info.size || digest === undefined || !digest.equals(hash.digest()))
    throw new Error(`snapshot ${info.name}: ${bytes} bytes read of ${info.size}, or not the digest stored (${info.digest})`);
}
