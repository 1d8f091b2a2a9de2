/**
 * kill -9 in the middle of a bulk import (issue 16, step 3): after the restart the job is failed
 * with counts that are exactly what the data holds (rows 1..applied_through_row, each asset once,
 * each tag on the asset its row named), and the same file re-run in upsert mode applies the rest
 * without applying any row twice.
 */
import Database from 'better-sqlite3';
import net from 'node:net';
import path from 'node:path';
import t from 'tap';
import { runImport } from '../helpers/bulk.js';
import { eventually, spawnTrackd } from '../helpers/trackd.js';

const ROWS = 40_000;
const CHUNK_ROWS = 2_000;
const row = (i: number) => `A-${i},Asset ${i},rfid:T-${i}\n`;
const HEADER = 'external_key,name,tags\n';

function rows(from: number, to: number): string {
  let text = '';
  for (let i = from; i <= to; i++) text += row(i);
  return text;
}

t.test('kill -9 mid-import: the job says exactly what was applied; the rerun applies the rest once', async (t) => {
  const trackd = await spawnTrackd(t, { env: { SHARDS: '1', HTTP_THREADS: '1', LOG_LEVEL: 'warn' } });
  const org = await trackd.createOrg('Crash');
  const { token } = await trackd.createKey(org.id);
  const shardFile = path.join(trackd.dataDir, 'shards', 'shard-0.sqlite');

  // The upload goes out a chunk at a time: the next only once the job applied what came before,
  // so the kill lands while the job is running and rows are still to come.
  const conn = net.connect(trackd.port, '127.0.0.1');
  conn.on('error', () => {});
  const chunk = (text: string) => `${Buffer.byteLength(text).toString(16)}\r\n${text}\r\n`;
  conn.write(
    `POST /api/v1/assets/bulk HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\nContent-Type: text/csv\r\nTransfer-Encoding: chunked\r\n\r\n${chunk(HEADER)}`,
  );
  const db = new Database(shardFile, { readonly: true });
  const applied = () =>
    (db.prepare("SELECT applied_through_row FROM bulk_jobs WHERE status = 'processing'").pluck().get() as number | undefined) ?? 0;
  let sent = 0;
  while (sent < ROWS / 2) {
    conn.write(chunk(rows(sent + 1, sent + CHUNK_ROWS)));
    sent += CHUNK_ROWS;
    await eventually(() => applied() >= sent - CHUNK_ROWS, 30_000);
  }
  trackd.process.kill('SIGKILL');
  await eventually(() => trackd.process.signalCode === 'SIGKILL', 5000);
  db.close();
  conn.destroy();
  await trackd.restart();

  const jobId = new Database(shardFile, { readonly: true }).prepare('SELECT job_id FROM bulk_jobs').pluck().get() as string;
  const job = (await trackd.request('GET', `/api/v1/assets/bulk/${jobId}`, { token })).json.data;
  t.equal(job.status, 'failed', 'the interrupted job is failed after the restart');
  t.match(job.detail, /interrupted/);
  const through = job.applied_through_row as number;
  t.ok(through > 0 && through < ROWS, `the kill came mid-job (rows 1..${through} of ${ROWS} applied, ${sent} sent)`);
  t.equal(job.processed_rows, through, 'processed = applied through');
  t.equal(job.created, through, 'created = applied through');
  t.equal(job.tags_created, through);
  t.equal(job.failed_rows, 0);

  const check = (expected: number, label: string) => {
    const shard = new Database(shardFile, { readonly: true });
    try {
      const counts = shard
        .prepare(
          `SELECT count(*) AS assets, count(DISTINCT external_key) AS keys,
                  max(CAST(substr(external_key, 3) AS INTEGER)) AS highest FROM assets WHERE org_id = ? AND deleted_at IS NULL`,
        )
        .get(org.id) as { assets: number; keys: number; highest: number };
      t.same(counts, { assets: expected, keys: expected, highest: expected }, `${label}: rows 1..${expected}, each once`);
      const tags = shard.prepare('SELECT count(*) FROM tags WHERE org_id = ? AND deleted_at IS NULL').pluck().get(org.id);
      t.equal(tags, expected, `${label}: one tag per asset`);
      const misplaced = shard
        .prepare(
          `SELECT count(*) FROM tags t JOIN assets a ON a.id = t.asset_id
           WHERE t.org_id = ? AND t.deleted_at IS NULL AND t.value <> 'T-' || substr(a.external_key, 3)`,
        )
        .pluck()
        .get(org.id);
      t.equal(misplaced, 0, `${label}: every tag is on the asset its row named`);
    } finally {
      shard.close();
    }
  };
  check(through, 'after the kill');

  const rerun = await runImport(trackd, token, 'assets', HEADER + rows(1, ROWS), { query: 'mode=upsert', timeoutMs: 120_000 });
  t.match(rerun, { status: 'completed', total_rows: ROWS, created: ROWS - through, unchanged: through, updated: 0, failed_rows: 0 });
  check(ROWS, 'after the rerun');
});

t.test('kill -9 mid location import (tree order): the counts are what the data holds; the rerun applies the rest once', async (t) => {
  const PARENTS = 200;
  const CHILDREN = 20_000;
  const trackd = await spawnTrackd(t, { env: { SHARDS: '1', HTTP_THREADS: '1', LOG_LEVEL: 'warn' } });
  const org = await trackd.createOrg('Crash tree');
  const { token } = await trackd.createKey(org.id);
  const shardFile = path.join(trackd.dataDir, 'shards', 'shard-0.sqlite');
  // Children first, their parents at the end of the file: the job applies parents first, so not in file order.
  let csv = 'external_key,name,parent_external_key\n';
  for (let i = 0; i < CHILDREN; i++) csv += `C-${i},Child ${i},P-${i % PARENTS}\n`;
  for (let p = 0; p < PARENTS; p++) csv += `P-${p},Parent ${p},\n`;
  const accepted = await trackd.http('POST', '/api/v1/locations/bulk', { token, body: csv, contentType: 'text/csv' });
  t.equal(accepted.status, 202, accepted.text);
  const db = new Database(shardFile, { readonly: true });
  await eventually(() => ((db.prepare('SELECT processed FROM bulk_jobs').pluck().get() as number | undefined) ?? 0) >= 1000, 60_000, 5);
  trackd.process.kill('SIGKILL');
  await eventually(() => trackd.process.signalCode === 'SIGKILL', 5000);
  db.close();
  await trackd.restart();

  const job = (await trackd.request('GET', accepted.json.status_url, { token })).json.data;
  t.equal(job.status, 'failed');
  t.match(job.detail, /interrupted .* rows were judged in tree order/);
  t.ok(job.processed_rows > 0 && job.processed_rows < CHILDREN + PARENTS, `the kill came mid-job (${job.processed_rows} rows judged)`);
  t.match(job, { failed_rows: 0, created: job.processed_rows });
  const check = (expected: number, label: string) => {
    const shard = new Database(shardFile, { readonly: true });
    try {
      const counts = shard
        .prepare(
          'SELECT count(*) AS locations, count(DISTINCT external_key) AS keys FROM locations WHERE org_id = ? AND deleted_at IS NULL',
        )
        .get(org.id);
      t.same(counts, { locations: expected, keys: expected }, `${label}: ${expected} locations, each once`);
      const misplaced = shard
        .prepare(
          `SELECT count(*) FROM locations c LEFT JOIN locations p ON p.id = c.parent_id
           WHERE c.org_id = ? AND c.external_key LIKE 'C-%'
             AND (p.external_key IS NULL OR p.external_key <> 'P-' || (CAST(substr(c.external_key, 3) AS INTEGER) % ${PARENTS}))`,
        )
        .pluck()
        .get(org.id);
      t.equal(misplaced, 0, `${label}: every child under the parent its row named`);
    } finally {
      shard.close();
    }
  };
  check(job.created, 'after the kill');
  const rerun = await runImport(trackd, token, 'locations', csv, { query: 'mode=upsert', timeoutMs: 120_000 });
  t.match(rerun, {
    status: 'completed',
    created: CHILDREN + PARENTS - job.created,
    unchanged: job.created,
    updated: 0,
    failed_rows: 0,
  });
  check(CHILDREN + PARENTS, 'after the rerun');
});
