import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import t from 'tap';
import { seed } from '../helpers/masterdata.js';
import { drained, natsClient } from '../helpers/scans.js';
import { sustainedPublisher } from '../helpers/ingestLoad.js';
import { historyCounts } from '../helpers/scanMix.js';
import { envelopeProblems, requestHead } from '../helpers/hostile.js';
import { rawRequest } from '../helpers/wire.js';
import { eventually, startNats, spawnTrackd } from '../helpers/trackd.js';

/**
 * SIGTERM under HTTP load and a running ingest (operations.md 1): in-flight requests finish, new
 * connections are refused, requests on kept-alive connections get a clean 503, the process exits 0
 * within 10 s, every acknowledged write and every acknowledged scan is there after a restart.
 */

const ASSETS = { 'EPC-1': 'PALLET-1', 'EPC-2': 'PALLET-2' };

t.test('SIGTERM under HTTP load and ingest', async (t) => {
  const nats = await startNats(t);
  const trackd = await spawnTrackd(t, { natsUrl: nats.url, env: { HISTORY_GAP_SECONDS: '0' } });
  const org = await trackd.createOrg('Shutdown');
  const token = (await trackd.createKey(org.id)).token;
  const ids = await seed(trackd, token, {
    locations: [{ external_key: 'DOCK-1' }],
    assets: Object.entries(ASSETS).map(([tag, key]) => ({ external_key: key, tags: [`rfid:${tag}`] })),
  });
  const port = trackd.port;
  const nc = await natsClient(t, nats.url);
  const publisher = sustainedPublisher(nc, `scans.${org.id}.fixed`, 'DOCK-1', ASSETS, {
    perTick: 20,
    tickMs: 20,
    base: Date.now() - 86_400_000,
    prefix: 'term',
  });

  // Load: 16 clients creating and listing in a loop over kept-alive connections.
  const outcomes: Record<string, number> = {};
  const problems: string[] = [];
  let created = 0;
  let loading = true;
  const client = async (n: number) => {
    for (let i = 0; loading; i++) {
      const create = i % 2 === 0;
      try {
        const res = await fetch(`http://127.0.0.1:${port}${create ? '/api/v1/locations' : '/api/v1/locations?limit=5'}`, {
          method: create ? 'POST' : 'GET',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: create ? JSON.stringify({ name: `Load ${n}-${i}` }) : undefined,
        });
        const text = await res.text();
        outcomes[res.status] = (outcomes[res.status] ?? 0) + 1;
        if (res.status === 201) created++;
        else if (res.status !== 200)
          problems.push(...envelopeProblems(res.status, res.headers, text, create ? '/api/v1/locations' : '/api/v1/locations'));
        if (res.status >= 500 && res.status !== 503) problems.push(`status ${res.status}: ${text}`);
      } catch {
        outcomes.connection_error = (outcomes.connection_error ?? 0) + 1;
        await new Promise((r) => setTimeout(r, 20));
      }
    }
  };
  const clients = Array.from({ length: 16 }, (_, n) => client(n));
  await eventually(() => (outcomes[200] ?? 0) + (outcomes[201] ?? 0) > 50, 20_000, 20);
  await publisher.progressed(300);

  // A request in flight when the signal arrives: its head parsed (100 Continue) and part of the body
  // sent before SIGTERM, the rest once new connections are refused.
  const body = JSON.stringify({ name: 'In flight at SIGTERM' });
  let continued!: () => void;
  const headParsed = new Promise<void>((r) => (continued = r));
  let release!: () => void;
  const afterSignal = new Promise<void>((r) => (release = r));
  const inFlight = rawRequest(
    port,
    requestHead('POST', '/api/v1/locations', {
      Authorization: `Bearer ${token}`,
      'Content-Type': 'application/json',
      'Content-Length': Buffer.byteLength(body),
      Expect: '100-continue',
    }).replace(/\r\n\r\n$/, ''),
    (async function* () {
      await headParsed;
      yield body.slice(0, 10);
      await afterSignal;
      yield body.slice(10);
    })(),
    10_000,
    continued,
  );
  await headParsed;
  const signalled = Date.now();
  const exit = trackd.stop('SIGTERM');
  const refused = await eventually(
    () =>
      new Promise<boolean>((resolve) => {
        const s = net.connect(port, '127.0.0.1');
        s.once('error', (err: NodeJS.ErrnoException) => resolve(err.code === 'ECONNREFUSED'));
        s.once('connect', () => {
          s.destroy();
          resolve(false);
        });
      }),
    3000,
    20,
  );
  t.ok(refused, `new connections refused ${Date.now() - signalled} ms after SIGTERM`);
  release();
  const finished = await inFlight;
  t.equal(finished.status, 201, 'the request in flight at SIGTERM finished (201)');
  const code = await exit;
  const took = Date.now() - signalled;
  loading = false;
  await Promise.all(clients);
  await publisher.stop();
  t.equal(code, 0, 'exit code 0');
  t.ok(took < 10_000, `exited ${took} ms after SIGTERM (limit 10 s)`);
  // SQLite closed: each shard's WAL copied back into its file, so the next start has none to read.
  const wals = fs
    .readdirSync(path.join(trackd.dataDir, 'shards'))
    .filter((name) => name.endsWith('.sqlite-wal'))
    .map((name) => ({ name, bytes: fs.statSync(path.join(trackd.dataDir, 'shards', name)).size }));
  t.same(
    wals.filter((wal) => wal.bytes > 0),
    [],
    `no shard WAL left with frames after the exit (${wals.map((wal) => `${wal.name} ${wal.bytes} B`).join(', ') || 'none left'})`,
  );
  t.comment(`load outcomes: ${JSON.stringify(outcomes)}; ${created} created; ${publisher.acked()} scans acknowledged`);
  t.same(problems, [], 'no 500 and every error with its envelope');
  t.ok((outcomes[200] ?? 0) + (outcomes[201] ?? 0) > 50, 'the load was real');

  await trackd.restart();
  const list = await trackd.request('GET', '/api/v1/locations?limit=1&q=Load', { token });
  t.equal(list.json.total_count, created, 'every acknowledged create is stored');
  const inflightRow = await trackd.request('GET', `/api/v1/locations?q=${encodeURIComponent('In flight')}`, { token });
  t.equal(inflightRow.json.total_count, 1, 'and the one in flight at SIGTERM');
  const published = publisher.acked();
  await drained(nc);
  const applied = Object.values(await historyCounts(trackd, token, ids.assets)).reduce((a, b) => a + b, 0);
  t.equal(applied, published, `scans: published ${published}, applied ${applied} across the SIGTERM and restart`);
});
