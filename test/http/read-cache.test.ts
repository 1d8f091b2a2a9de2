import t from 'tap';
import { assetsClient } from '../helpers/assets.js';
import { key } from '../helpers/locations.js';
import { startTrackd, testClock } from '../helpers/trackd.js';

/**
 * Reads by id may be answered from the shard's response cache. After every kind of master-data
 * write, a read that was cached before the write must show the write: the oracle is the list
 * endpoint (never cached) filtered to the same row. SHARDS=1 puts both organizations on one shard.
 */
for (const cacheMb of ['64', '1']) {
  t.test(`reads by id stay current after every write (RESPONSE_CACHE_MB=${cacheMb})`, async (t) => {
    const trackd = await startTrackd(t, { env: { SHARDS: '1', RESPONSE_CACHE_MB: cacheMb } });
    const api = await assetsClient(trackd, 'Cache Org');
    const other = await assetsClient(trackd, 'Other Cache Org');

    /** GET by id twice (the second may be a cache hit), and the same row through the list. */
    const check = async (collection: 'assets' | 'locations', id: number, label: string) => {
      const first = await api.req('GET', `/api/v1/${collection}/${id}`);
      const second = await api.req('GET', `/api/v1/${collection}/${id}`);
      t.equal(second.text, first.text, `${label}: a repeated read answers the same bytes`);
      t.equal(first.status, 200, `${label}: 200`);
      const listed = await api.req('GET', `/api/v1/${collection}?external_key=${encodeURIComponent(first.json.data.external_key)}`);
      t.same(first.json.data, listed.json.data[0], `${label}: the read by id equals the listed row`);
      return first.json.data;
    };

    const a = await api.create({ external_key: key('CACHE'), name: 'Before', metadata: { big: 'x'.repeat(200_000) } });
    t.same(await check('assets', a.id, 'created'), a, 'the read equals the create answer');

    const b = await api.create({ name: 'Second', metadata: { big: 'y'.repeat(200_000) } });
    await check('assets', b.id, 'a second large asset (may evict the first at 1 MiB)');
    await check('assets', a.id, 'the first again');

    const patched = await api.req(
      'PATCH',
      `/api/v1/assets/${a.id}`,
      { name: 'After', metadata: { small: true } },
      { contentType: 'application/merge-patch+json' },
    );
    t.equal(patched.status, 200);
    t.same(await check('assets', a.id, 'patched'), patched.json.data, 'the read shows the patch');

    const tag = await api.attach(a.id, { tag_type: 'rfid', value: key('EPC') });
    t.same((await check('assets', a.id, 'tag attached')).tags, [tag], 'the read shows the attached tag');
    const detached = await api.req('DELETE', `/api/v1/assets/${a.id}/tags/${tag.id}`);
    t.equal(detached.status, 204);
    t.same((await check('assets', a.id, 'tag detached')).tags, [], 'the read no longer shows the tag');

    const renamedKey = key('RENAMED');
    const renamed = await api.req('POST', `/api/v1/assets/${a.id}/rename`, { external_key: renamedKey });
    t.equal(renamed.status, 200);
    t.equal((await check('assets', a.id, 'renamed')).external_key, renamedKey, 'the read shows the new key');

    const foreign = await other.req('GET', `/api/v1/assets/${a.id}`);
    t.equal(foreign.status, 404, 'another organization on the same shard never sees the cached body');
    t.equal(foreign.json.error.type, 'not_found');

    const get = await api.req('GET', `/api/v1/assets/${a.id}`);
    const head = await api.req('HEAD', `/api/v1/assets/${a.id}`);
    t.equal(head.status, 200);
    t.equal(head.headers.get('content-length'), String(Buffer.byteLength(get.text)), 'HEAD announces the cached body length');
    t.equal(head.text, '', 'HEAD has no body');

    t.equal((await api.req('DELETE', `/api/v1/assets/${a.id}`)).status, 204);
    const gone = await api.req('GET', `/api/v1/assets/${a.id}`);
    t.equal(gone.status, 404, 'a deleted asset is 404 at once, though it was cached');

    const parent = (await api.req('POST', '/api/v1/locations', { external_key: key('SITE'), name: 'Site' })).json.data;
    const child = (await api.req('POST', '/api/v1/locations', { external_key: key('DOCK'), name: 'Dock', parent_id: parent.id })).json.data;
    await check('locations', child.id, 'location created');
    await check('locations', parent.id, 'parent created');
    const movedParent = await api.req('POST', `/api/v1/locations/${parent.id}/rename`, { external_key: key('SITE2') });
    t.equal(movedParent.status, 200);
    t.same(await check('locations', child.id, 'parent renamed'), (await api.req('GET', `/api/v1/locations/${child.id}`)).json.data);
    const patchedLocation = await api.req(
      'PATCH',
      `/api/v1/locations/${child.id}`,
      { name: 'Dock 2', parent_id: null },
      { contentType: 'application/merge-patch+json' },
    );
    t.equal(patchedLocation.status, 200);
    t.same(await check('locations', child.id, 'location patched'), patchedLocation.json.data, 'the read shows the patch');
    const locationTag = (await api.req('POST', `/api/v1/locations/${child.id}/tags`, { tag_type: 'barcode', value: key('BC') })).json.data;
    t.same((await check('locations', child.id, 'location tag attached')).tags, [locationTag]);
    t.equal((await api.req('DELETE', `/api/v1/locations/${child.id}`)).status, 204);
    t.equal((await api.req('GET', `/api/v1/locations/${child.id}`)).status, 404, 'a deleted location is 404 at once');
  });
}

t.test('list total_count stays exact across writes and validity boundaries', async (t) => {
  const clock = testClock();
  const trackd = await startTrackd(t, { env: { SHARDS: '1' }, clock });
  const api = await assetsClient(trackd, 'Count Org');
  const other = await assetsClient(trackd, 'Other Count Org');
  const word = key('needle').toLowerCase();
  const total = async (client: typeof api, query: string, collection = 'assets') => {
    const first = await client.req('GET', `/api/v1/${collection}?${query}&limit=1`);
    const again = await client.req('GET', `/api/v1/${collection}?${query}&limit=1&offset=1`);
    t.equal(again.json.total_count, first.json.total_count, `${query}: every page reports the same total`);
    return first.json.total_count as number;
  };

  t.equal(await total(api, 'is_active=true'), 0);
  const a = await api.create({ name: `first ${word}` });
  t.equal(await total(api, 'is_active=true'), 1, 'a create counts at once');
  t.equal(await total(api, `q=${word}`), 1);
  await other.create({ name: `other ${word}` });
  t.equal(await total(api, `q=${word}`), 1, "another organization's rows never count");
  t.equal(await total(other, `q=${word}`), 1);

  const b = await api.create({ name: 'second' });
  t.equal(await total(api, `q=${word}`), 1);
  await api.attach(b.id, { tag_type: 'rfid', value: `tag-${word}` });
  t.equal(await total(api, `q=${word}`), 2, 'a tag attach that makes q match counts at once');
  const patched = await api.req('PATCH', `/api/v1/assets/${a.id}`, { is_active: false }, { contentType: 'application/merge-patch+json' });
  t.equal(patched.status, 200);
  t.equal(await total(api, 'is_active=true'), 1, 'a patch of is_active counts at once');
  t.equal(await total(api, 'is_active=false'), 1);
  t.equal((await api.req('DELETE', `/api/v1/assets/${b.id}`)).status, 204);
  t.equal(await total(api, `q=${word}`), 1, 'a delete counts at once');
  t.equal(await total(api, `q=${word}&include_deleted=true`), 2);

  // Validity boundaries pass without any write: the counts must follow the clock.
  const soon = clock.now() + 2500;
  const startingWord = key('starting').toLowerCase();
  const endingWord = key('ending').toLowerCase();
  const starting = await api.create({ name: `starting ${startingWord}`, valid_from: new Date(soon).toISOString() });
  const ending = await api.create({ name: `ending ${endingWord}`, valid_to: new Date(soon).toISOString() });
  t.equal(await total(api, `q=${startingWord}`), 0, 'before its valid_from an asset does not count');
  t.equal(await total(api, `q=${endingWord}`), 1, 'before its valid_to an asset counts');
  t.equal(await total(api, 'is_active=true'), 1, 'before the boundary: the ending asset is the one active');
  clock.advance(soon - clock.now() + 1);
  t.equal(await total(api, `q=${startingWord}`), 1, 'after its valid_from it counts, with no write in between');
  t.equal(await total(api, `q=${endingWord}`), 0, 'after its valid_to it no longer counts');
  const active = await api.req('GET', '/api/v1/assets?is_active=true');
  t.same(
    [active.json.total_count, active.json.data.map((r: { id: number }) => r.id)],
    [1, [starting.id]],
    'after the boundary: the starting asset is the one active',
  );
  t.not(ending.id, starting.id);

  const site = (await api.req('POST', '/api/v1/locations', { external_key: key('SITE'), name: 'Site' })).json.data;
  t.equal(await total(api, `parent_id=${site.id}`, 'locations'), 0);
  await api.req('POST', '/api/v1/locations', { external_key: key('DOCK'), name: 'Dock', parent_id: site.id });
  t.equal(await total(api, `parent_id=${site.id}`, 'locations'), 1, 'a child location counts at once');
  t.equal(await total(api, `parent_external_key=${site.external_key}`, 'locations'), 1);
  const renamedSite = key('SITE2');
  t.equal((await api.req('POST', `/api/v1/locations/${site.id}/rename`, { external_key: renamedSite })).status, 200);
  t.equal(
    await total(api, `parent_external_key=${site.external_key}`, 'locations'),
    0,
    'the old parent key matches nothing after a rename',
  );
  t.equal(await total(api, `parent_external_key=${renamedSite}`, 'locations'), 1);
});

t.test('q pages agree whichever way tag matches are tested (short walk or full set)', async (t) => {
  const trackd = await startTrackd(t, { env: { SHARDS: '1' } });
  const api = await assetsClient(trackd, 'Walk Org');
  const word = key('walk').toLowerCase();
  const expected: number[] = [];
  for (let i = 0; i < 30; i++) {
    // A third match by name, a third only by a tag value, a third by nothing.
    const asset = await api.create({ external_key: `W-${String(i).padStart(3, '0')}`, name: i % 3 === 0 ? `Named ${word}` : `Plain ${i}` });
    if (i % 3 === 1) await api.attach(asset.id, { tag_type: 'barcode', value: `${word}-${i}` });
    if (i % 3 !== 2) expected.push(asset.id);
  }
  // limit=100 tests every row against the set of matching tags; limit=1 (20 matches > 8 x 1) looks tags up per walked row.
  const whole = await api.req('GET', `/api/v1/assets?q=${word}&limit=100`);
  t.same(
    whole.json.data.map((r: { id: number }) => r.id),
    expected,
    'the whole match, in external_key order',
  );
  const walked: number[] = [];
  for (let offset = 0; offset < 20; offset++) {
    const page = await api.req('GET', `/api/v1/assets?q=${word}&limit=1&offset=${offset}`);
    t.equal(page.json.total_count, 20);
    walked.push(...page.json.data.map((r: { id: number }) => r.id));
  }
  t.same(walked, expected, 'one-row pages list the same rows in the same order');
  const byName = await api.req('GET', `/api/v1/assets?q=${word}&limit=2&sort=-name`);
  t.same(
    byName.json.data.map((r: { name: string }) => r.name),
    [`Plain 7`, 'Plain 4'],
    'a short walk under another indexed sort',
  );
  const empty = await api.req('GET', `/api/v1/assets?q=${word}&limit=5&offset=20`);
  t.same([empty.json.total_count, empty.json.data], [20, []], 'an offset past the total answers an empty page');
});

t.test('descendants stay exact across location writes and validity boundaries', async (t) => {
  const clock = testClock();
  const trackd = await startTrackd(t, { env: { SHARDS: '1' }, clock });
  const api = await assetsClient(trackd, 'Tree Org');
  const create = async (body: Record<string, unknown>) => {
    const res = await api.req('POST', '/api/v1/locations', { external_key: key('LOC'), name: 'Loc', ...body });
    t.equal(res.status, 201);
    return res.json.data as { id: number; external_key: string };
  };
  const below = async (id: number) => {
    const res = await api.req('GET', `/api/v1/locations/${id}/descendants?limit=100`);
    t.equal(res.status, 200);
    const again = await api.req('GET', `/api/v1/locations/${id}/descendants?limit=1&offset=1`);
    t.equal(again.json.total_count, res.json.total_count, 'every page reports the same total');
    return res.json.data.map((l: { id: number }) => l.id) as number[];
  };
  const root = await create({});
  const a = await create({ parent_id: root.id });
  t.same(await below(root.id), [a.id]);
  const b = await create({ parent_id: a.id });
  t.same(await below(root.id), [a.id, b.id], 'a new grandchild shows at once');
  const other = await create({});
  const moved = await api.req(
    'PATCH',
    `/api/v1/locations/${b.id}`,
    { parent_id: other.id },
    { contentType: 'application/merge-patch+json' },
  );
  t.equal(moved.status, 200);
  t.same(await below(root.id), [a.id], 'a move out shows at once');
  t.same(await below(other.id), [b.id], 'and under its new parent');
  await api.create({ name: 'an asset write in between' });
  t.equal((await api.req('DELETE', `/api/v1/locations/${b.id}`)).status, 204);
  t.same(await below(other.id), [], 'a delete shows at once');

  const soon = clock.now() + 2500;
  const later = await create({ parent_id: root.id, valid_from: new Date(soon).toISOString() });
  const ending = await create({ parent_id: root.id, valid_to: new Date(soon).toISOString() });
  t.same(await below(root.id), [a.id, ending.id], 'before the boundary');
  clock.advance(soon - clock.now() + 1);
  t.same(await below(root.id), [a.id, later.id], 'after the boundary, with no write in between');
});
