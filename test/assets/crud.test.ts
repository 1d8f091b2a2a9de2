import t from 'tap';
import { key, startAssets } from '../helpers/assets.js';
import { inlineRefs } from '../helpers/openapi.js';

const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

t.test('asset lifecycle', async (t) => {
  const api = await startAssets(t);

  t.test('create: 201, Location, every field present with defaults', async (t) => {
    const externalKey = key('FORK');
    const res = await api.req('POST', '/api/v1/assets', { name: 'Forklift', external_key: externalKey });
    t.equal(res.status, 201);
    const asset = res.json.data;
    t.equal(res.headers.get('location'), `/api/v1/assets/${asset.id}`);
    t.same(Object.keys(asset).sort(), [
      'created_at',
      'deleted_at',
      'description',
      'external_key',
      'id',
      'is_active',
      'metadata',
      'name',
      'tags',
      'updated_at',
      'valid_from',
      'valid_to',
    ]);
    t.match(asset, {
      external_key: externalKey,
      name: 'Forklift',
      description: null,
      is_active: true,
      metadata: {},
      valid_to: null,
      deleted_at: null,
      tags: [],
    });
    for (const field of ['valid_from', 'created_at', 'updated_at']) t.match(asset[field], ISO_MS, `${field} is .NNNZ`);
    t.equal(asset.valid_from, asset.created_at, 'valid_from defaults to the creation time');
    const got = await api.req('GET', `/api/v1/assets/${asset.id}`);
    t.same([got.status, got.json], [200, { data: asset }]);
  });

  t.test('create with every writable field and tags', async (t) => {
    const asset = await api.create({
      name: 'Pallet jack',
      external_key: key('PJ'),
      description: 'Blue',
      is_active: false,
      metadata: { colour: 'blue', dims: { w: 1, h: [1, 2] } },
      valid_from: '2026-01-01T00:00:00Z',
      valid_to: null,
      tags: [
        { tag_type: 'rfid', value: key('E2') },
        { tag_type: 'ble', value: key('BLE') },
      ],
    });
    t.match(asset, {
      description: 'Blue',
      is_active: false,
      metadata: { colour: 'blue', dims: { w: 1, h: [1, 2] } },
      valid_from: '2026-01-01T00:00:00.000Z',
    });
    t.same(
      asset.tags.map((tag: any) => tag.tag_type),
      ['rfid', 'ble'],
    );
    t.same(Object.keys(asset.tags[0]).sort(), ['id', 'tag_type', 'value'], 'tag read fields: id, tag_type, value');
  });

  t.test('duplicate external_key: 409 while live, case-sensitive, free again after delete', async (t) => {
    const k = key('DUP');
    const first = await api.create({ name: 'A', external_key: k });
    const retry = await api.req('POST', '/api/v1/assets', { name: 'A again', external_key: k });
    t.same([retry.status, retry.json.error.type], [409, 'conflict']);
    const lower = await api.req('POST', '/api/v1/assets', { name: 'lower', external_key: k.toLowerCase() });
    t.equal(lower.status, 201, 'keys are case-sensitive');
    const del = await api.req('DELETE', `/api/v1/assets/${first.id}`);
    t.same([del.status, del.text], [204, '']);
    const again = await api.req('DELETE', `/api/v1/assets/${first.id}`);
    t.same([again.status, again.json.error.type], [404, 'not_found'], 'second delete is 404');
    const byId = await api.req('GET', `/api/v1/assets/${first.id}`);
    t.equal(byId.status, 404, 'by-id GET of a soft-deleted asset is 404');
    const reuse = await api.req('POST', '/api/v1/assets', { name: 'A reborn', external_key: k });
    t.equal(reuse.status, 201, 'soft delete frees the key');
    const withDeleted = await api.req('GET', `/api/v1/assets?external_key=${k}&include_deleted=true`);
    t.same(
      withDeleted.json.data.map((a: any) => [a.id, a.deleted_at === null]),
      [
        [first.id, false],
        [reuse.json.data.id, true],
      ].sort((a, b) => (a[0] as number) - (b[0] as number)),
    );
  });

  t.test('rename', async (t) => {
    const asset = await api.create({ name: 'Rename me', external_key: key('R') });
    const same = await api.req('POST', `/api/v1/assets/${asset.id}/rename`, { external_key: asset.external_key });
    t.equal(same.status, 200);
    t.same(same.json, { data: asset, descendant_count_affected: 0 }, 'same key: nothing changes, updated_at included');
    const newKey = key('R2');
    const renamed = await api.req('POST', `/api/v1/assets/${asset.id}/rename`, { external_key: newKey });
    t.equal(renamed.status, 200);
    t.equal(renamed.json.descendant_count_affected, 0);
    t.equal(renamed.json.data.external_key, newKey);
    t.ok(renamed.json.data.updated_at > asset.updated_at, 'a different key advances updated_at');
    const other = await api.create({ name: 'Other', external_key: key('R3') });
    const clash = await api.req('POST', `/api/v1/assets/${other.id}/rename`, { external_key: newKey });
    t.same([clash.status, clash.json.error.type], [409, 'conflict']);
    const oldFree = await api.req('POST', `/api/v1/assets/${other.id}/rename`, { external_key: asset.external_key });
    t.equal(oldFree.status, 200, 'the old key is free after a rename');
    const bad = await api.req('POST', `/api/v1/assets/${asset.id}/rename`, { external_key: 'a b' });
    t.same([bad.status, bad.json.error.fields[0].field, bad.json.error.fields[0].code], [400, 'external_key', 'invalid_value']);
    const missingKey = await api.req('POST', `/api/v1/assets/${asset.id}/rename`, {});
    t.same([missingKey.status, missingKey.json.error.fields[0].code], [400, 'required']);
    const unknown = await api.req('POST', '/api/v1/assets/2147483647/rename', { external_key: 'X' });
    t.equal(unknown.status, 404);
  });

  t.test('missing ids are 404 on every item endpoint', async (t) => {
    const id = 2147483000;
    for (const [method, path, body] of [
      ['GET', `/api/v1/assets/${id}`],
      ['PATCH', `/api/v1/assets/${id}`, {}],
      ['DELETE', `/api/v1/assets/${id}`],
      ['POST', `/api/v1/assets/${id}/rename`, { external_key: 'X' }],
      ['POST', `/api/v1/assets/${id}/tags`, { tag_type: 'rfid', value: 'V' }],
      ['DELETE', `/api/v1/assets/${id}/tags/1`],
    ] as Array<[string, string, unknown?]>) {
      const res = await api.req(method, path, body);
      t.same([res.status, res.json?.error?.type], [404, 'not_found'], `${method} ${path}`);
    }
  });

  t.test('other methods: 405 with Allow', async (t) => {
    for (const [method, path, allow] of [
      ['PUT', '/api/v1/assets/1', 'GET, HEAD, PATCH, DELETE'],
      ['OPTIONS', '/api/v1/assets', 'GET, HEAD, POST'],
      ['GET', '/api/v1/assets/1/tags', 'POST'],
      ['PATCH', '/api/v1/assets/1/tags/1', 'DELETE'],
    ] as const) {
      const res = await api.req(method, path);
      t.same([res.status, res.json.error.type, res.headers.get('allow')], [405, 'method_not_allowed', allow], `${method} ${path}`);
    }
  });

  t.test('scopes: assets:read reads, assets:write writes (tags sub-resource included)', async (t) => {
    const asset = await api.create({ name: 'Scoped' });
    const readOnly = await api.key(['assets:read']);
    const writeOnly = await api.key(['assets:write']);
    const locationsOnly = await api.key(['locations:read', 'locations:write']);
    const cases: Array<[string, string, unknown, string, number]> = [
      ['GET', '/api/v1/assets', undefined, readOnly, 200],
      ['GET', `/api/v1/assets/${asset.id}`, undefined, readOnly, 200],
      ['GET', '/api/v1/assets', undefined, writeOnly, 403],
      ['POST', '/api/v1/assets', { name: 'x' }, readOnly, 403],
      ['PATCH', `/api/v1/assets/${asset.id}`, {}, readOnly, 403],
      ['DELETE', `/api/v1/assets/${asset.id}`, undefined, readOnly, 403],
      ['POST', `/api/v1/assets/${asset.id}/rename`, { external_key: 'X' }, readOnly, 403],
      ['POST', `/api/v1/assets/${asset.id}/tags`, { tag_type: 'rfid', value: 'x' }, readOnly, 403],
      ['DELETE', `/api/v1/assets/${asset.id}/tags/1`, undefined, locationsOnly, 403],
      ['POST', `/api/v1/assets/${asset.id}/tags`, { tag_type: 'rfid', value: key('SCOPE') }, writeOnly, 201],
      ['GET', `/api/v1/assets/${asset.id}`, undefined, locationsOnly, 403],
    ];
    for (const [method, path, body, token, status] of cases) {
      const res = await api.trackd.request(method, path, { token, body });
      t.equal(res.status, status, `${method} ${path}`);
      if (status === 403) t.equal(res.json.error.type, 'forbidden');
    }
    const anonymous = await api.trackd.request('GET', '/api/v1/assets');
    t.equal(anonymous.status, 401);
  });

  t.test('two organizations share no data', async (t) => {
    const other = await api.otherOrg('Other Co');
    const mine = await api.create({ name: 'Mine', external_key: key('ISO'), tags: [{ tag_type: 'rfid', value: key('ISO-TAG') }] });
    const theirs = await other.create({
      name: 'Theirs',
      external_key: mine.external_key,
      tags: [{ tag_type: 'rfid', value: mine.tags[0].value }],
    });
    t.equal(theirs.external_key, mine.external_key, 'the same external_key and tag natural key live in both orgs');
    for (const [method, path, body] of [
      ['GET', `/api/v1/assets/${mine.id}`],
      ['PATCH', `/api/v1/assets/${mine.id}`, { name: 'hijack' }],
      ['POST', `/api/v1/assets/${mine.id}/rename`, { external_key: key('HIJACK') }],
      ['POST', `/api/v1/assets/${mine.id}/tags`, { tag_type: 'ble', value: key('HIJACK') }],
      ['DELETE', `/api/v1/assets/${mine.id}/tags/${mine.tags[0].id}`],
      ['DELETE', `/api/v1/assets/${mine.id}`],
    ] as Array<[string, string, unknown?]>) {
      const res = await other.req(method, path, body);
      t.same([res.status, res.json?.error?.type], [404, 'not_found'], `other org: ${method} ${path}`);
    }
    const detachMineViaTheirs = await other.req('DELETE', `/api/v1/assets/${theirs.id}/tags/${mine.tags[0].id}`);
    t.equal(detachMineViaTheirs.status, 404, "another org's tag id is 404 even on an own asset");
    const list = await other.req('GET', `/api/v1/assets?include_deleted=true&q=${encodeURIComponent('Mine')}`);
    t.same(list.json.data, []);
    const all = await other.req('GET', '/api/v1/assets?include_deleted=true&limit=200');
    t.same(
      all.json.data.map((a: any) => a.id),
      [theirs.id],
      'the other org lists only its own asset',
    );
    const still = await api.req('GET', `/api/v1/assets/${mine.id}`);
    t.same(still.json.data, mine, 'nothing the other org tried changed my asset');
  });

  t.test('described in the OpenAPI document', async (t) => {
    const doc = inlineRefs((await api.trackd.request('GET', '/api/openapi.json')).json);
    const ops = [
      ['/api/v1/assets', 'get', 'listAssets', ['assets:read']],
      ['/api/v1/assets', 'post', 'createAsset', ['assets:write']],
      ['/api/v1/assets/{asset_id}', 'get', 'getAsset', ['assets:read']],
      ['/api/v1/assets/{asset_id}', 'patch', 'updateAsset', ['assets:write']],
      ['/api/v1/assets/{asset_id}', 'delete', 'deleteAsset', ['assets:write']],
      ['/api/v1/assets/{asset_id}/rename', 'post', 'renameAsset', ['assets:write']],
      ['/api/v1/assets/{asset_id}/tags', 'post', 'attachAssetTag', ['assets:write']],
      ['/api/v1/assets/{asset_id}/tags/{tag_id}', 'delete', 'detachAssetTag', ['assets:write']],
    ] as const;
    for (const [path, method, operationId, scopes] of ops) {
      const op = doc.paths[path]?.[method];
      t.equal(op?.operationId, operationId, `${method} ${path}`);
      t.same(op?.['x-required-scopes'], scopes);
    }
    t.ok(doc.paths['/api/v1/assets'].post.responses['201'], 'create documents 201');
    t.ok(doc.paths['/api/v1/assets/{asset_id}'].patch.requestBody.content['application/merge-patch+json']);
    const tagBody = doc.paths['/api/v1/assets/{asset_id}/tags'].post.requestBody.content['application/json'].schema;
    t.same(tagBody.discriminator, { propertyName: 'tag_type' });
    t.same(
      tagBody.oneOf.map((v: any) => v.properties.tag_type.enum[0]),
      ['rfid', 'ble', 'barcode'],
    );
  });
});
