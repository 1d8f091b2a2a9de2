import path from 'node:path';
import Database from 'better-sqlite3';
import t from 'tap';
import { startLocations } from '../helpers/locations.js';

/**
 * Tree endpoints on 10,000-node trees: a 10,000-deep chain and a 10,000-node fan-out (one root, 9,999
 * children). The trees are written straight into the organization's shard file while trackd is stopped
 * (20,000 sequential POSTs would take most of this file's time budget); every measurement is over HTTP.
 */

const N = 10_000;
const BASE = 1_000_000_000; // far above the ids the control plane hands out in a test
const DEEP = BASE; // DEEP + i is the chain node at depth i
const WIDE = BASE + N; // WIDE is the fan-out root; WIDE + i (i >= 1) its children

function seed(file: string, orgId: number): void {
  const db = new Database(file);
  const insert = db.prepare(
    'INSERT INTO locations (id, org_id, external_key, name, parent_id, is_active, valid_from, created_at, updated_at) VALUES (?, ?, ?, ?, ?, 1, 0, 0, 0)',
  );
  db.transaction(() => {
    for (let i = 0; i < N; i++) insert.run(DEEP + i, orgId, `DEEP-${i}`, `Deep ${i}`, i === 0 ? null : DEEP + i - 1);
    insert.run(WIDE, orgId, 'WIDE-ROOT', 'Wide root', null);
    // Names descend while ids ascend, so children order (name) and descendants order (id) differ.
    for (let i = 1; i < N; i++) insert.run(WIDE + i, orgId, `WIDE-${i}`, `Child ${String(N - i).padStart(5, '0')}`, WIDE);
  })();
  db.close();
}

t.test('tree endpoints on 10,000-node trees', async (t) => {
  // One shard, so the organization's rows live in shard-0.sqlite.
  const api = await startLocations(t, 'Scale Org', { env: { SHARDS: '1', RATE_LIMIT_PER_MIN: '1000000' } });
  await api.trackd.stop();
  seed(path.join(api.trackd.dataDir, 'shards', 'shard-0.sqlite'), api.orgId);
  await api.trackd.restart();

  const timings: string[] = [];
  /** Per-request latency over HTTP: a warm-up, then the best and the median of `runs` requests. */
  async function timed(label: string, method: string, url: string, body?: unknown, runs = 5) {
    let res = await api.req(method, url, body); // warm-up (statement preparation)
    const samples: number[] = [];
    for (let i = 0; i < runs; i++) {
      const started = performance.now();
      res = await api.req(method, url, body);
      samples.push(performance.now() - started);
    }
    samples.sort((a, b) => a - b);
    const best = samples[0]!;
    timings.push(`${label}: best ${best.toFixed(1)} ms, median ${samples[samples.length >> 1]!.toFixed(1)} ms`);
    t.ok(best < 2000, `${label} stays fast (best ${best.toFixed(1)} ms)`);
    return res;
  }
  const ids = (res: { json: any }) => res.json.data.map((l: { id: number }) => l.id);

  const anc = await timed(
    'ancestors of the deepest chain node (9,999 ancestors), first page',
    'GET',
    `/api/v1/locations/${DEEP + N - 1}/ancestors?limit=200`,
  );
  t.equal(anc.json.total_count, N - 1);
  t.same(ids(anc).slice(0, 3), [DEEP, DEEP + 1, DEEP + 2], 'root first');
  const ancLast = await timed('ancestors, last page', 'GET', `/api/v1/locations/${DEEP + N - 1}/ancestors?limit=200&offset=${N - 1 - 1}`);
  t.same(ids(ancLast), [DEEP + N - 2], 'the parent closes the chain');

  const deepDesc = await timed(
    'descendants of the chain root (9,999 deep), first page',
    'GET',
    `/api/v1/locations/${DEEP}/descendants?limit=200`,
  );
  t.equal(deepDesc.json.total_count, N - 1);
  t.same(ids(deepDesc).slice(0, 3), [DEEP + 1, DEEP + 2, DEEP + 3]);
  const deepLast = await timed(
    'descendants of the chain root, last page',
    'GET',
    `/api/v1/locations/${DEEP}/descendants?limit=200&offset=${N - 2}`,
  );
  t.same(ids(deepLast), [DEEP + N - 1]);

  const kids = await timed('children of the fan-out root (9,999), first page', 'GET', `/api/v1/locations/${WIDE}/children?limit=200`);
  t.equal(kids.json.total_count, N - 1);
  t.same(ids(kids).slice(0, 2), [WIDE + N - 1, WIDE + N - 2], 'by name, not by id');
  const kidsLast = await timed(
    'children of the fan-out root, last page',
    'GET',
    `/api/v1/locations/${WIDE}/children?limit=200&offset=${N - 2}`,
  );
  t.same(ids(kidsLast), [WIDE + 1]);

  const wideDesc = await timed(
    'descendants of the fan-out root (9,999 wide), first page',
    'GET',
    `/api/v1/locations/${WIDE}/descendants?limit=200`,
  );
  t.equal(wideDesc.json.total_count, N - 1);
  t.same(ids(wideDesc).slice(0, 2), [WIDE + 1, WIDE + 2], 'siblings by id');

  const mid = DEEP + N / 2;
  /** One write, measured once (a repeat would be a no-op). */
  async function once(label: string, method: string, url: string, body: unknown) {
    const started = performance.now();
    const res = await api.req(method, url, body);
    timings.push(`${label}, one request: ${(performance.now() - started).toFixed(1)} ms`);
    return res;
  }
  const rename = await once('rename of the chain root (counts 9,999 descendants)', 'POST', `/api/v1/locations/${DEEP}/rename`, {
    external_key: 'DEEP-RENAMED',
  });
  t.equal(rename.json.descendant_count_affected, N - 1);
  const baseline = await timed('baseline: GET one location by id', 'GET', `/api/v1/locations/${DEEP}`);
  t.equal(baseline.status, 200);
  const cycle = await timed(
    're-parent the chain root under its deepest node (409 after a 10,000-step walk)',
    'PATCH',
    `/api/v1/locations/${DEEP}`,
    {
      parent_id: DEEP + N - 1,
    },
  );
  t.equal(cycle.status, 409);
  const move = await once(
    're-parent a mid-chain node (5,000 deep, 4,999 below it) under a fan-out child',
    'PATCH',
    `/api/v1/locations/${mid}`,
    { parent_id: WIDE + 1 },
  );
  t.equal(move.status, 200);
  const blocked = await timed('delete of the fan-out root (409: has children)', 'DELETE', `/api/v1/locations/${WIDE}`);
  t.equal(blocked.status, 409);
  const list = await timed(
    'list filtered by parent_id of the fan-out root, first page',
    'GET',
    `/api/v1/locations?parent_id=${WIDE}&limit=200`,
  );
  t.equal(list.json.total_count, N - 1);

  const all = await timed('list of 20,000 locations, default sort, first page', 'GET', '/api/v1/locations?limit=200');
  t.equal(all.json.total_count, 2 * N);
  const byName = await timed('list sorted by -name, first page', 'GET', '/api/v1/locations?sort=-name&limit=200');
  t.equal(byName.json.data[0].name, 'Wide root');
  const deepPage = await timed(
    'list sorted by created_at, page at offset 19,800',
    'GET',
    '/api/v1/locations?sort=created_at&limit=200&offset=19800',
  );
  t.equal(deepPage.json.data.length, 200);
  const q = await timed('list with q over 20,000 locations', 'GET', '/api/v1/locations?q=child%2009999');
  t.equal(q.json.total_count, 1);

  t.comment(timings.join('\n'));
});
