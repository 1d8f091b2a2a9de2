/**
 * Bulk import bodies a client abandons (issue 16): a connection closed before the body ended fails
 * its job (never `completed`), with counts that are exactly what the data holds; a body dropped
 * before its CSV header ended starts no job at all.
 */
import Database from 'better-sqlite3';
import net from 'node:net';
import path from 'node:path';
import t from 'tap';
import { settledJob } from '../helpers/bulk.js';
import { eventually, startTrackd } from '../helpers/trackd.js';

const chunk = (text: string) => `${Buffer.byteLength(text).toString(16)}\r\n${text}\r\n`;
const rows = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix}-${i},N${i}\n`).join('');

/** Each case: what the client sends after the request head before it closes the connection. */
const CASES: { name: string; framing: 'chunked' | 'length'; sent: (prefix: string) => string }[] = [
  { name: 'inside a row, mid-chunk', framing: 'chunked', sent: (p) => `${(400).toString(16)}\r\nexternal_key,name\n${p}-0,One\n${p}-1,Tw` },
  { name: 'at a row boundary between chunks', framing: 'chunked', sent: (p) => chunk(`external_key,name\n${rows(p, 3)}`) },
  { name: 'after a chunk size line', framing: 'chunked', sent: (p) => `${chunk(`external_key,name\n${rows(p, 2)}`)}40\r\n` },
  {
    name: 'after whole batches applied, mid-chunk',
    framing: 'chunked',
    sent: (p) => `${(200_000).toString(16)}\r\nexternal_key,name\n${rows(p, 2500)}`,
  },
  { name: 'a Content-Length body cut short', framing: 'length', sent: (p) => `external_key,name\n${rows(p, 1200)}` },
];

t.test('uploads dropped before the body ended', async (t) => {
  const trackd = await startTrackd(t);
  const org = await trackd.createOrg('Dropped uploads');
  const { token } = await trackd.createKey(org.id);
  const shard = new Database(path.join(trackd.dataDir, 'shards', `shard-${(org.id - 1) % 2}.sqlite`), { readonly: true });
  t.teardown(() => shard.close());
  const processing = () => shard.prepare("SELECT job_id FROM bulk_jobs WHERE status = 'processing'").pluck().get() as string | undefined;
  const head = (framing: 'chunked' | 'length') =>
    `POST /api/v1/assets/bulk HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\nContent-Type: text/csv\r\n${
      framing === 'chunked' ? 'Transfer-Encoding: chunked' : `Content-Length: ${10_000_000}`
    }\r\n\r\n`;

  for (const [i, c] of CASES.entries()) {
    await t.test(c.name, async (t) => {
      const prefix = `DROP${i}`;
      const conn = net.connect(trackd.port, '127.0.0.1');
      conn.write(head(c.framing) + c.sent(prefix));
      const jobId = await eventually(processing, 20_000);
      conn.destroy();
      const job = await settledJob(trackd, token, 'assets', jobId);
      t.equal(job.status, 'failed', 'a partial file is never completed');
      t.equal(job.total_rows, null, 'the body never ended, so it has no total');
      t.match(job.detail, /client closed the connection before the body ended/);
      const stored = shard.prepare('SELECT count(*) FROM assets WHERE external_key LIKE ?').pluck().get(`${prefix}-%`);
      t.equal(job.created, stored, 'the job counts what the data holds');
      t.equal(job.applied_through_row, job.processed_rows, 'applied in file order, every row valid');
      const beyond = shard.prepare('SELECT count(*) FROM assets WHERE external_key = ?').pluck().get(`${prefix}-${job.created}`);
      t.equal(beyond, 0, 'no row after applied_through_row');
    });
  }

  await t.test('dropped before the CSV header ended: no job', async (t) => {
    const before = shard.prepare('SELECT count(*) FROM bulk_jobs').pluck().get();
    const conn = net.connect(trackd.port, '127.0.0.1');
    const closed = new Promise((resolve) => conn.on('close', resolve));
    conn.write(`${head('chunked')}${(100).toString(16)}\r\nexternal_key,na`);
    conn.end(); // the bytes, then FIN
    await closed;
    // The next import of the org starts (no job left processing holds its slot) and is the only new job.
    const next = await trackd.request('POST', '/api/v1/assets/bulk', { token, body: 'name\nafter\n', contentType: 'text/csv' });
    t.equal(next.status, 202, next.text);
    await settledJob(trackd, token, 'assets', next.json.job_id);
    t.equal(shard.prepare('SELECT count(*) FROM bulk_jobs').pluck().get(), (before as number) + 1, 'only the later job exists');
  });
});
