import t from 'tap';
import { assetsClient } from './helpers/assets.js';
import { key } from './helpers/locations.js';
import { startTrackd } from './helpers/trackd.js';

/**
 * Reads by id may be answered from the shard's response cache. After every kind of master-data
 * write, a read that was cached before the write must show the write: the oracle is the list
 * endpoint (never cached) filtered to the same row. SHARDS=1 puts both organizations on one shard.
 */
for (const cacheMb of ['64', '1']) {
  t.test(`reads by id stay current after every write (RESPONSE_CACHE_MB=${cacheMb})`, async (t) => {
    const trackd = await startTrackd(t, { env: { SHARDS: '1', RESPONSE_CACHE_MB: cacheMb } });
    const api = assetsClient(trackd, 'Cache Org');
    const other = assetsClient(trackd, 'Other Cache Org');

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

    const patched = await api.req('PATCH', `/api/v1/assets/${a.id}`, { name: 'After', metadata: { small: true } }, { contentType: 'application/merge-patch+json' });
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
    t.equal(foreign.status, 404, "another organization on the same shard never sees the cached body");
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
    const patchedLocation = await api.req('PATCH', `/api/v1/locations/${child.id}`, { name: 'Dock 2', parent_id: null }, { contentType: 'application/merge-patch+json' });
    t.equal(patchedLocation.status, 200);
    t.same(await check('locations', child.id, 'location patched'), patchedLocation.json.data, 'the read shows the patch');
    const locationTag = (await api.req('POST', `/api/v1/locations/${child.id}/tags`, { tag_type: 'barcode', value: key('BC') })).json.data;
    t.same((await check('locations', child.id, 'location tag attached')).tags, [locationTag]);
    t.equal((await api.req('DELETE', `/api/v1/locations/${child.id}`)).status, 204);
    t.equal((await api.req('GET', `/api/v1/locations/${child.id}`)).status, 404, 'a deleted location is 404 at once');
  });
}
