import t from 'tap';
import { fieldCodes, startLocations } from '../helpers/locations.js';

const keys = (res: { json: any }) => res.json.data.map((l: { external_key: string }) => l.external_key);

t.test('location list and tags sub-resource', async (t) => {
  const api = await startLocations(t);
  const list = (query: string) => api.req('GET', `/api/v1/locations${query}`);

  // Binary key order: 'INACT' < 'LA' < 'LB' < 'LC' < 'LD' < 'ROOT'.
  const root = await api.create({ external_key: 'ROOT', name: 'Root' });
  const la = await api.create({ external_key: 'LA', name: 'alpha', parent_id: root.id, description: 'North dock' });
  const lb = await api.create({ external_key: 'LB', name: 'Bravo', parent_id: root.id });
  const _lc = await api.create({
    external_key: 'LC',
    name: 'Charlie',
    parent_external_key: 'ROOT',
    tags: [{ tag_type: 'rfid', value: 'E200-TAG-77' }],
  });
  const ld = await api.create({ external_key: 'LD', name: 'Delta', parent_id: la.id });
  await api.create({ external_key: 'INACT', name: 'Inactive', is_active: false });
  await api.create({ external_key: 'FUT', name: 'Future', valid_from: '2999-01-01T00:00:00Z' });
  await api.create({ external_key: 'EXP', name: 'Expired', valid_from: '2000-01-01T00:00:00Z', valid_to: '2001-01-01T00:00:00Z' });
  const del = await api.create({ external_key: 'DEL', name: 'Deleted', parent_id: root.id });
  t.equal((await api.req('DELETE', `/api/v1/locations/${del.id}`)).status, 204);

  t.test('default scope and order', async (t) => {
    const res = await list('');
    t.equal(res.status, 200);
    t.same(keys(res), ['INACT', 'LA', 'LB', 'LC', 'LD', 'ROOT'], 'live, currently effective, any is_active, by external_key');
    t.match(res.json, { limit: 50, offset: 0, total_count: 6 });
    t.same(res.json.data.find((l: any) => l.external_key === 'LD').parent_external_key, 'LA');
  });

  t.test('sorts', async (t) => {
    const cases: Array<[string, string[]]> = [
      ['name', ['LB', 'LC', 'LD', 'INACT', 'ROOT', 'LA']],
      ['-name', ['LA', 'ROOT', 'INACT', 'LD', 'LC', 'LB']],
      ['-external_key', ['ROOT', 'LD', 'LC', 'LB', 'LA', 'INACT']],
    ];
    // created_at can tie within a millisecond: such ties go by id ascending in both directions.
    const rows: { external_key: string; created_at: string; id: number }[] = (await list('')).json.data;
    const byCreated = (desc: boolean) =>
      [...rows].sort((a, b) => (desc ? -1 : 1) * a.created_at.localeCompare(b.created_at) || a.id - b.id).map((r) => r.external_key);
    t.same(byCreated(false), ['ROOT', 'LA', 'LB', 'LC', 'LD', 'INACT'], 'created_at order is creation order');
    cases.push(['created_at', byCreated(false)], ['-created_at', byCreated(true)]);
    for (const [sort, expected] of cases) {
      const res = await list(`?sort=${sort}`);
      t.equal(res.status, 200, sort);
      t.same(keys(res), expected, sort);
    }
    for (const bad of ['bogus', 'updated_at', 'name,-parent_id']) {
      const res = await list(`?sort=${bad}`);
      t.equal(res.status, 400, bad);
      t.same(fieldCodes(res), [['sort', 'invalid_value']]);
      t.equal(res.json.error.fields[0].message, `unknown sort field: ${bad.split(',').pop()!.replace('-', '')}`);
    }
  });

  t.test('filters', async (t) => {
    const cases: Array<[string, string[]]> = [
      ['?external_key=LA&external_key=LC', ['LA', 'LC']],
      ['?external_key=la', []],
      ['?external_key=NOPE', []],
      ['?external_key=FUT', []],
      ['?external_key=FUT&include_deleted=true&is_active=true', []],
      ['?external_key=EXP&include_deleted=true', []],
      [`?parent_id=${root.id}`, ['LA', 'LB', 'LC']],
      [`?parent_id=${root.id}&parent_id=${la.id}`, ['LA', 'LB', 'LC', 'LD']],
      ['?parent_external_key=ROOT', ['LA', 'LB', 'LC']],
      ['?parent_external_key=ROOT&parent_external_key=LA', ['LA', 'LB', 'LC', 'LD']],
      ['?parent_external_key=NOPE', []],
      [`?parent_id=${root.id}&include_deleted=true`, ['DEL', 'LA', 'LB', 'LC']],
      [`?parent_id=${root.id}&external_key=LB`, ['LB']],
      ['?is_active=false', ['INACT']],
      ['?is_active=true&parent_external_key=LA', ['LD']],
      ['?include_deleted=true', ['DEL', 'INACT', 'LA', 'LB', 'LC', 'LD', 'ROOT']],
      ['?q=ALPH', ['LA']],
      ['?q=north', ['LA']],
      ['?q=tag-77', ['LC']],
      ['?q=ld', ['LD']],
      ['?q=%25', []],
      ['?q=alpha&q=bravo', ['LA']],
      ['?limit=2&offset=1', ['LA', 'LB']],
      ['?offset=10', []],
    ];
    for (const [query, expected] of cases) {
      const res = await list(query);
      t.equal(res.status, 200, query);
      t.same(keys(res), expected, query);
    }
    const paged = await list('?limit=2&offset=1');
    t.match(paged.json, { limit: 2, offset: 1, total_count: 6 });
    const deleted = await list('?external_key=DEL&include_deleted=true');
    t.not(deleted.json.data[0].deleted_at, null);
  });

  t.test('filter rejections', async (t) => {
    const cases: Array<[string, Array<[string, string]>]> = [
      [
        `?parent_id=${root.id}&parent_external_key=ROOT`,
        [
          ['parent_id', 'ambiguous_fields'],
          ['parent_external_key', 'ambiguous_fields'],
        ],
      ],
      ['?external_key=LA,LB', [['external_key', 'invalid_value']]],
      ['?parent_external_key=LA,LB', [['parent_external_key', 'invalid_value']]],
      ['?parent_external_key=a_b', [['parent_external_key', 'invalid_value']]],
      ['?parent_id=0', [['parent_id', 'too_small']]],
      ['?parent_id=x', [['parent_id', 'invalid_value']]],
      ['?parent_id=2147483648', [['parent_id', 'too_large']]],
      ['?is_active=yes', [['is_active', 'invalid_value']]],
      ['?include_deleted=1', [['include_deleted', 'invalid_value']]],
      ['?q=a%01b', [['q', 'invalid_value']]],
      ['?limit=0', [['limit', 'too_small']]],
      ['?limit=201', [['limit', 'too_large']]],
      ['?offset=-1', [['offset', 'too_small']]],
      ['?offset=2147483648', [['offset', 'too_large']]],
      ['?location_id=1', [['location_id', 'unknown_field']]],
      [
        '?colour=red&shade=dark',
        [
          ['colour', 'unknown_field'],
          ['shade', 'unknown_field'],
        ],
      ],
    ];
    for (const [query, expected] of cases) {
      const res = await list(query);
      t.equal(res.status, 400, query);
      t.equal(res.json.error.type, 'validation_error', query);
      t.same(fieldCodes(res), expected, query);
    }
    const big = await list('?limit=201');
    t.same(big.json.error.fields[0].params, { max: 200 });
  });

  t.test('parent_external_key stays on the view after the parent is soft-deleted', async (t) => {
    const parent = await api.create({ external_key: 'GONE-PARENT', name: 'Gone parent' });
    const child = await api.create({ external_key: 'GONE-CHILD', name: 'Gone child', parent_id: parent.id });
    t.equal((await api.req('DELETE', `/api/v1/locations/${child.id}`)).status, 204);
    t.equal((await api.req('DELETE', `/api/v1/locations/${parent.id}`)).status, 204);
    const res = await list('?external_key=GONE-CHILD&include_deleted=true');
    t.equal(res.json.data.length, 1);
    t.equal(res.json.data[0].parent_id, parent.id);
    t.equal(res.json.data[0].parent_external_key, 'GONE-PARENT');
    t.same(keys(await list('?parent_external_key=GONE-PARENT&include_deleted=true')), ['GONE-CHILD']);
    const reused = await api.create({ external_key: 'GONE-PARENT', name: 'New holder of the key' });
    t.not(reused.id, parent.id);
    const again = await list('?external_key=GONE-CHILD&include_deleted=true');
    t.equal(again.json.data[0].parent_external_key, 'GONE-PARENT', 'still the old parent, joined by id');
  });

  t.test('tags sub-resource', async (t) => {
    const attach = await api.req('POST', `/api/v1/locations/${lb.id}/tags`, { tag_type: 'ble', value: 'BEACON 1' });
    t.equal(attach.status, 201);
    const tag = attach.json.data;
    t.same(Object.keys(tag).sort(), ['id', 'tag_type', 'value']);
    t.match(tag, { tag_type: 'ble', value: 'BEACON 1' });
    t.equal(attach.headers.get('location'), `/api/v1/locations/${lb.id}/tags/${tag.id}`);
    const view = await api.req('GET', `/api/v1/locations/${lb.id}`);
    t.same(view.json.data.tags, [tag]);
    t.equal(view.json.data.updated_at, lb.updated_at, 'attaching does not change the location row');
    t.same(keys(await list('?q=beacon')), ['LB'], 'q sees live tag values');

    const dup = await api.req('POST', `/api/v1/locations/${la.id}/tags`, { tag_type: 'ble', value: 'BEACON 1' });
    t.equal(dup.status, 409, '(tag_type, value) unique per organization among live tags');
    t.equal(dup.json.error.type, 'conflict');
    const otherType = await api.req('POST', `/api/v1/locations/${la.id}/tags`, { tag_type: 'barcode', value: 'BEACON 1' });
    t.equal(otherType.status, 201, 'the same value under another tag_type');
    const onCreate = await api.req('POST', '/api/v1/locations', { name: 'dup tag', tags: [{ tag_type: 'rfid', value: 'E200-TAG-77' }] });
    t.equal(onCreate.status, 409, 'a taken tag in a create body');
    t.equal((await list('?q=dup%20tag')).json.total_count, 0, 'and the location was not created');

    const cases: Array<[string, unknown, Array<[string, string]>]> = [
      ['unknown tag_type', { tag_type: 'nfc', value: 'x' }, [['tag_type', 'invalid_value']]],
      ['null tag_type', { tag_type: null, value: 'x' }, [['tag_type', 'required']]],
      ['missing tag_type', { value: 'x' }, [['tag_type', 'required']]],
      ['missing value', { tag_type: 'rfid' }, [['value', 'required']]],
      ['empty value', { tag_type: 'rfid', value: '' }, [['value', 'too_short']]],
      ['long value', { tag_type: 'rfid', value: 'v'.repeat(256) }, [['value', 'too_long']]],
      ['control character in value', { tag_type: 'rfid', value: 'a\u0000b' }, [['value', 'invalid_value']]],
      ['extra field', { tag_type: 'rfid', value: 'x', colour: 'red' }, [['colour', 'unknown_field']]],
    ];
    for (const [name, body, expected] of cases) {
      const res = await api.req('POST', `/api/v1/locations/${lb.id}/tags`, body);
      t.equal(res.status, 400, name);
      t.same(fieldCodes(res), expected, name);
    }
    const allowed = await api.req('POST', `/api/v1/locations/${lb.id}/tags`, { tag_type: 'nfc', value: 'x' });
    t.same(allowed.json.error.fields[0].params, { allowed_values: ['rfid', 'ble', 'barcode'] });
    const inCreate = await api.req('POST', '/api/v1/locations', {
      name: 'n',
      tags: [
        { tag_type: 'rfid', value: 'ok' },
        { tag_type: 'wifi', value: 'x' },
      ],
    });
    t.same(fieldCodes(inCreate), [['tags[1].tag_type', 'invalid_value']]);
    const wide = await api.req('POST', `/api/v1/locations/${lb.id}/tags`, { tag_type: 'barcode', value: 'multi word\twith tab' });
    t.equal(wide.status, 201, 'tag values are wider than the external_key pattern');

    const withTags = (await api.req('GET', `/api/v1/locations/${lb.id}`)).json.data;
    t.equal(withTags.tags.length, 2);
    const echo = await api.req('PATCH', `/api/v1/locations/${lb.id}`, { ...withTags, tags: [...withTags.tags].reverse() });
    t.equal(echo.status, 200, 'a verbatim echo with the tags in another order');
    const fewer = await api.req('PATCH', `/api/v1/locations/${lb.id}`, { tags: withTags.tags.slice(1) });
    t.same(fieldCodes(fewer), [['tags', 'invalid_context']], 'a different tag set');

    const wrongOwner = await api.req('DELETE', `/api/v1/locations/${la.id}/tags/${tag.id}`);
    t.equal(wrongOwner.status, 404, 'a tag of another location');
    t.equal((await api.req('DELETE', `/api/v1/locations/${lb.id}/tags/${tag.id}`)).status, 204);
    const repeat = await api.req('DELETE', `/api/v1/locations/${lb.id}/tags/${tag.id}`);
    t.equal(repeat.status, 404, 'a repeat detach');
    t.equal(repeat.json.error.type, 'not_found');
    t.notOk((await api.req('GET', `/api/v1/locations/${lb.id}`)).json.data.tags.some((x: any) => x.id === tag.id));
    const reattach = await api.req('POST', `/api/v1/locations/${la.id}/tags`, { tag_type: 'ble', value: 'BEACON 1' });
    t.equal(reattach.status, 201, 'a detached tag frees its natural key');
    t.equal(
      (await api.req('POST', `/api/v1/locations/${del.id}/tags`, { tag_type: 'rfid', value: 'zz' })).status,
      404,
      'soft-deleted owner',
    );
    t.equal((await api.req('POST', '/api/v1/locations/2147483647/tags', { tag_type: 'rfid', value: 'zz' })).status, 404, 'missing owner');
    const zero = await api.req('DELETE', `/api/v1/locations/${la.id}/tags/0`);
    t.same(fieldCodes(zero), [['tag_id', 'too_small']]);
    t.equal(ld.parent_id, la.id);
  });
});
