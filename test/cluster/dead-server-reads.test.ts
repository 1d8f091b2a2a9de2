/**
 * A takeover's reads while one nats-server of three is down (issue 12): nats-server before 2.12
 * places an ephemeral consumer of a replicated stream on any of the stream's servers, a dead one
 * included, and a consumer placed there never answers its creation (server/jetstream_cluster.go at
 * v2.9.10, `createGroupForConsumer`, `setPreferred`). With one server of three killed -9 (one that
 * leads no stream, so that no election is involved), a shard's snapshot restored and its journal
 * tail read (its entries, then the SCANS messages they refer to), several times over: each attempt
 * completes within BOUND_MS (before the fix, one consumer in three waited out its creation's
 * timeout, 5 s for a journal read and 10 s for a snapshot download, before a retry), and the
 * restored file and the messages read are complete.
 */
import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { jetstream, jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import t from 'tap';
import { ensureScanStreams, SCANS_STREAM } from '../../src/scans/streams.js';
import { ShardJournal } from '../../src/shards/journal.js';
import { JOURNAL_STREAM } from '../../src/shards/journalEntry.js';
import { restoreSnapshot, SNAPSHOT_BUCKET, takeSnapshot } from '../../src/shards/snapshots.js';
import { startNatsCluster } from '../helpers/natsCluster.js';
import { eventually, tempDir } from '../helpers/trackd.js';

/** An attempt's bound: the shortest stall of the old reads (a consumer's creation timing out: 5 s), far above an attempt here (mostly under 1 s). */
const BOUND_MS = 5000;
const ATTEMPTS = 8;
const SCANS = 3000;
const ENTRIES = 40;
/** Rows of FILLER bytes in the shard file: a snapshot of some 3 MB, about 25 chunks of the object store's 128 KiB. */
const ROWS = 3000;
const FILLER = 1000;

const settingsOf = (natsUrl: string) => ({ natsUrl, replicas: 3 });

/** A shard file as a snapshot takes it: its journal position, and rows whose sum says the copy is whole. */
function shardFileWithRows(file: string): void {
  const db = new Database(file);
  db.exec('CREATE TABLE scan_ingest_state (stream TEXT PRIMARY KEY, stream_created TEXT, applied_seq INTEGER)');
  db.prepare('INSERT INTO scan_ingest_state VALUES (?, ?, ?)').run(JOURNAL_STREAM, '2026-01-01T00:00:00Z', ENTRIES);
  db.exec('CREATE TABLE filler (id INTEGER PRIMARY KEY, body BLOB)');
  const insert = db.prepare('INSERT INTO filler VALUES (?, randomblob(?))');
  db.transaction(() => {
    for (let i = 1; i <= ROWS; i++) insert.run(i, FILLER);
  })();
  db.close();
}

function rowsOf(file: string): { n: number; sum: number; bytes: number; check: string } {
  const db = new Database(file, { readonly: true });
  try {
    const row = db.prepare('SELECT count(*) AS n, sum(id) AS sum, sum(length(body)) AS bytes FROM filler').get() as {
      n: number;
      sum: number;
      bytes: number;
    };
    return { ...row, check: (db.pragma('integrity_check', { simple: true }) as string) ?? '' };
  } finally {
    db.close();
  }
}

/** Moves every stream's leader off `server` (a step-down elects one of the other two). */
async function leadersOff(jsm: JetStreamManager, nc: Awaited<ReturnType<typeof connect>>, server: string, streams: string[]) {
  for (const stream of streams) {
    await eventually(
      async () => {
        const leader = (await jsm.streams.info(stream)).cluster?.leader;
        if (leader === undefined) return false;
        if (leader !== server) return true;
        await nc.request(`$JS.API.STREAM.LEADER.STEPDOWN.${stream}`, undefined, { timeout: 10_000 }).catch(() => undefined);
        return false;
      },
      60_000,
      500,
    );
  }
}

t.test('with one nats-server of three killed, a snapshot restore and a journal tail read never wait on it', async (t) => {
  const cluster = await startNatsCluster(t, 3);
  const settings = settingsOf(cluster.url);
  const dir = tempDir('trackd-deadsrv-');
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const nc = await connect({ servers: cluster.url.split(',') });
  t.teardown(() => nc.close());
  const jsm = await jetstreamManager(nc, { timeout: 30_000 });
  const js = jetstream(nc);

  // SCANS with SCANS messages, shard 0's journal with ENTRIES entries, and a snapshot of shard 0.
  await ensureScanStreams(jsm, 3);
  for (let i = 0; i < SCANS; i += 500)
    await Promise.all(Array.from({ length: Math.min(500, SCANS - i) }, (_, j) => js.publish('scans.1.fixed', `scan ${i + j + 1}`)));
  const writer = await ShardJournal.open(settings, 0);
  let last = 0;
  for (let i = 1; i <= ENTRIES; i++) last = await writer.append(new TextEncoder().encode(`entry ${i}`), last);
  await writer.close();
  const source = path.join(dir, 'shard-0.sqlite');
  shardFileWithRows(source);
  const expected = rowsOf(source);
  const taken = await takeSnapshot(source, settings, 0);
  t.ok(taken.bytes > 2 * 1024 * 1024, `the snapshot spans many chunks (${taken.bytes} bytes)`);

  // The victim: a server that leads none of the three streams once their leaders moved off it.
  const streams = [JOURNAL_STREAM, SCANS_STREAM, `OBJ_${SNAPSHOT_BUCKET}`];
  const victim = cluster.servers[2]!;
  await leadersOff(jsm, nc, victim.name, streams);
  victim.kill('SIGKILL');
  t.comment(`nats-server ${victim.name} killed -9 (it leads none of ${streams.join(', ')})`);
  // Until the others see it gone, a meta-layer request (a consumer's creation) may wait on it: JetStream answers again first.
  const quick = await jetstreamManager(nc, { timeout: 1000, checkAPI: false });
  await eventually(async () => (await quick.getAccountInfo().catch(() => undefined)) !== undefined, 60_000, 200);
  const seqs = Array.from({ length: SCANS }, (_, i) => i + 1);

  const times: number[] = [];
  for (let attempt = 1; attempt <= ATTEMPTS; attempt++) {
    const started = Date.now();
    const file = path.join(dir, `restored-${attempt}.sqlite`);
    const restored = await restoreSnapshot(settings, 0, file);
    const journal = await ShardJournal.open(settings, 0);
    const entries: string[] = [];
    let messages: number;
    try {
      for await (const entry of journal.entries(0, last)) entries.push(new TextDecoder().decode(entry.data));
      messages = (await journal.messages(SCANS_STREAM, seqs)).length;
    } finally {
      await journal.close();
    }
    const ms = Date.now() - started;
    times.push(ms);
    t.ok(ms < BOUND_MS, `attempt ${attempt}: restore and journal tail read in ${ms} ms (under ${BOUND_MS})`);
    t.equal(restored?.journalPosition, ENTRIES, `attempt ${attempt}: the snapshot's position`);
    t.same(rowsOf(file), expected, `attempt ${attempt}: the restored file holds every row`);
    t.same(
      entries,
      Array.from({ length: ENTRIES }, (_, i) => `entry ${i + 1}`),
      `attempt ${attempt}: every journal entry, in order`,
    );
    t.equal(messages, SCANS, `attempt ${attempt}: every SCANS message the tail refers to`);
  }
  t.comment(`attempts (ms): ${times.join(', ')}`);
});
