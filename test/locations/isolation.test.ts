import t from 'tap';
import { fieldCodes, startLocations } from '../helpers/locations.js';

const keys = (res: { json: any }) => res.json.data.map((l: { external_key: string }) => l.external_key);

t.test('organizations share no location data; concurrent writes stay consistent', async (t) => {
  const a = await startLocations(t, 'Org A');
  const b = await a.otherOrg('Org B');
  const minting = await a.otherOrg('Org Mint');

  const aRoot = await a.create({ external_key: 'SITE', name: 'Site A' });
  const aChild = await a.create({
    external_key: 'HALL',
    name: 'Hall A',
    parent_id: aRoot.id,
    tags: [{ tag_type: 'rfid', value: 'SHARED-VALUE' }],
  });
  const aTag = aChild.tags[0];
  const bRoot = await b.create({ external_key: 'SITE', name: 'Site B' });

  t.test('every location endpoint answers 404 for another organization’s ids', async (t) => {
    const cases: Array<[string, string, unknown]> = [
      ['GET', `/api/v1/locations/${aRoot.id}`, undefined],
      ['PATCH', `/api/v1/locations/${aRoot.id}`, { name: 'stolen' }],
      ['DELETE', `/api/v1/locations/${aChild.id}`, undefined],
      ['POST', `/api/v1/locations/${aRoot.id}/rename`, { external_key: 'STOLEN' }],
      ['GET', `/api/v1/locations/${aChild.id}/ancestors`, undefined],
      ['GET', `/api/v1/locations/${aRoot.id}/children`, undefined],
      ['GET', `/api/v1/locations/${aRoot.id}/descendants`, undefined],
      ['POST', `/api/v1/locations/${aRoot.id}/tags`, { tag_type: 'ble', value: 'stolen' }],
      ['DELETE', `/api/v1/locations/${aChild.id}/tags/${aTag.id}`, undefined],
      ['DELETE', `/api/v1/locations/${bRoot.id}/tags/${aTag.id}`, undefined],
    ];
    for (const [method, path, body] of cases) {
      const res = await b.req(method, path, body);
      t.equal(res.status, 404, `${method} ${path}`);
      t.equal(res.json.error.type, 'not_found', `${method} ${path}`);
    }
    const after = await a.req('GET', `/api/v1/locations/${aChild.id}`);
    t.same(after.json.data, aChild, "org A's location is untouched, tag included");
  });

  t.test('lists and filters see only the caller’s rows', async (t) => {
    t.same(keys(await b.req('GET', '/api/v1/locations')), ['SITE']);
    t.equal((await b.req('GET', '/api/v1/locations')).json.data[0].id, bRoot.id);
    t.same(keys(await b.req('GET', '/api/v1/locations?external_key=HALL')), []);
    t.same(keys(await b.req('GET', `/api/v1/locations?parent_id=${aRoot.id}`)), []);
    t.same(keys(await b.req('GET', '/api/v1/locations?parent_external_key=SITE')), [], "B's SITE has no children; A's does");
    t.same(keys(await b.req('GET', '/api/v1/locations?q=hall')), []);
    t.same(keys(await b.req('GET', '/api/v1/locations?q=shared-value&include_deleted=true')), []);
    t.same(keys(await a.req('GET', '/api/v1/locations?parent_external_key=SITE')), ['HALL']);
  });

  t.test('parents, keys and tags resolve within the organization only', async (t) => {
    const byId = await b.req('POST', '/api/v1/locations', { name: 'x', parent_id: aRoot.id });
    t.same(fieldCodes(byId), [['parent_id', 'fk_not_found']]);
    const byKey = await b.req('POST', '/api/v1/locations', { name: 'x', parent_external_key: 'HALL' });
    t.same(fieldCodes(byKey), [['parent_external_key', 'fk_not_found']]);
    const reparent = await b.req('PATCH', `/api/v1/locations/${bRoot.id}`, { parent_id: aChild.id });
    t.same(fieldCodes(reparent), [['parent_id', 'fk_not_found']]);
    const sameKey = await b.req('POST', '/api/v1/locations', { external_key: 'HALL', name: 'Hall B', parent_external_key: 'SITE' });
    t.equal(sameKey.status, 201, 'external keys are unique per organization');
    t.equal(sameKey.json.data.parent_id, bRoot.id, "parent_external_key SITE is B's own SITE");
    const sameTag = await b.req('POST', `/api/v1/locations/${bRoot.id}/tags`, { tag_type: 'rfid', value: 'SHARED-VALUE' });
    t.equal(sameTag.status, 201, 'tag natural keys are unique per organization');
    t.same(keys(await b.req('GET', `/api/v1/locations/${bRoot.id}/descendants`)), ['HALL']);
    t.same(keys(await a.req('GET', `/api/v1/locations/${aRoot.id}/descendants`)), ['HALL']);
    t.equal((await a.req('GET', `/api/v1/locations/${aRoot.id}/descendants`)).json.data[0].id, aChild.id);
  });

  t.test('parallel creates without keys mint distinct lowest LOC- slots', async (t) => {
    const made = await Promise.all(Array.from({ length: 20 }, (_, i) => minting.create({ name: `Minted ${i}` })));
    const minted = made.map((v) => v.external_key).sort();
    t.same(
      minted,
      Array.from({ length: 20 }, (_, i) => `LOC-${String(i + 1).padStart(4, '0')}`),
    );
    const aFirst = await a.create({ name: 'First minted in A' });
    t.equal(aFirst.external_key, 'LOC-0001', 'each organization has its own namespace');

    const byKey = new Map(made.map((v) => [v.external_key, v]));
    for (const k of ['LOC-0003', 'LOC-0007']) t.equal((await minting.req('DELETE', `/api/v1/locations/${byKey.get(k).id}`)).status, 204);
    await minting.req('POST', `/api/v1/locations/${byKey.get('LOC-0011').id}/rename`, { external_key: 'NAMED' });
    const refill = await Promise.all(Array.from({ length: 4 }, (_, i) => minting.create({ name: `Refill ${i}` })));
    t.same(
      refill.map((v) => v.external_key).sort(),
      ['LOC-0003', 'LOC-0007', 'LOC-0011', 'LOC-0021'],
      'freed slots are minted again, lowest first',
    );
    const manual = await minting.req('POST', '/api/v1/locations', { external_key: 'LOC-0022', name: 'Caller took a slot-shaped key' });
    t.equal(manual.status, 201);
    t.equal((await minting.create({ name: 'after manual' })).external_key, 'LOC-0023', 'a live caller-chosen slot key is skipped');
  });

  t.test('parallel renames to one key: exactly one wins', async (t) => {
    const candidates = await Promise.all(
      Array.from({ length: 8 }, (_, i) => a.create({ external_key: `CAND-${i}`, name: `Candidate ${i}` })),
    );
    const results = await Promise.all(candidates.map((c) => a.req('POST', `/api/v1/locations/${c.id}/rename`, { external_key: 'WINNER' })));
    const statuses = results.map((r) => r.status).sort();
    t.same(statuses, [200, 409, 409, 409, 409, 409, 409, 409]);
    for (const r of results.filter((x) => x.status === 409)) t.equal(r.json.error.type, 'conflict');
    const winner = results.find((r) => r.status === 200)!.json.data;
    const holders = await a.req('GET', '/api/v1/locations?external_key=WINNER');
    t.same(
      holders.json.data.map((l: { id: number }) => l.id),
      [winner.id],
      'one live holder of the key',
    );
  });

  t.test('parallel opposite re-parents cannot build a cycle', async (t) => {
    for (let round = 0; round < 3; round++) {
      const x = await a.create({ external_key: `SWAP-X-${round}`, name: 'X' });
      const y = await a.create({ external_key: `SWAP-Y-${round}`, name: 'Y' });
      const [toY, toX] = await Promise.all([
        a.req('PATCH', `/api/v1/locations/${x.id}`, { parent_id: y.id }),
        a.req('PATCH', `/api/v1/locations/${y.id}`, { parent_id: x.id }),
      ]);
      t.same([toY.status, toX.status].sort(), [200, 409], `round ${round}: one applies, the other is a cycle`);
      const xAnc = await a.req('GET', `/api/v1/locations/${x.id}/ancestors`);
      const yAnc = await a.req('GET', `/api/v1/locations/${y.id}/ancestors`);
      t.equal(xAnc.json.total_count + yAnc.json.total_count, 1, 'exactly one parent link between them');
    }
  });

  t.test('parallel delete of a parent and create under it', async (t) => {
    for (let round = 0; round < 3; round++) {
      const parent = await a.create({ external_key: `RACE-${round}`, name: 'Race parent' });
      const [del, child] = await Promise.all([
        a.req('DELETE', `/api/v1/locations/${parent.id}`),
        a.req('POST', '/api/v1/locations', { name: 'Race child', parent_id: parent.id }),
      ]);
      if (del.status === 204) {
        t.equal(child.status, 400, `round ${round}: deleted first, so the child's parent does not resolve`);
        t.same(fieldCodes(child), [['parent_id', 'fk_not_found']]);
      } else {
        t.equal(del.status, 409, `round ${round}: child first, so the delete is blocked`);
        t.equal(child.status, 201);
      }
    }
  });
});
