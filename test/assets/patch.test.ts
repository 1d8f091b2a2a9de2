import t from 'tap';
import { fieldCodes, key, startAssets } from '../helpers/assets.js';

t.test('asset PATCH semantics', async (t) => {
  const api = await startAssets(t);
  const patch = (id: number, body: unknown) => api.req('PATCH', `/api/v1/assets/${id}`, body);
  const fresh = () =>
    api.create({
      name: 'Patchable',
      external_key: key('P'),
      description: 'desc',
      metadata: { a: 1, nested: { b: 2 } },
      valid_from: '2026-01-01T00:00:00Z',
      tags: [
        { tag_type: 'rfid', value: key('T1') },
        { tag_type: 'barcode', value: key('T2') },
      ],
    });

  t.test('set, clear, omit; metadata replaced whole', async (t) => {
    const asset = await fresh();
    const res = await patch(asset.id, {
      name: 'Renamed',
      description: null,
      is_active: false,
      metadata: { c: 3 },
      valid_to: '2099-01-01T00:00:00+01:00',
    });
    t.equal(res.status, 200);
    t.match(res.json.data, {
      name: 'Renamed',
      description: null,
      is_active: false,
      metadata: { c: 3 },
      valid_to: '2098-12-31T23:00:00.000Z',
      valid_from: asset.valid_from,
    });
    t.same(res.json.data.metadata, { c: 3 }, 'no deep merge');
    t.same(res.json.data.tags, asset.tags);
    const cleared = await patch(asset.id, { metadata: {}, valid_to: null });
    t.same([cleared.json.data.metadata, cleared.json.data.valid_to], [{}, null]);
    const got = await api.req('GET', `/api/v1/assets/${asset.id}`);
    t.same(got.json.data, cleared.json.data, 'the GET shows what the PATCH returned');
  });

  t.test('{} is a no-op that advances updated_at', async (t) => {
    const asset = await fresh();
    const res = await patch(asset.id, {});
    t.equal(res.status, 200);
    t.ok(res.json.data.updated_at > asset.updated_at, 'updated_at advanced');
    t.same({ ...res.json.data, updated_at: asset.updated_at }, asset, 'nothing else changed');
  });

  t.test('a verbatim GET-to-PATCH echo succeeds', async (t) => {
    const asset = await fresh();
    const got = (await api.req('GET', `/api/v1/assets/${asset.id}`)).json.data;
    const res = await patch(asset.id, { ...got, name: 'Echoed', tags: [...got.tags].reverse() });
    t.equal(res.status, 200, res.text);
    t.equal(res.json.data.name, 'Echoed');
    t.ok(res.json.data.updated_at > got.updated_at);
  });

  t.test('echoed timestamps match by instant, not by text', async (t) => {
    const asset = await fresh();
    const shifted = (iso: string) => new Date(Date.parse(iso)).toISOString().replace('Z', '000+00:00');
    const plusTwo = (iso: string) => {
      const d = new Date(Date.parse(iso) + 2 * 3600_000).toISOString();
      return `${d.slice(0, 23)}999+02:00`;
    };
    const res = await patch(asset.id, {
      created_at: plusTwo(asset.created_at),
      updated_at: shifted(asset.updated_at),
      deleted_at: null,
      is_active: false,
    });
    t.equal(res.status, 200, res.text);
    t.equal(res.json.data.is_active, false);
  });

  t.test('differing read-only echoes are rejected with their codes, together', async (t) => {
    const asset = await fresh();
    const cases: Array<[string, Record<string, unknown>, Array<[string, string]>]> = [
      ['id', { id: asset.id + 1 }, [['id', 'read_only']]],
      ['created_at', { created_at: '2020-01-01T00:00:00Z' }, [['created_at', 'read_only']]],
      ['deleted_at', { deleted_at: '2020-01-01T00:00:00Z' }, [['deleted_at', 'read_only']]],
      ['stale updated_at', { updated_at: '2020-01-01T00:00:00.000Z', name: 'x' }, [['updated_at', 'read_only']]],
      ['external_key', { external_key: key('OTHER') }, [['external_key', 'invalid_context']]],
      ['tags: one missing', { tags: [asset.tags[0]] }, [['tags', 'invalid_context']]],
      ['tags: extra element', { tags: [...asset.tags, { id: 999999, tag_type: 'rfid', value: 'x' }] }, [['tags', 'invalid_context']]],
      ['tags: same ids, other content', { tags: [asset.tags[0], { ...asset.tags[1], value: 'changed' }] }, [['tags', 'invalid_context']]],
      ['tags: duplicated element', { tags: [asset.tags[0], asset.tags[0]] }, [['tags', 'invalid_context']]],
      ['tags: empty', { tags: [] }, [['tags', 'invalid_context']]],
      [
        'several at once',
        { id: 1, external_key: key('X'), tags: [], updated_at: '2020-01-01T00:00:00Z' },
        [
          ['id', 'read_only'],
          ['external_key', 'invalid_context'],
          ['updated_at', 'read_only'],
          ['tags', 'invalid_context'],
        ],
      ],
    ];
    for (const [name, body, fields] of cases) {
      const res = await patch(asset.id, body);
      t.same([res.status, res.json?.error?.type, fieldCodes(res)], [400, 'validation_error', fields], name);
    }
    const stale = await patch(asset.id, { updated_at: '2020-01-01T00:00:00Z' });
    t.match(stale.json.error.fields[0].message, /does not match the current value/);
    const after = await api.req('GET', `/api/v1/assets/${asset.id}`);
    t.same(after.json.data, asset, 'rejected PATCHes changed nothing');
  });

  t.test('updated_at is an optimistic-concurrency token', async (t) => {
    const asset = await fresh();
    const first = await patch(asset.id, { updated_at: asset.updated_at, name: 'Writer one' });
    t.equal(first.status, 200);
    const second = await patch(asset.id, { updated_at: asset.updated_at, name: 'Writer two' });
    t.same([second.status, fieldCodes(second)], [400, [['updated_at', 'read_only']]], 'the second writer holds a stale token');
    const current = await patch(asset.id, { updated_at: first.json.data.updated_at, name: 'Writer two' });
    t.equal(current.status, 200);
    t.equal(current.json.data.name, 'Writer two');
  });

  t.test('a soft-deleted asset cannot be patched', async (t) => {
    const asset = await fresh();
    await api.req('DELETE', `/api/v1/assets/${asset.id}`);
    const res = await patch(asset.id, { name: 'ghost' });
    t.same([res.status, res.json.error.type], [404, 'not_found']);
  });

  t.test('the by-id GET skips the temporal rule; PATCH can move the window', async (t) => {
    const future = await api.create({ name: 'Future', external_key: key('FUT'), valid_from: '2099-01-01T00:00:00Z' });
    const got = await api.req('GET', `/api/v1/assets/${future.id}`);
    t.equal(got.status, 200, 'a not-yet-effective asset is readable by id');
    const listed = await api.req('GET', `/api/v1/assets?external_key=${future.external_key}`);
    t.same(listed.json.data, [], 'but invisible to the natural-key lookup');
    const now = await patch(future.id, { valid_from: '2026-01-01T00:00:00Z' });
    t.equal(now.status, 200);
    const listedNow = await api.req('GET', `/api/v1/assets?external_key=${future.external_key}`);
    t.same(
      listedNow.json.data.map((a: any) => a.id),
      [future.id],
      'effective after the PATCH',
    );
  });
});
