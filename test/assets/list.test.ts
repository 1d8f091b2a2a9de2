import t from 'tap';
import { fieldCodes, startAssets } from '../helpers/assets.js';

const keys = (res: { json: any }) => res.json.data.map((a: { external_key: string }) => a.external_key);

t.test('asset lists', async (t) => {
  const server = await startAssets(t);
  const api = await server.otherOrg('List Org');
  const list = (query = '') => api.req('GET', `/api/v1/assets${query}`);

  await t.test('envelope of an empty organization', async (t) => {
    const res = await list();
    t.same([res.status, res.json], [200, { data: [], limit: 50, offset: 0, total_count: 0 }]);
  });

  // Created out of key order so the default sort has to sort.
  const charlie = await api.create({
    name: 'charlie truck',
    external_key: 'C-1',
    description: 'Needs SERVICE soon',
    tags: [{ tag_type: 'rfid', value: 'E2-ABC-001' }],
  });
  await api.create({ name: 'Alpha crane', external_key: 'A-1', is_active: false });
  await api.create({ name: 'bravo 100%_done', external_key: 'B-1', metadata: { q: 'metadata is not searched' } });
  const delta = await api.create({ name: 'Delta', external_key: 'D-1', tags: [{ tag_type: 'ble', value: 'beacon-77' }] });
  const future = await api.create({ name: 'Future', external_key: 'F-1', valid_from: '2099-01-01T00:00:00Z' });
  const expired = await api.create({
    name: 'Expired',
    external_key: 'E-1',
    valid_from: '2020-01-01T00:00:00Z',
    valid_to: '2021-01-01T00:00:00Z',
  });
  const deleted = await api.create({ name: 'Deleted', external_key: 'G-1' });
  t.equal((await api.req('DELETE', `/api/v1/assets/${deleted.id}`)).status, 204);

  t.test('default scope and sort: live, currently effective, external_key then id', async (t) => {
    const res = await list();
    t.same(keys(res), ['A-1', 'B-1', 'C-1', 'D-1']);
    t.same([res.json.limit, res.json.offset, res.json.total_count], [50, 0, 4]);
    t.same(res.json.data[2], charlie, 'list rows are full AssetViews with tags');
  });

  t.test('limit and offset', async (t) => {
    const page = await list('?limit=2&offset=1');
    t.same([keys(page), page.json.limit, page.json.offset, page.json.total_count], [['B-1', 'C-1'], 2, 1, 4]);
    const past = await list('?offset=10');
    t.same([past.json.data, past.json.total_count], [[], 4]);
    t.equal((await list('?limit=200')).json.limit, 200);
    const cases: Array<[string, string, string, Record<string, unknown>?]> = [
      ['?limit=0', 'limit', 'too_small'],
      ['?limit=201', 'limit', 'too_large', { max: 200 }],
      ['?limit=ten', 'limit', 'invalid_value'],
      ['?offset=-1', 'offset', 'too_small'],
      ['?offset=2147483648', 'offset', 'too_large', { max: 2147483647 }],
    ];
    for (const [query, field, code, params] of cases) {
      const res = await list(query);
      t.same([res.status, res.json.error.type, fieldCodes(res)], [400, 'validation_error', [[field, code]]], query);
      if (params) t.match(res.json.error.fields[0].params, params);
    }
  });

  t.test('sort allowlist', async (t) => {
    t.same(keys(await list('?sort=-external_key')), ['D-1', 'C-1', 'B-1', 'A-1']);
    t.same(keys(await list('?sort=name')), ['A-1', 'D-1', 'B-1', 'C-1'], 'name ascending (binary collation)');
    // Two creates may share a millisecond: expect the server's tiebreak (id ascending) too.
    const rows: any[] = (await list()).json.data;
    const byTime = (field: string, desc: boolean) =>
      [...rows].sort((a, b) => (a[field] === b[field] ? a.id - b.id : a[field] < b[field] !== desc ? -1 : 1)).map((a) => a.external_key);
    t.same(keys(await list('?sort=-created_at')), byTime('created_at', true));
    t.same(keys(await list('?sort=updated_at')), byTime('updated_at', false));
    t.same(
      keys(await list('?sort=-updated_at,name')),
      [...rows]
        .sort((a, b) => (a.updated_at === b.updated_at ? (a.name < b.name ? -1 : 1) : a.updated_at < b.updated_at ? 1 : -1))
        .map((a) => a.external_key),
    );
    for (const [query, name] of [
      ['?sort=colour', 'colour'],
      ['?sort=-valid_from', 'valid_from'],
      ['?sort=name,id', 'id'],
    ] as const) {
      const res = await list(query);
      t.same([res.status, fieldCodes(res)], [400, [['sort', 'invalid_value']]], query);
      t.equal(res.json.error.fields[0].message, `unknown sort field: ${name}`);
    }
  });

  t.test('external_key filter: repeatable any-of; natural-key misses are 200 []', async (t) => {
    t.same(keys(await list('?external_key=D-1&external_key=A-1')), ['A-1', 'D-1']);
    const miss = await list('?external_key=NOPE');
    t.same([miss.status, miss.json.data, miss.json.total_count], [200, [], 0]);
    t.same((await list('?external_key=a-1')).json.data, [], 'case-sensitive');
    const joined = await list('?external_key=A-1,D-1');
    t.same([joined.status, fieldCodes(joined)], [400, [['external_key', 'invalid_value']]], 'comma-joined values are rejected');
    const pattern = await list('?external_key=A_1');
    t.same(fieldCodes(pattern), [['external_key', 'invalid_value']]);
  });

  t.test('is_active and include_deleted are independent', async (t) => {
    t.same(keys(await list('?is_active=false')), ['A-1']);
    t.same(keys(await list('?is_active=true')), ['B-1', 'C-1', 'D-1']);
    t.same(keys(await list('?include_deleted=true')), ['A-1', 'B-1', 'C-1', 'D-1', 'G-1']);
    t.same(keys(await list('?include_deleted=true&is_active=true&external_key=G-1')), ['G-1']);
    t.same(keys(await list('?include_deleted=false')), ['A-1', 'B-1', 'C-1', 'D-1']);
    const bad = await list('?is_active=yes');
    t.same(fieldCodes(bad), [['is_active', 'invalid_value']]);
  });

  t.test('the temporal rule always applies to lists and natural-key lookups', async (t) => {
    for (const query of [
      '?external_key=F-1',
      '?external_key=E-1',
      '?external_key=F-1&include_deleted=true&is_active=true',
      '?q=Future',
      '?q=Expired&include_deleted=true',
    ]) {
      t.same((await list(query)).json.data, [], query);
    }
    for (const asset of [future, expired]) {
      const byId = await api.req('GET', `/api/v1/assets/${asset.id}`);
      t.equal(byId.status, 200, 'only the by-id GET skips it');
    }
  });

  t.test('q: case-insensitive substring over name, external_key, description and live tag values', async (t) => {
    t.same(keys(await list('?q=ALPHA')), ['A-1'], 'name');
    t.same(keys(await list('?q=c-1')), ['C-1'], 'external_key');
    t.same(keys(await list('?q=service')), ['C-1'], 'description');
    t.same(keys(await list('?q=abc-0')), ['C-1'], 'tag value');
    t.same(keys(await list('?q=BEACON')), ['D-1'], 'tag value, case-insensitive');
    t.same(keys(await list('?q=metadata')), [], 'metadata is not searched');
    t.same(keys(await list(`?q=${encodeURIComponent('100%_')}`)), ['B-1'], '% and _ are literal');
    t.same(keys(await list('?q=%25')), ['B-1']);
    t.same(keys(await list('?q=delta&q=alpha')), ['D-1'], 'only the first q is honoured');
    t.same(keys(await list('?q=a&is_active=false')), ['A-1'], 'q combines with filters');
    const tag = delta.tags[0];
    t.equal((await api.req('DELETE', `/api/v1/assets/${delta.id}/tags/${tag.id}`)).status, 204);
    t.same(keys(await list('?q=beacon')), [], 'a detached tag no longer matches');
    for (const q of ['%0A', '%09', '%7F', 'a%00b']) {
      const res = await list(`?q=${q}`);
      t.same([res.status, fieldCodes(res)], [400, [['q', 'invalid_value']]], `q=${q}`);
    }
  });

  t.test('q folds case beyond ASCII too', async (t) => {
    const intl = await server.otherOrg('Intl Org');
    await intl.create({
      name: 'Kein Ärger',
      external_key: 'H-1',
      description: 'Große Kiste',
      tags: [{ tag_type: 'barcode', value: 'été-2026' }],
    });
    await intl.create({ name: 'Other', external_key: 'H-2' });
    const search = async (q: string) => keys(await intl.req('GET', `/api/v1/assets?q=${encodeURIComponent(q)}`));
    t.same(await search('ÄRGER'), ['H-1'], 'name');
    t.same(await search('GROSSE'), [], 'lowercasing, not full case folding');
    t.same(await search('GROßE'), ['H-1'], 'description');
    t.same(await search('ÉTÉ-'), ['H-1'], 'tag value');
  });

  t.test('unknown and misplaced parameters', async (t) => {
    const res = await list('?colour=red&parent_id=1&location_id=2');
    t.same(fieldCodes(res), [
      ['colour', 'unknown_field'],
      ['parent_id', 'unknown_field'],
      ['location_id', 'unknown_field'],
    ]);
  });

  t.test('HEAD mirrors GET without a body', async (t) => {
    const res = await api.req('HEAD', '/api/v1/assets');
    t.same([res.status, res.text], [200, '']);
    t.equal(res.headers.get('content-type'), 'application/json');
  });
});
