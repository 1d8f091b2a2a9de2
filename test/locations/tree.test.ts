import t from 'tap';
import { fieldCodes, key, startLocations } from '../helpers/locations.js';

const ids = (res: { json: any }) => res.json.data.map((l: { id: number }) => l.id);
const keys = (res: { json: any }) => res.json.data.map((l: { external_key: string }) => l.external_key);

t.test('tree endpoints', async (t) => {
  const api = await startLocations(t);

  // root
  // ├── b "Bravo"  (created first, so smaller id)
  // │   ├── b2 "Same"
  // │   └── b1 "Same"   (same name; id breaks the tie for children)
  // └── a "Alpha"
  //     └── a1 "Zulu"
  //         └── a11 "Leaf"
  const root = await api.create({ external_key: key('ROOT'), name: 'Root' });
  const b = await api.create({ external_key: key('B'), name: 'Bravo', parent_id: root.id });
  const a = await api.create({ external_key: key('A'), name: 'Alpha', parent_id: root.id });
  const b2 = await api.create({ external_key: key('B2'), name: 'Same', parent_id: b.id });
  const b1 = await api.create({ external_key: key('B1'), name: 'Same', parent_id: b.id });
  const a1 = await api.create({ external_key: key('A1'), name: 'Zulu', parent_external_key: a.external_key });
  const a11 = await api.create({ external_key: key('A11'), name: 'Leaf', parent_id: a1.id });

  t.test('ancestors: root first, the location itself excluded', async (t) => {
    const res = await api.req('GET', `/api/v1/locations/${a11.id}/ancestors`);
    t.equal(res.status, 200);
    t.same(ids(res), [root.id, a.id, a1.id]);
    t.match(res.json, { limit: 50, offset: 0, total_count: 3 });
    const rootRes = await api.req('GET', `/api/v1/locations/${root.id}/ancestors`);
    t.same(rootRes.json, { data: [], limit: 50, offset: 0, total_count: 0 });
  });

  t.test('children: name ascending, then id ascending', async (t) => {
    const res = await api.req('GET', `/api/v1/locations/${root.id}/children`);
    t.same(ids(res), [a.id, b.id], 'Alpha before Bravo although Bravo has the smaller id');
    const same = await api.req('GET', `/api/v1/locations/${b.id}/children`);
    t.same(
      ids(same),
      [b2.id, b1.id].sort((x, y) => x - y),
      'equal names ordered by id',
    );
    t.equal(same.json.total_count, 2);
    const leaf = await api.req('GET', `/api/v1/locations/${a11.id}/children`);
    t.same(leaf.json.data, []);
  });

  t.test('descendants: depth-first preorder with id ascending among siblings', async (t) => {
    const res = await api.req('GET', `/api/v1/locations/${root.id}/descendants`);
    t.equal(res.status, 200);
    // b has the smaller id than a, so b's subtree comes first (siblings by id, not by name).
    t.same(ids(res), [b.id, b2.id, b1.id, a.id, a1.id, a11.id]);
    t.equal(res.json.total_count, 6);
    t.same(res.json.data[0].parent_external_key, root.external_key, 'full LocationView rows');
  });

  t.test('limit and offset page the fixed order', async (t) => {
    const res = await api.req('GET', `/api/v1/locations/${root.id}/descendants?limit=2&offset=3`);
    t.same(ids(res), [a.id, a1.id]);
    t.match(res.json, { limit: 2, offset: 3, total_count: 6 });
    const anc = await api.req('GET', `/api/v1/locations/${a11.id}/ancestors?limit=1&offset=1`);
    t.same(ids(anc), [a.id]);
    const kids = await api.req('GET', `/api/v1/locations/${root.id}/children?limit=1&offset=1`);
    t.same(ids(kids), [b.id]);
    t.equal(kids.json.total_count, 2);
  });

  t.test('sort and other list parameters are refused on every tree endpoint', async (t) => {
    for (const name of ['ancestors', 'children', 'descendants']) {
      const res = await api.req('GET', `/api/v1/locations/${root.id}/${name}?sort=name`);
      t.equal(res.status, 400, name);
      t.equal(res.json.error.type, 'validation_error');
      t.same(fieldCodes(res), [['sort', 'invalid_context']]);
      t.equal(res.json.error.fields[0].message, 'sort parameter not supported on this endpoint');
      t.equal(res.json.error.detail, 'sort parameter not supported on this endpoint');
      const q = await api.req('GET', `/api/v1/locations/${root.id}/${name}?q=x&bogus=1`);
      t.same(
        fieldCodes(q),
        [
          ['q', 'unknown_field'],
          ['bogus', 'unknown_field'],
        ],
        `${name}: another list's filter and an unknown key`,
      );
      const big = await api.req('GET', `/api/v1/locations/${root.id}/${name}?limit=201&offset=-1`);
      t.same(fieldCodes(big), [
        ['limit', 'too_large'],
        ['offset', 'too_small'],
      ]);
    }
  });

  t.test('missing, soft-deleted and out-of-range ids', async (t) => {
    const gone = await api.create({ external_key: key('GONE'), name: 'Gone' });
    t.equal((await api.req('DELETE', `/api/v1/locations/${gone.id}`)).status, 204);
    for (const name of ['ancestors', 'children', 'descendants']) {
      t.equal((await api.req('GET', `/api/v1/locations/${gone.id}/${name}`)).json.error.type, 'not_found', `${name}: soft-deleted`);
      t.equal((await api.req('GET', `/api/v1/locations/2147483000/${name}`)).status, 404, `${name}: missing`);
      const zero = await api.req('GET', `/api/v1/locations/0/${name}`);
      t.equal(zero.status, 400);
      t.same(fieldCodes(zero), [['location_id', 'too_small']]);
    }
  });

  t.test('soft-deleted and not-yet-effective nodes leave the lists; live nodes under a hidden one stay', async (t) => {
    const top = await api.create({ external_key: key('TOP'), name: 'Top' });
    const future = await api.create({ external_key: key('FUT'), name: 'Future', parent_id: top.id, valid_from: '2999-01-01T00:00:00Z' });
    const under = await api.create({ external_key: key('UNDER'), name: 'Under', parent_id: future.id });
    const dead = await api.create({ external_key: key('DEAD'), name: 'Dead', parent_id: top.id });
    t.equal((await api.req('DELETE', `/api/v1/locations/${dead.id}`)).status, 204);
    t.same(ids(await api.req('GET', `/api/v1/locations/${top.id}/descendants`)), [under.id]);
    t.same(ids(await api.req('GET', `/api/v1/locations/${top.id}/children`)), []);
    t.same(ids(await api.req('GET', `/api/v1/locations/${under.id}/ancestors`)), [top.id]);
    t.same(
      keys(await api.req('GET', `/api/v1/locations/${future.id}/children`)),
      [under.external_key],
      'by-id subject skips the temporal rule',
    );
  });

  t.test('HEAD answers like GET without a body', async (t) => {
    const res = await api.req('HEAD', `/api/v1/locations/${root.id}/children`);
    t.equal(res.status, 200);
    t.equal(res.text, '');
  });
});
