import t from 'tap';
import { key, startAssets } from '../helpers/assets.js';

const slot = (n: number) => `ASSET-${String(n).padStart(4, '0')}`;
const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => slot(from + i));

t.test('asset keys under concurrency', async (t) => {
  const server = await startAssets(t);

  t.test('parallel creates without keys mint distinct lowest slots; freed slots are reused first', async (t) => {
    const api = await server.otherOrg('Minting Org');
    const created = await Promise.all(Array.from({ length: 25 }, (_, i) => api.create({ name: `Bulk ${i}` })));
    t.same(created.map((a) => a.external_key).sort(), range(1, 25), 'ASSET-0001..ASSET-0025, no gaps, no repeats');
    const byKey = new Map(created.map((a) => [a.external_key, a]));
    for (const k of [slot(3), slot(7), slot(20)]) t.equal((await api.req('DELETE', `/api/v1/assets/${byKey.get(k).id}`)).status, 204);
    const again = await Promise.all(Array.from({ length: 4 }, (_, i) => api.create({ name: `Again ${i}` })));
    t.same(again.map((a) => a.external_key).sort(), [slot(3), slot(7), slot(20), slot(26)], 'the freed slots, then the next one');
  });

  t.test('caller keys and renames interact with the slots', async (t) => {
    const api = await server.otherOrg('Slots Org');
    const first = await api.create({ name: 'one' });
    t.equal(first.external_key, slot(1));
    await api.create({ name: 'caller two', external_key: slot(2) });
    await api.create({ name: 'not a slot form', external_key: 'ASSET-3' });
    t.equal((await api.create({ name: 'three' })).external_key, slot(3), 'ASSET-0002 is taken by a caller key; ASSET-3 is not slot 3');
    const renamed = await api.req('POST', `/api/v1/assets/${first.id}/rename`, { external_key: key('AWAY') });
    t.equal(renamed.status, 200);
    t.equal((await api.create({ name: 'one again' })).external_key, slot(1), 'renaming away frees the slot');
    const taken = await api.req('POST', '/api/v1/assets', { name: 'clash', external_key: slot(1) });
    t.equal(taken.status, 409, 'a minted key is an ordinary key afterwards');
    const rejected = await api.req('POST', '/api/v1/assets', {
      name: 'bad tag',
      tags: [
        { tag_type: 'rfid', value: 'dup' },
        { tag_type: 'rfid', value: 'dup' },
      ],
    });
    t.equal(rejected.status, 409);
    t.equal((await api.create({ name: 'four' })).external_key, slot(4), 'a rolled-back create did not use up a slot');
  });

  t.test('parallel renames to one key: exactly one wins', async (t) => {
    const api = await server.otherOrg('Rename Race Org');
    const assets = await Promise.all(
      Array.from({ length: 12 }, (_, i) => api.create({ name: `Racer ${i}`, external_key: key(`RACE${i}`) })),
    );
    const target = key('PRIZE');
    const results = await Promise.all(assets.map((a) => api.req('POST', `/api/v1/assets/${a.id}/rename`, { external_key: target })));
    const statuses = results.map((r) => r.status).sort();
    t.same(statuses, [200, ...Array(11).fill(409)], 'one 200, eleven 409');
    const holders = await api.req('GET', `/api/v1/assets?external_key=${target}`);
    t.equal(holders.json.total_count, 1);
    t.equal(holders.json.data[0].id, results.find((r) => r.status === 200)!.json.data.id);
  });

  t.test('parallel creates with one caller key, and parallel attaches of one tag: exactly one wins', async (t) => {
    const api = await server.otherOrg('Create Race Org');
    const k = key('SAME');
    const creates = await Promise.all(
      Array.from({ length: 10 }, () => api.req('POST', '/api/v1/assets', { name: 'same key', external_key: k })),
    );
    t.same(creates.map((r) => r.status).sort(), [201, ...Array(9).fill(409)]);
    const owners = await Promise.all(Array.from({ length: 6 }, (_, i) => api.create({ name: `owner ${i}` })));
    const value = key('TAG');
    const attaches = await Promise.all(owners.map((o) => api.req('POST', `/api/v1/assets/${o.id}/tags`, { tag_type: 'barcode', value })));
    t.same(attaches.map((r) => r.status).sort(), [201, ...Array(5).fill(409)]);
    const found = await api.req('GET', `/api/v1/assets?q=${value}`);
    t.equal(found.json.total_count, 1, 'one asset carries the tag');
  });

  t.test('after a restart minting still finds the lowest free slot', async (t) => {
    const api = await server.otherOrg('Restart Org');
    const created = await Promise.all(Array.from({ length: 5 }, (_, i) => api.create({ name: `Before ${i}` })));
    const second = created.find((a) => a.external_key === slot(2));
    t.equal((await api.req('DELETE', `/api/v1/assets/${second.id}`)).status, 204);
    await server.trackd.restart();
    t.equal((await api.create({ name: 'after restart' })).external_key, slot(2), 'the freed slot');
    t.equal((await api.create({ name: 'after restart 2' })).external_key, slot(6), 'then the next unused one');
  });
});
