/**
 * The control plane in KV (docs/cluster.md, "The control plane in KV"): two trackd nodes with their
 * own DATA_DIRs on one nats-server. Orgs and keys made through the CLI of one node are known to the
 * other within a second, a revocation on one is refused by the other within a second, orgs made on
 * both at once get distinct ids, id blocks reserved from two connections at once never overlap,
 * and every node signs with the one key of the cluster.
 */
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { ControlKv } from '../../src/control/controlKv.js';
import { connectNats } from '../../src/scans/streams.js';
import { startTwoNodes } from '../helpers/cluster.js';
import { ALL_SCOPES, eventually, startNats } from '../helpers/trackd.js';

t.test('a key minted on one node authenticates on the other; a revocation there is refused within a second', async (t) => {
  const { a, b } = await startTwoNodes(t);
  const signingKey = (dir: string) => fs.readFileSync(path.join(dir, 'keys', 'signing-key.json'), 'utf8');
  t.equal(signingKey(b.dataDir), signingKey(a.dataDir), 'both nodes sign with the cluster’s one key');

  const org = await a.createOrg('Minted on A');
  const key = await a.createKey(org.id, ALL_SCOPES);
  const me = await eventually(async () => {
    const res = await b.http('GET', '/api/v1/orgs/me', { token: key.token });
    return res.status === 200 && res;
  }, 1000);
  t.equal(me.json.data.id, org.id, 'node B knows the org and the key within a second');
  t.same(
    (await b.cli(['keys', 'list', '--org', String(org.id)])).map((k: { api_key_id: string }) => k.api_key_id),
    [key.api_key_id],
    'and its CLI lists the key',
  );

  const revoked = await a.cli(['keys', 'revoke', key.api_key_id]);
  t.ok(revoked.revoked_at);
  const refused = await eventually(async () => {
    const res = await b.http('GET', '/api/v1/orgs/me', { token: key.token });
    return res.status === 401 && res;
  }, 1000);
  t.equal(refused.json.error.detail, 'API key has been revoked', 'node B refuses the key within a second of its revocation on A');
  t.equal((await a.http('GET', '/api/v1/orgs/me', { token: key.token })).status, 401, 'and so does A');
  const again = await b.cli(['keys', 'revoke', key.api_key_id]);
  t.equal(again.revoked_at, revoked.revoked_at, 'revoked again on B: the first time is kept');

  const onB = await b.createOrg('Minted on B');
  const keyB = await b.createKey(onB.id, ALL_SCOPES);
  await eventually(async () => (await a.http('GET', '/api/v1/orgs/me', { token: keyB.token })).status === 200, 1000);
  t.not(onB.id, org.id);
});

t.test('orgs made on two nodes at once get distinct ids, known to both', async (t) => {
  const { a, b } = await startTwoNodes(t);
  const made = await Promise.all([...[1, 2, 3].map((i) => a.createOrg(`A${i}`)), ...[1, 2, 3].map((i) => b.createOrg(`B${i}`))]);
  const ids = made.map((o) => o.id).sort((x, y) => x - y);
  t.same(ids, [1, 2, 3, 4, 5, 6], 'six orgs, six ids');
  const names = (list: { id: number; name: string }[]) => list.map((o) => `${o.id}:${o.name}`).sort();
  await eventually(async () => names(await b.cli(['orgs', 'list'])).length === 6, 1000);
  t.same(names(await b.cli(['orgs', 'list'])), names(await a.cli(['orgs', 'list'])), 'both nodes list the same orgs');

  // Org 1 lives on shard 0 (node A), org 2 on shard 1 (node B): their id blocks come from the one bucket.
  const [key1, key2] = [await a.createKey(1), await a.createKey(2)];
  await eventually(async () => (await b.http('GET', '/api/v1/orgs/me', { token: key2.token })).status === 200, 1000);
  const asset1 = await a.http('POST', '/api/v1/assets', { token: key1.token, body: { name: 'On A' } });
  const asset2 = await b.http('POST', '/api/v1/assets', { token: key2.token, body: { name: 'On B' } });
  t.equal(asset1.status, 201);
  t.equal(asset2.status, 201);
  t.not(asset1.json.data.id, asset2.json.data.id, 'assets created on two nodes never share an id');
});

t.test('id blocks reserved from two connections at once never overlap', async (t) => {
  const nats = await startNats(t);
  const connections = await Promise.all([
    connectNats(nats.url, 'ids-1', { reconnect: false }),
    connectNats(nats.url, 'ids-2', { reconnect: false }),
  ]);
  t.teardown(() => Promise.all(connections.map((nc) => nc.close())));
  const stores = await Promise.all(connections.map((nc) => ControlKv.open(nc, 1)));
  const blocks = await Promise.all(Array.from({ length: 40 }, (_, i) => stores[i % 2]!.reserveIds('asset', 1000)));
  blocks.sort((x, y) => x.start - y.start);
  t.equal(blocks[0]!.start, 1);
  t.ok(
    blocks.every((b, i) => b.end - b.start === 1000 && (i === 0 || b.start === blocks[i - 1]!.end)),
    '40 blocks of 1000, back to back, none shared',
  );
  const floored = await stores[0]!.reserveIds('tag', 10, 5000);
  t.same(floored, { start: 5000, end: 5010 }, 'a floor (ids drawn before cluster mode) is respected');
});
