import t from 'tap';
import { fieldCodes, key, startLocations } from '../helpers/locations.js';

const VIEW_FIELDS = [
  'id',
  'external_key',
  'name',
  'description',
  'parent_id',
  'parent_external_key',
  'is_active',
  'valid_from',
  'valid_to',
  'created_at',
  'updated_at',
  'deleted_at',
  'tags',
];
const TS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

t.test('locations: create, get, patch, rename, delete', async (t) => {
  const api = await startLocations(t);
  // Keys are minted up front: the CLI blocks this process for seconds, long enough for the server to
  // close an idle keep-alive connection that fetch would then reuse.
  const readOnly = (await api.trackd.createKey(api.orgId, ['locations:read'])).token;
  const writeOnly = (await api.trackd.createKey(api.orgId, ['locations:write'])).token;
  const assetsOnly = (await api.trackd.createKey(api.orgId, ['assets:read', 'assets:write'])).token;

  t.test('POST creates: 201, Location header, every view field present', async (t) => {
    const k = key('NEW');
    const res = await api.req('POST', '/api/v1/locations', { external_key: k, name: 'Dock 1' });
    t.equal(res.status, 201);
    const v = res.json.data;
    t.equal(res.headers.get('location'), `/api/v1/locations/${v.id}`);
    t.same(Object.keys(v).sort(), [...VIEW_FIELDS].sort());
    t.match(v, {
      external_key: k,
      name: 'Dock 1',
      description: null,
      parent_id: null,
      parent_external_key: null,
      is_active: true,
      valid_to: null,
      deleted_at: null,
      tags: [],
    });
    for (const f of ['valid_from', 'created_at', 'updated_at']) t.match(v[f], TS, f);
    t.notOk('metadata' in v, 'locations have no metadata');
    const got = await api.req('GET', `/api/v1/locations/${v.id}`);
    t.equal(got.status, 200);
    t.same(got.json, { data: v });
  });

  t.test('POST timestamps: any offset, sub-millisecond digits truncated, .NNNZ out', async (t) => {
    const v = await api.create({ name: 'Stamped', valid_from: '2020-01-01T01:00:00.123999999+02:00', valid_to: '2999-12-31T23:59:59Z' });
    t.equal(v.valid_from, '2019-12-31T23:00:00.123Z');
    t.equal(v.valid_to, '2999-12-31T23:59:59.000Z');
  });

  t.test('external keys: case-sensitive, unique among live rows, freed by soft delete', async (t) => {
    const k = key('case');
    const lower = await api.create({ external_key: k, name: 'lower' });
    await api.create({ external_key: k.toUpperCase(), name: 'upper' });
    const dup = await api.req('POST', '/api/v1/locations', { external_key: k, name: 'again' });
    t.equal(dup.status, 409);
    t.equal(dup.json.error.type, 'conflict');
    t.equal((await api.req('DELETE', `/api/v1/locations/${lower.id}`)).status, 204);
    const reused = await api.req('POST', '/api/v1/locations', { external_key: k, name: 'reused' });
    t.equal(reused.status, 201, 'the key is free again');
    t.not(reused.json.data.id, lower.id);
  });

  t.test('POST validation, one case per rule', async (t) => {
    const long = 'x'.repeat(256);
    const cases: Array<[string, Record<string, unknown>, Array<[string, string]>]> = [
      ['name missing', {}, [['name', 'required']]],
      ['name null', { name: null }, [['name', 'invalid_value']]],
      ['name empty', { name: '' }, [['name', 'too_short']]],
      ['name with a leading space', { name: ' Dock' }, [['name', 'invalid_value']]],
      ['name with a trailing space', { name: 'Dock ' }, [['name', 'invalid_value']]],
      ['name with a tab', { name: 'Do\tck' }, [['name', 'invalid_value']]],
      ['name with a newline', { name: 'Do\nck' }, [['name', 'invalid_value']]],
      ['name with DEL', { name: 'Do\u007fck' }, [['name', 'invalid_value']]],
      ['name of the wrong type', { name: 7 }, [['name', 'invalid_value']]],
      ['description empty', { name: 'n', description: '' }, [['description', 'too_short']]],
      ['description with a control character', { name: 'n', description: 'a\u0001b' }, [['description', 'invalid_value']]],
      ['metadata is not a location field', { name: 'n', metadata: {} }, [['metadata', 'unknown_field']]],
      ['undeclared key', { name: 'n', colour: 'red' }, [['colour', 'unknown_field']]],
      ['is_active null', { name: 'n', is_active: null }, [['is_active', 'invalid_value']]],
      ['is_active a string', { name: 'n', is_active: 'yes' }, [['is_active', 'invalid_value']]],
      ['external_key with an underscore', { name: 'n', external_key: 'a_b' }, [['external_key', 'invalid_value']]],
      ['external_key with a comma', { name: 'n', external_key: 'a,b' }, [['external_key', 'invalid_value']]],
      ['external_key too long', { name: 'n', external_key: long }, [['external_key', 'too_long']]],
      ['external_key empty', { name: 'n', external_key: '' }, [['external_key', 'too_short']]],
      ['external_key null', { name: 'n', external_key: null }, [['external_key', 'invalid_value']]],
      ['valid_from date-only', { name: 'n', valid_from: '2020-01-01' }, [['valid_from', 'invalid_value']]],
      ['valid_from with slashes', { name: 'n', valid_from: '2020/01/01T00:00:00Z' }, [['valid_from', 'invalid_value']]],
      ['valid_from empty', { name: 'n', valid_from: '' }, [['valid_from', 'invalid_value']]],
      ['valid_from null', { name: 'n', valid_from: null }, [['valid_from', 'invalid_value']]],
      ['valid_from epoch sentinel', { name: 'n', valid_from: '1970-01-01T00:00:00Z' }, [['valid_from', 'invalid_value']]],
      [
        'valid_from year-one sentinel with an offset',
        { name: 'n', valid_from: '0001-01-01T01:00:00+01:00' },
        [['valid_from', 'invalid_value']],
      ],
      ['valid_to sentinel', { name: 'n', valid_to: '1970-01-01T00:00:00.000Z' }, [['valid_to', 'invalid_value']]],
      [
        'valid_to equal to valid_from',
        { name: 'n', valid_from: '2020-01-01T00:00:00Z', valid_to: '2020-01-01T00:00:00Z' },
        [['valid_to', 'invalid_value']],
      ],
      [
        'valid_to before valid_from',
        { name: 'n', valid_from: '2020-01-01T00:00:00Z', valid_to: '2019-01-01T00:00:00Z' },
        [['valid_to', 'invalid_value']],
      ],
      [
        'several failures at once',
        { name: '', is_active: 1, metadata: 'x' },
        [
          ['metadata', 'unknown_field'],
          ['name', 'too_short'],
          ['is_active', 'invalid_value'],
        ],
      ],
    ];
    for (const [name, body, expected] of cases) {
      const res = await api.req('POST', '/api/v1/locations', body);
      t.equal(res.status, 400, name);
      t.equal(res.json.error.type, 'validation_error', name);
      t.same(fieldCodes(res), expected, name);
    }
    const typed = await api.req('POST', '/api/v1/locations', { name: 'n', is_active: 'yes' });
    t.same(typed.json.error.fields[0].params, { expected_type: 'boolean', received_type: 'string' });
    const several = await api.req('POST', '/api/v1/locations', { name: '', is_active: 1, metadata: 'x' });
    t.match(several.json.error.detail, / \(and 2 more validation errors\)$/);
    const sentinelTo = await api.req('POST', '/api/v1/locations', { name: 'n', valid_to: '1970-01-01T00:00:00.000Z' });
    t.match(sentinelTo.json.error.fields[0].message, /use null/);
    const sentinelFrom = await api.req('POST', '/api/v1/locations', { name: 'n', valid_from: '1970-01-01T00:00:00Z' });
    t.match(sentinelFrom.json.error.fields[0].message, /1970-01-01T00:00:00Z.*omit the field/);
    const multiLine = await api.req('POST', '/api/v1/locations', { name: 'Multi', description: 'line one\n\tline two\r\n' });
    t.equal(multiLine.status, 201, 'multi-line description with tab and CR is fine');
  });

  t.test('content types and body decoding', async (t) => {
    const v = await api.create({ name: 'Typed' });
    const cases: Array<[string, string, unknown, string | null, number, string, string | undefined]> = [
      [
        'POST with merge-patch',
        'POST',
        { name: 'x' },
        'application/merge-patch+json',
        415,
        'unsupported_media_type',
        'Content-Type must be application/json',
      ],
      ['POST without a type', 'POST', { name: 'x' }, null, 415, 'unsupported_media_type', undefined],
      ['POST multipart', 'POST', 'x', 'multipart/form-data; boundary=x', 415, 'unsupported_media_type', undefined],
      ['POST broken JSON', 'POST', '{"name":', 'application/json', 400, 'bad_request', 'Request body is not valid JSON'],
      ['POST array', 'POST', '[]', 'application/json', 400, 'bad_request', 'Request body could not be decoded as the expected type'],
      [
        'PATCH with application/json',
        'PATCH',
        { name: 'x' },
        'application/json',
        415,
        'unsupported_media_type',
        'Content-Type must be application/merge-patch+json on PATCH operations',
      ],
      [
        'PATCH literal null',
        'PATCH',
        'null',
        'application/merge-patch+json',
        400,
        'bad_request',
        'Request body must be a JSON object (RFC 7396)',
      ],
    ];
    for (const [name, method, body, type, status, errorType, detail] of cases) {
      const path = method === 'POST' ? '/api/v1/locations' : `/api/v1/locations/${v.id}`;
      const res = await api.req(method, path, body, { contentType: type });
      t.equal(res.status, status, name);
      t.equal(res.json.error.type, errorType, name);
      if (detail !== undefined) t.equal(res.json.error.detail, detail, name);
      t.notOk(res.json.error.fields, `${name}: no fields[]`);
    }
    const renameType = await api.req(
      'POST',
      `/api/v1/locations/${v.id}/rename`,
      { external_key: 'X' },
      { contentType: 'application/merge-patch+json' },
    );
    t.equal(renameType.status, 415);
  });

  t.test('GET by id: 404 rules, query parameters refused', async (t) => {
    const future = await api.create({ name: 'Later', valid_from: '2999-01-01T00:00:00Z' });
    t.equal((await api.req('GET', `/api/v1/locations/${future.id}`)).status, 200, 'by-id GET skips the temporal rule');
    const gone = await api.create({ name: 'Gone' });
    await api.req('DELETE', `/api/v1/locations/${gone.id}`);
    const res = await api.req('GET', `/api/v1/locations/${gone.id}`);
    t.equal(res.status, 404);
    t.equal(res.json.error.type, 'not_found');
    t.equal((await api.req('GET', '/api/v1/locations/2147483647')).status, 404);
    const cases: Array<[string, Array<[string, string]>]> = [
      ['/api/v1/locations/0', [['location_id', 'too_small']]],
      ['/api/v1/locations/-1', [['location_id', 'too_small']]],
      ['/api/v1/locations/abc', [['location_id', 'invalid_value']]],
      ['/api/v1/locations/2147483648', [['location_id', 'too_large']]],
      [`/api/v1/locations/${future.id}?include_deleted=true`, [['include_deleted', 'invalid_context']]],
      [
        `/api/v1/locations/${future.id}?parent_id=1&zzz=1`,
        [
          ['parent_id', 'invalid_context'],
          ['zzz', 'unknown_field'],
        ],
      ],
    ];
    for (const [path, expected] of cases) {
      const r = await api.req('GET', path);
      t.equal(r.status, 400, path);
      t.same(fieldCodes(r), expected, path);
    }
    const onWrite = await api.req('PATCH', `/api/v1/locations/${future.id}?is_active=true`, {});
    t.same(fieldCodes(onWrite), [['is_active', 'invalid_context']], 'list filter on a write endpoint');
  });

  t.test('PATCH: merge-patch semantics', async (t) => {
    const v = await api.create({ external_key: key('PATCH'), name: 'Before', description: 'd', valid_from: '2020-01-01T00:00:00Z' });
    const set = await api.req('PATCH', `/api/v1/locations/${v.id}`, {
      name: 'After',
      description: null,
      is_active: false,
      valid_to: '2999-01-01T00:00:00Z',
    });
    t.equal(set.status, 200);
    t.match(set.json.data, {
      name: 'After',
      description: null,
      is_active: false,
      valid_to: '2999-01-01T00:00:00.000Z',
      external_key: v.external_key,
    });
    t.ok(set.json.data.updated_at > v.updated_at, 'updated_at advances');
    const empty = await api.req('PATCH', `/api/v1/locations/${v.id}`, {});
    t.equal(empty.status, 200);
    t.ok(empty.json.data.updated_at > set.json.data.updated_at, '{} still advances updated_at');
    t.same({ ...empty.json.data, updated_at: 0 }, { ...set.json.data, updated_at: 0 }, '{} changes nothing else');
    const cleared = await api.req('PATCH', `/api/v1/locations/${v.id}`, { valid_to: null });
    t.equal(cleared.json.data.valid_to, null, 'null clears valid_to');
  });

  t.test('PATCH: field rejections', async (t) => {
    const v = await api.create({ name: 'Strict', valid_from: '2020-01-01T00:00:00Z', valid_to: '2030-01-01T00:00:00Z' });
    const cases: Array<[string, Record<string, unknown>, Array<[string, string]>]> = [
      ['name null', { name: null }, [['name', 'invalid_value']]],
      ['is_active null', { is_active: null }, [['is_active', 'invalid_value']]],
      ['valid_from null', { valid_from: null }, [['valid_from', 'invalid_value']]],
      ['description empty', { description: '' }, [['description', 'too_short']]],
      ['metadata', { metadata: {} }, [['metadata', 'unknown_field']]],
      ['valid_to before the current valid_from', { valid_to: '2019-01-01T00:00:00Z' }, [['valid_to', 'invalid_value']]],
      ['valid_from after the current valid_to', { valid_from: '2031-01-01T00:00:00Z' }, [['valid_to', 'invalid_value']]],
      ['valid_from sentinel', { valid_from: '0001-01-01T00:00:00Z' }, [['valid_from', 'invalid_value']]],
      ['id differs', { id: v.id + 1 }, [['id', 'read_only']]],
      ['created_at differs', { created_at: '2001-01-01T00:00:00Z' }, [['created_at', 'read_only']]],
      ['updated_at stale', { updated_at: '2001-01-01T00:00:00Z' }, [['updated_at', 'read_only']]],
      ['deleted_at set', { deleted_at: '2001-01-01T00:00:00Z' }, [['deleted_at', 'read_only']]],
      ['external_key differs', { external_key: 'SOMETHING-ELSE' }, [['external_key', 'invalid_context']]],
      ['tags differ', { tags: [{ id: 1, tag_type: 'rfid', value: 'x' }] }, [['tags', 'invalid_context']]],
      ['tags not an array', { tags: 'x' }, [['tags', 'invalid_value']]],
    ];
    for (const [name, body, expected] of cases) {
      const res = await api.req('PATCH', `/api/v1/locations/${v.id}`, body);
      t.equal(res.status, 400, name);
      t.equal(res.json.error.type, 'validation_error', name);
      t.same(fieldCodes(res), expected, name);
    }
    const after = await api.req('GET', `/api/v1/locations/${v.id}`);
    t.same(after.json.data, v, 'no rejected PATCH changed the row');
    const stale = await api.req('PATCH', `/api/v1/locations/${v.id}`, { updated_at: '2001-01-01T00:00:00Z' });
    t.match(stale.json.error.fields[0].message, /updated_at/);
  });

  t.test('PATCH: read-only echoes that match are dropped', async (t) => {
    const parent = await api.create({ name: 'Echo parent' });
    const v = await api.create({ name: 'Echo', parent_id: parent.id, valid_to: '2999-01-01T00:00:00Z' });
    const verbatim = await api.req('PATCH', `/api/v1/locations/${v.id}`, v);
    t.equal(verbatim.status, 200, 'a verbatim GET-to-PATCH echo succeeds');
    t.equal(verbatim.json.data.parent_id, parent.id);
    // The same instant written with a +01:00 offset and extra sub-millisecond digits.
    const created = Date.parse(verbatim.json.data.created_at);
    const sameInstant = new Date(created + 3_600_000).toISOString().replace('Z', '999+01:00');
    const byInstant = await api.req('PATCH', `/api/v1/locations/${v.id}`, {
      created_at: sameInstant,
      updated_at: verbatim.json.data.updated_at,
      name: 'Echo renamed',
    });
    t.equal(byInstant.status, 200, 'echoed timestamps match by instant, not by text');
    t.equal(byInstant.json.data.name, 'Echo renamed');
  });

  t.test('rename', async (t) => {
    const root = await api.create({ external_key: key('RROOT'), name: 'Rename root' });
    const child = await api.create({ name: 'c1', parent_id: root.id });
    const grandchild = await api.create({ name: 'g1', parent_id: child.id });
    const deadLeaf = await api.create({ name: 'dead', parent_id: child.id });
    await api.create({ name: 'c2', parent_id: root.id });
    t.equal((await api.req('DELETE', `/api/v1/locations/${deadLeaf.id}`)).status, 204);

    const newKey = key('RENAMED');
    const res = await api.req('POST', `/api/v1/locations/${root.id}/rename`, { external_key: newKey });
    t.equal(res.status, 200);
    t.same(Object.keys(res.json).sort(), ['data', 'descendant_count_affected']);
    t.equal(res.json.descendant_count_affected, 3, 'live descendants only, itself excluded');
    t.equal(res.json.data.external_key, newKey);
    t.equal(res.json.data.id, root.id);
    t.ok(res.json.data.updated_at > root.updated_at, 'updated_at advances');
    const kid = await api.req('GET', `/api/v1/locations/${child.id}`);
    t.equal(kid.json.data.parent_id, root.id, 'descendants stay attached by id');
    t.equal(kid.json.data.parent_external_key, newKey, 'and show the new parent key');

    const same = await api.req('POST', `/api/v1/locations/${root.id}/rename`, { external_key: newKey });
    t.equal(same.status, 200);
    t.equal(same.json.descendant_count_affected, 0);
    t.equal(same.json.data.updated_at, res.json.data.updated_at, 'same-value rename does not advance updated_at');

    const leaf = await api.req('POST', `/api/v1/locations/${grandchild.id}/rename`, { external_key: key('LEAF') });
    t.equal(leaf.json.descendant_count_affected, 0, 'a leaf affects nothing');

    const taken = await api.req('POST', `/api/v1/locations/${child.id}/rename`, { external_key: newKey });
    t.equal(taken.status, 409);
    t.equal(taken.json.error.type, 'conflict');

    const oldKeyFree = await api.req('POST', '/api/v1/locations', { external_key: root.external_key, name: 'takes the old key' });
    t.equal(oldKeyFree.status, 201, 'the old key is free after a rename');

    const cases: Array<[string, unknown, Array<[string, string]>]> = [
      ['missing key', {}, [['external_key', 'required']]],
      ['bad pattern', { external_key: 'a b' }, [['external_key', 'invalid_value']]],
      ['null', { external_key: null }, [['external_key', 'invalid_value']]],
      ['extra field', { external_key: 'OK', name: 'x' }, [['name', 'unknown_field']]],
    ];
    for (const [name, body, expected] of cases) {
      const r = await api.req('POST', `/api/v1/locations/${child.id}/rename`, body);
      t.equal(r.status, 400, name);
      t.same(fieldCodes(r), expected, name);
    }
    t.equal((await api.req('POST', `/api/v1/locations/${deadLeaf.id}/rename`, { external_key: key('X') })).status, 404, 'soft-deleted');
  });

  t.test('delete rules', async (t) => {
    const top = await api.create({ name: 'Delete top' });
    const mid = await api.create({ name: 'Delete mid', parent_id: top.id });
    const leaf = await api.create({ name: 'Delete leaf', parent_id: mid.id });

    const blocked = await api.req('DELETE', `/api/v1/locations/${top.id}`);
    t.equal(blocked.status, 409);
    t.equal(blocked.json.error.type, 'conflict');
    t.match(blocked.json.error.detail, /^location has descendant locations/);
    t.match(blocked.json.error.detail, /cascade is not supported$/);
    t.equal((await api.req('DELETE', `/api/v1/locations/${mid.id}`)).status, 409, 'a non-leaf in the middle too');
    t.equal((await api.req('DELETE', `/api/v1/locations/${top.id}?cascade=true`)).status, 400, 'no cascade parameter exists');

    t.equal((await api.req('DELETE', `/api/v1/locations/${leaf.id}`)).status, 204);
    const again = await api.req('DELETE', `/api/v1/locations/${leaf.id}`);
    t.equal(again.status, 404, 'a repeat delete is 404');
    t.equal(again.json.error.type, 'not_found');
    t.equal((await api.req('DELETE', `/api/v1/locations/${mid.id}`)).status, 204, 'soft-deleted descendants do not block');
    const del = await api.req('DELETE', `/api/v1/locations/${top.id}`, undefined, { headers: { 'content-type': 'text/plain' } });
    t.equal(del.status, 204, 'content type not enforced on DELETE');
    t.equal(del.text, '');
    t.equal((await api.req('GET', `/api/v1/locations/${top.id}`)).status, 404);
    t.equal((await api.req('DELETE', '/api/v1/locations/2147483647')).status, 404);
  });

  t.test('scopes', async (t) => {
    const v = await api.create({ name: 'Scoped' });
    const writes: Array<[string, string, unknown]> = [
      ['POST', '/api/v1/locations', { name: 'x' }],
      ['PATCH', `/api/v1/locations/${v.id}`, {}],
      ['DELETE', `/api/v1/locations/${v.id}`, undefined],
      ['POST', `/api/v1/locations/${v.id}/rename`, { external_key: 'X' }],
    ];
    const reads = ['', `/${v.id}`, `/${v.id}/ancestors`, `/${v.id}/children`, `/${v.id}/descendants`].map((p) => `/api/v1/locations${p}`);
    for (const [method, path, body] of writes) {
      for (const token of [readOnly, assetsOnly]) {
        const res = await api.trackd.request(method, path, { token, body });
        t.equal(res.status, 403, `${method} ${path}`);
        t.equal(res.json.error.type, 'forbidden');
      }
    }
    for (const path of reads) {
      t.equal((await api.trackd.request('GET', path, { token: writeOnly })).status, 403, path);
      t.equal((await api.trackd.request('GET', path, { token: readOnly })).status, 200, path);
      t.equal((await api.trackd.request('GET', path)).status, 401, `${path} without a key`);
    }
    t.equal((await api.req('GET', `/api/v1/locations/${v.id}`)).json.data.name, 'Scoped', 'forbidden writes changed nothing');
  });
});
