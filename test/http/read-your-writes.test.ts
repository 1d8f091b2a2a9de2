/**
 * Read-your-writes across HTTP threads: after every answered write, a read on a new connection (so
 * on any thread the kernel picks) sees it. Reads are issued before each write too, so every thread's
 * caches (response bodies, list counts, subtree orders) hold the old answer when the write lands.
 */
import t from 'tap';
import { startTrackd, type Trackd } from '../helpers/trackd.js';

const CLIENTS = Number(process.env.RYW_CLIENTS ?? 12);
const ROUNDS = Number(process.env.RYW_ROUNDS ?? 40);

interface Tally {
  operations: number;
  stale: string[];
}

async function client(trackd: Trackd, token: string, c: number, tally: Tally): Promise<void> {
  const req = (method: string, path: string, body?: unknown) => trackd.request(method, path, { token, body });
  const ok = async (method: string, path: string, body?: unknown) => {
    const res = await req(method, path, body);
    if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${res.text}`);
    return res.json;
  };
  const check = (what: string, fine: boolean) => {
    tally.operations++;
    if (!fine) tally.stale.push(`client ${c}: ${what}`);
  };
  const asset = (await ok('POST', '/api/v1/assets', { name: `rw-${c}` })).data;
  const left = (await ok('POST', '/api/v1/locations', { name: `left-${c}` })).data;
  const right = (await ok('POST', '/api/v1/locations', { name: `right-${c}` })).data;
  const leaf = (await ok('POST', '/api/v1/locations', { name: `leaf-${c}`, parent_id: left.id })).data;
  let parent = left;
  for (let i = 0; i < ROUNDS; i++) {
    // Warm the caches of whichever threads these connections land on.
    await Promise.all([req('GET', `/api/v1/assets/${asset.id}`), req('GET', `/api/v1/assets/${asset.id}`)]);
    const name = `rw-${c}-${i}`;
    await ok('PATCH', `/api/v1/assets/${asset.id}`, { name });
    check(`PATCH name ${name}`, (await ok('GET', `/api/v1/assets/${asset.id}`)).data.name === name);

    const value = `RW${c}X${i}`;
    await req('GET', `/api/v1/assets/${asset.id}`);
    const tag = (await ok('POST', `/api/v1/assets/${asset.id}/tags`, { tag_type: 'barcode', value })).data;
    check(
      `attach ${value}`,
      (await ok('GET', `/api/v1/assets/${asset.id}`)).data.tags.some((x: { id: number }) => x.id === tag.id),
    );
    await ok('DELETE', `/api/v1/assets/${asset.id}/tags/${tag.id}`);
    check(`detach ${value}`, !(await ok('GET', `/api/v1/assets/${asset.id}`)).data.tags.some((x: { id: number }) => x.id === tag.id));

    const probe = `rwprobe-${c}-${i}`;
    await req('GET', `/api/v1/assets?q=${probe}`);
    const created = (await ok('POST', '/api/v1/assets', { name: probe })).data;
    check(`create ${probe} counted`, (await ok('GET', `/api/v1/assets?q=${probe}`)).total_count === 1);
    check(`create ${probe} readable`, (await req('GET', `/api/v1/assets/${created.id}`)).status === 200);
    await ok('DELETE', `/api/v1/assets/${created.id}`);
    check(`delete ${probe} gone`, (await req('GET', `/api/v1/assets/${created.id}`)).status === 404);
    check(`delete ${probe} uncounted`, (await ok('GET', `/api/v1/assets?q=${probe}`)).total_count === 0);

    const next = parent.id === left.id ? right : left;
    await Promise.all([req('GET', `/api/v1/locations/${left.id}/descendants`), req('GET', `/api/v1/locations/${right.id}/descendants`)]);
    await ok('PATCH', `/api/v1/locations/${leaf.id}`, { parent_id: next.id });
    const under = (await ok('GET', `/api/v1/locations/${next.id}/descendants`)).data.map((l: { id: number }) => l.id);
    const former = (await ok('GET', `/api/v1/locations/${parent.id}/descendants`)).data.map((l: { id: number }) => l.id);
    check(`reparent under ${next.id}`, under.includes(leaf.id) && !former.includes(leaf.id));
    check(`reparent echo`, (await ok('GET', `/api/v1/locations/${leaf.id}`)).data.parent_id === next.id);
    parent = next;
  }
}

t.test('every answered write is seen by the next read on any thread', async (t) => {
  const trackd = await startTrackd(t, { env: { HTTP_THREADS: '4', RATE_LIMIT_PER_MIN: '10000000' } });
  const org = await trackd.createOrg('RYW');
  const { token } = await trackd.createKey(org.id);
  const tally: Tally = { operations: 0, stale: [] };
  await Promise.all(Array.from({ length: CLIENTS }, (_, c) => client(trackd, token, c, tally)));
  t.equal(tally.operations, CLIENTS * ROUNDS * 9, 'every check ran');
  t.same(tally.stale, [], `0 stale answers in ${tally.operations} checks`);
});
