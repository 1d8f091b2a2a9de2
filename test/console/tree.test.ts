import t, { type Test } from 'tap';
import { createUser, login } from '../helpers/console.js';
import { drained, natsClient, publish, scanBody } from '../helpers/scans.js';
import { ALL_SCOPES, startTrackd, testClock } from '../helpers/trackd.js';

/**
 * The console's tree counts (`/console/api/tree`): per location the assets at it and in its
 * subtree, kept per location by the shard's report index, and the event sequence they reflect
 * (`as_of_seq`), exact, so that a live feed applying the moves after it counts each move once.
 */

interface TreeRow {
  id: number;
  asset_count: number;
  subtree_asset_count: number;
}
interface TreePage {
  data: TreeRow[];
  as_of_seq: number;
}

t.test('tree counts: equal to the report, exact at as_of_seq under concurrent scans, following tree changes', async (t) => {
  const clock = testClock();
  const trackd = await startTrackd(t, { clock, env: { HTTP_THREADS: '1' } });
  const org = await trackd.createOrg('Counts');
  createUser(trackd, 'ann@example.com', [org.id]);
  const { cookie } = await login(trackd, 'ann@example.com', org.id);
  const { token } = await trackd.createKey(org.id, ALL_SCOPES);
  const post = async (path: string, body: unknown) => {
    const res = await trackd.request('POST', path, { token, body });
    if (res.status !== 201) throw new Error(`${path}: ${res.status} ${res.text}`);
    return res.json.data as { id: number; external_key: string };
  };
  // SITE ─ B1 ─ R1, R2;  SITE ─ B2 ─ R3;  YARD
  const site = await post('/api/v1/locations', { external_key: 'SITE', name: 'Site' });
  const b1 = await post('/api/v1/locations', { external_key: 'B1', name: 'B1', parent_id: site.id });
  const b2 = await post('/api/v1/locations', { external_key: 'B2', name: 'B2', parent_id: site.id });
  const r1 = await post('/api/v1/locations', { external_key: 'R1', name: 'R1', parent_id: b1.id });
  const r2 = await post('/api/v1/locations', { external_key: 'R2', name: 'R2', parent_id: b1.id });
  const r3 = await post('/api/v1/locations', { external_key: 'R3', name: 'R3', parent_id: b2.id });
  const yard = await post('/api/v1/locations', { external_key: 'YARD', name: 'Yard' });
  const places = [site, b1, b2, r1, r2, r3, yard];
  const parentOf = new Map<number, number | null>([
    [site.id, null],
    [b1.id, site.id],
    [b2.id, site.id],
    [r1.id, b1.id],
    [r2.id, b1.id],
    [r3.id, b2.id],
    [yard.id, null],
  ]);
  const ASSETS = 12;
  for (let i = 0; i < ASSETS; i++)
    await post('/api/v1/assets', { external_key: `A${i}`, name: `Asset ${i}`, tags: [{ tag_type: 'rfid', value: `T${i}` }] });
  const nc = await natsClient(t, trackd.natsUrl);
  const move = (asset: number, to: string) => publish(nc, `scans.${org.id}.fixed`, scanBody(to, [`rfid:T${asset}`], new Date(clock.now())));

  const tree = async (parent?: number): Promise<TreePage> => {
    const res = await trackd.request('GET', `/console/api/tree${parent === undefined ? '' : `?parent_id=${parent}`}`, {
      headers: { cookie },
    });
    if (res.status !== 200) throw new Error(`tree: ${res.status} ${res.text}`);
    return res.json;
  };
  /** Every page of the tree, by location id. */
  const allCounts = async () => {
    const rows = new Map<number, TreeRow>();
    for (const parent of [undefined, site.id, b1.id, b2.id]) for (const row of (await tree(parent)).data) rows.set(row.id, row);
    return rows;
  };
  /** The report's totals: the location alone, and it with its live descendants. */
  const reportTotals = async (id: number) => {
    const below = await trackd.request('GET', `/api/v1/locations/${id}/descendants?limit=200`, { token });
    const ids = [id, ...below.json.data.map((l: { id: number }) => l.id)];
    const total = async (of: number[]) =>
      (await trackd.request('GET', `/api/v1/reports/asset-locations?${of.map((l) => `location_id=${l}`).join('&')}&limit=1`, { token }))
        .json.total_count as number;
    return { here: await total([id]), subtree: await total(ids) };
  };
  const sameAsReport = async (t: Test, what: string) => {
    const rows = await allCounts();
    for (const l of places) {
      const row = rows.get(l.id);
      if (row === undefined) continue; // deleted
      const report = await reportTotals(l.id);
      t.same({ here: row.asset_count, subtree: row.subtree_asset_count }, report, `${what}: ${l.external_key} as the report counts it`);
    }
  };

  t.test('before any scan every count is 0 and as_of_seq names the last event', async (t) => {
    const roots = await tree();
    t.same(
      roots.data.map((r) => [r.asset_count, r.subtree_asset_count]),
      [
        [0, 0],
        [0, 0],
      ],
    );
    const head = await trackd.request('GET', `/api/v1/events?after=${Number.MAX_SAFE_INTEGER}&limit=1`, { token });
    t.equal(roots.as_of_seq, head.json.last_seq, 'the organization’s head (creates are events too)');
  });

  t.test('during a burst of scans every page’s counts are exactly the moves up to its as_of_seq', async (t) => {
    const started = (await tree()).as_of_seq;
    const targets = ['R1', 'R2', 'R3', 'B1', 'B2', 'SITE', 'YARD'];
    const pages: { parent: number | undefined; page: TreePage }[] = [];
    let publishing = true;
    const reader = (async () => {
      while (publishing) for (const parent of [undefined, site.id, b1.id]) pages.push({ parent, page: await tree(parent) });
    })();
    for (let i = 0; i < 60; i++) await move((i * 7) % ASSETS, targets[(i * 5) % targets.length]!);
    await drained(nc);
    publishing = false;
    await reader;
    for (const parent of [undefined, site.id, b1.id]) pages.push({ parent, page: await tree(parent) });

    const events = await trackd.request('GET', `/api/v1/events?after=${started}&limit=1000`, { token });
    const moves = (events.json.data as { seq: number; type: string; data: { asset: { id: number }; to: { id: number } } }[]).filter(
      (e) => e.type === 'asset.moved',
    );
    t.equal(moves.length, 60, 'each scan moved its asset (every target differs from the last)');
    const inSubtree = (at: number, of: number) => {
      for (let l: number | null = at; l !== null; l = parentOf.get(l) ?? null) if (l === of) return true;
      return false;
    };
    let wrong = 0;
    const mid = pages.filter((p) => p.page.as_of_seq > started && p.page.as_of_seq < moves.at(-1)!.seq).length;
    for (const { page } of pages) {
      const at = new Map<number, number>();
      for (const m of moves) if (m.seq <= page.as_of_seq) at.set(m.data.asset.id, m.data.to.id);
      for (const row of page.data) {
        const here = [...at.values()].filter((l) => l === row.id).length;
        const subtree = [...at.values()].filter((l) => inSubtree(l, row.id)).length;
        if (row.asset_count !== here || row.subtree_asset_count !== subtree) wrong++;
      }
    }
    t.equal(wrong, 0, `${pages.length} pages (${mid} read mid-burst), each row's counts = the moves up to its as_of_seq`);
    t.equal(pages.at(-1)!.page.as_of_seq, moves.at(-1)!.seq, 'after the burst as_of_seq is the last move');
    await sameAsReport(t, 'after the burst');
  });

  t.test('a location moved to another parent, a new location, a deleted leaf: the subtree counts follow', async (t) => {
    await move(0, 'R1');
    await move(1, 'R1');
    await drained(nc);
    const was = await allCounts(); // the kept totals exist before the changes below
    const atR1 = was.get(r1.id)!.subtree_asset_count;
    const patched = await trackd.request('PATCH', `/api/v1/locations/${r1.id}`, { token, body: { parent_id: b2.id } });
    t.equal(patched.status, 200, 'R1 now under B2');
    parentOf.set(r1.id, b2.id);
    const rows = await allCounts();
    t.ok(atR1 >= 2, `${atR1} assets at R1`);
    t.same(
      [b1.id, b2.id, site.id].map((id) => rows.get(id)!.subtree_asset_count),
      [was.get(b1.id)!.subtree_asset_count - atR1, was.get(b2.id)!.subtree_asset_count + atR1, was.get(site.id)!.subtree_asset_count],
      'B1 lost what R1 holds, B2 gained it, the site kept it',
    );
    await sameAsReport(t, 'after R1 moved under B2');

    const r4 = await post('/api/v1/locations', { external_key: 'R4', name: 'R4', parent_id: b1.id });
    places.push(r4);
    parentOf.set(r4.id, b1.id);
    await move(2, 'YARD');
    await drained(nc);
    const before = (await allCounts()).get(b1.id)!.subtree_asset_count;
    await move(2, 'R4');
    await drained(nc);
    t.equal((await allCounts()).get(b1.id)!.subtree_asset_count, before + 1, 'B1 gained the asset scanned at its new child');
    await sameAsReport(t, 'after a scan at a new location');

    await move(2, 'YARD');
    await drained(nc);
    const deleted = await trackd.request('DELETE', `/api/v1/locations/${r4.id}`, { token });
    t.equal(deleted.status, 204, 'R4 deleted once empty (a location holding assets cannot be)');
    places.pop();
    await sameAsReport(t, 'after a leaf holding an asset was deleted');
  });

  t.test('a clock set back before a validity boundary the index applied: the report’s SQL answers, same counts', async (t) => {
    const temp = await post('/api/v1/assets', {
      external_key: 'TEMP',
      name: 'Temporary',
      valid_to: new Date(clock.now() + 3_600_000).toISOString(),
      tags: [{ tag_type: 'rfid', value: 'TEMP' }],
    });
    await publish(nc, `scans.${org.id}.fixed`, scanBody('R3', ['rfid:TEMP'], new Date(clock.now())));
    await drained(nc);
    const during = (await allCounts()).get(r3.id)!;
    clock.advance(2 * 3_600_000);
    const after = (await allCounts()).get(r3.id)!;
    t.equal(after.asset_count, during.asset_count - 1, `asset ${temp.id} left the counts at its valid_to`);
    clock.advance(-2 * 3_600_000);
    const back = await tree(b2.id);
    t.equal(back.data.find((r) => r.id === r3.id)?.asset_count, during.asset_count, 'counted again at a time inside its validity');
    const head = await trackd.request('GET', `/api/v1/events?after=${Number.MAX_SAFE_INTEGER}&limit=1`, { token });
    t.equal(back.as_of_seq, head.json.last_seq, 'as_of_seq read before the counts');
    await sameAsReport(t, 'with the clock set back');
  });
});
