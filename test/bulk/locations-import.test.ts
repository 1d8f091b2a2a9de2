/**
 * Bulk import of locations (issue 16, step 2): parents named by parent_external_key anywhere in the
 * file (the tree is ordered before it applies), cycles within the file, the parent rules of a single
 * create per row, upsert moves that would close a cycle, dry run and atomic over a tree.
 */
import t from 'tap';
import { postImport, runImport } from '../helpers/bulk.js';
import { startTrackd } from '../helpers/trackd.js';

const pairs = (errors: { row: number; field: string; error: string }[]) => errors.map((e) => [e.row, e.field, e.error]);

t.test('locations import', async (t) => {
  const trackd = await startTrackd(t);
  const org = await trackd.createOrg('Bulk Locations');
  const { token } = await trackd.createKey(org.id);
  const byKey = async (key: string) =>
    (await trackd.request('GET', `/api/v1/locations?external_key=${key}`, { token })).json.data[0] as Record<string, any> | undefined;

  await t.test('children before their parents, grandchildren first: the tree is built whatever the order', async (t) => {
    const csv = [
      'external_key,name,parent_external_key,tags',
      'SHELF-1,Shelf 1,DOCK-1,barcode:SH-1',
      'DOCK-1,Dock 1,SITE-1,',
      'BIN-1,Bin 1,SHELF-1,',
      'SITE-1,Site 1,,ble:SITE-B',
      'DOCK-2,Dock 2,SITE-1,',
    ].join('\n');
    const job = await runImport(trackd, token, 'locations', csv);
    t.match(job, { status: 'completed', kind: 'locations', total_rows: 5, created: 5, failed_rows: 0, tags_created: 2 });
    const site = await byKey('SITE-1');
    t.equal(site!.parent_id, null);
    t.equal((await byKey('DOCK-1'))!.parent_external_key, 'SITE-1');
    t.equal((await byKey('SHELF-1'))!.parent_external_key, 'DOCK-1');
    t.equal((await byKey('BIN-1'))!.parent_external_key, 'SHELF-1');
    const descendants = await trackd.request('GET', `/api/v1/locations/${site!.id}/descendants`, { token });
    t.equal(descendants.json.total_count, 4);
  });

  await t.test('NDJSON, a parent already stored, and one by parent_id', async (t) => {
    const site = await byKey('SITE-1');
    const body = [
      { external_key: 'YARD', name: 'Yard', parent_external_key: 'SITE-1' },
      { external_key: 'GATE', name: 'Gate', parent_id: site!.id },
    ]
      .map((r) => JSON.stringify(r))
      .join('\n');
    const job = await runImport(trackd, token, 'locations', body, { format: 'ndjson' });
    t.match(job, { created: 2, failed_rows: 0 });
    t.equal((await byKey('GATE'))!.parent_id, site!.id);
  });

  await t.test('cycles within the file, rows below them, and the parent rules of a single create', async (t) => {
    const site = await byKey('SITE-1');
    const csv = [
      'external_key,name,parent_external_key',
      'C-A,A,C-B', // A -> B -> C -> A
      'C-B,B,C-C',
      'C-C,C,C-A',
      'C-D,D,C-A', // hangs below the cycle
      'SELF,Self,SELF', // its own parent: not in the file's tree, and not a stored location either
      'ORPHAN,Orphan,NO-SUCH-PARENT',
      'C-OK,Fine,SITE-1',
      'C-A,Again,', // repeats row 1's key
    ].join('\n');
    const job = await runImport(trackd, token, 'locations', csv);
    t.match(job, { status: 'completed', total_rows: 8, created: 1, failed_rows: 7 });
    t.same(pairs(job.errors), [
      [1, 'parent_external_key', 'conflict'],
      [2, 'parent_external_key', 'conflict'],
      [3, 'parent_external_key', 'conflict'],
      [4, 'parent_external_key', 'fk_not_found'],
      [5, 'parent_external_key', 'fk_not_found'],
      [6, 'parent_external_key', 'fk_not_found'],
      [8, 'external_key', 'conflict'],
    ]);
    t.match(job.errors[0].message, /parent cycle within the file: rows 1 -> 2 -> 3 -> 1/);
    t.equal(await byKey('C-A'), undefined, 'nothing of the cycle was created');

    const rows = [
      { name: 'p0', parent_id: 0 },
      { name: 'big', parent_id: 2147483648 },
      { name: 'both', parent_id: site!.id, parent_external_key: 'DOCK-1' },
      { name: 'gone', parent_id: 2147483647 },
      { name: 'meta', metadata: {} },
    ];
    const ndjson = await runImport(trackd, token, 'locations', rows.map((r) => JSON.stringify(r)).join('\n'), { format: 'ndjson' });
    for (const [i, body] of rows.entries()) {
      const single = await trackd.request('POST', '/api/v1/locations', { token, body });
      const expected = single.json.error.fields.map((f: any) => [i + 1, f.field, f.code]);
      t.same(pairs(ndjson.errors.filter((e: any) => e.row === i + 1)), expected, `row ${i + 1}: as a single create (${expected})`);
    }
  });

  await t.test('upsert: a move that closes a cycle fails; an equal row changes nothing', async (t) => {
    const site = await byKey('SITE-1');
    const same = await runImport(trackd, token, 'locations', 'external_key,name,parent_external_key\nDOCK-1,Dock 1,SITE-1\n', {
      query: 'mode=upsert',
    });
    t.match(same, { unchanged: 1, updated: 0 });
    t.equal((await byKey('SITE-1'))!.updated_at, site!.updated_at);
    const cycle = await runImport(trackd, token, 'locations', 'external_key,name,parent_external_key\nSITE-1,Site 1,BIN-1\n', {
      query: 'mode=upsert',
    });
    t.same(pairs(cycle.errors), [[1, 'parent_external_key', 'conflict']]);
    t.match(cycle.errors[0].message, /parent cycle/);
    const move = await runImport(trackd, token, 'locations', 'external_key,name,parent_external_key\nBIN-1,Bin 1,DOCK-2\n', {
      query: 'mode=upsert',
    });
    t.match(move, { updated: 1 });
    t.equal((await byKey('BIN-1'))!.parent_external_key, 'DOCK-2');
  });

  await t.test('dry run and atomic over a tree', async (t) => {
    const tree = 'external_key,name,parent_external_key\nT-LEAF,Leaf,T-MID\nT-MID,Mid,T-ROOT\nT-ROOT,Root,\n';
    const dry = await runImport(trackd, token, 'locations', tree, { query: 'dry_run=true' });
    t.match(dry, { dry_run: true, created: 3, failed_rows: 0 }, 'children judged against parents the same run would create');
    t.equal(await byKey('T-ROOT'), undefined);
    const atomic = await runImport(trackd, token, 'locations', `${tree}T-BAD,,\n`, { query: 'atomic=true' });
    t.match(atomic, { created: 0, failed_rows: 1 });
    t.equal(await byKey('T-ROOT'), undefined);
    t.match(await runImport(trackd, token, 'locations', tree, { query: 'atomic=true' }), { created: 3 });
  });

  await t.test('scope: locations:write', async (t) => {
    const assetsOnly = (await trackd.createKey(org.id, ['assets:write', 'locations:read'])).token;
    const res = await postImport(trackd, assetsOnly, 'locations', 'name\nx\n');
    t.equal(res.status, 403);
    t.match(res.json.error.detail, /locations:write/);
  });
});
