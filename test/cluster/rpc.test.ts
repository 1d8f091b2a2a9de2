/**
 * Any node answers (docs/cluster.md, "Any node answers"): two trackd nodes on one nats-server, each
 * with its own DATA_DIR and serving one of the two shards (CLUSTER_STATIC_SHARDS). A request to the node that does not own
 * the org's shard goes over NATS to the owner and comes back as the owner's answer: reads, writes,
 * a body at the 1 MiB limit, error envelopes. Without an owner (its shard released), writes answer
 * 503 with Retry-After at once and reads ask again until an owner answers (or about 2 s pass).
 */
import { jetstream } from '@nats-io/jetstream';
import { Objm } from '@nats-io/obj';
import t, { type Test } from 'tap';
import { settledJob } from '../helpers/bulk.js';
import { startTwoNodes } from '../helpers/cluster.js';
import { natsClient } from '../helpers/scans.js';
import { ALL_SCOPES, eventually, type HttpResult, type Trackd } from '../helpers/trackd.js';

/** What a client sees of an answer, less what is the exchange's own (request id, rate-limit headers). */
function seen(res: HttpResult) {
  const body = res.json?.error === undefined ? res.json : { error: { ...res.json.error, request_id: '*' } };
  return {
    status: res.status,
    contentType: res.headers.get('content-type'),
    location: res.headers.get('location'),
    retryAfter: res.headers.get('retry-after'),
    body: body ?? res.text,
  };
}

async function twoNodes(t: Test, natsConfig: string[] = []) {
  const { a, b } = await startTwoNodes(t, natsConfig);
  const org = await a.createOrg('Forwarded Org'); // org 1: shard 0, node A's
  const { token } = await a.createKey(org.id, ALL_SCOPES);
  // The key reaches node B's control file through the cluster's bucket.
  await eventually(async () => (await b.http('GET', '/api/v1/orgs/me', { token })).status === 200, 5000);
  return { a, b, token };
}

t.test('a request to the node without the shard gets the owner’s answer', async (t) => {
  const { a, b, token } = await twoNodes(t);
  t.same(a.ownership().local(), [0]);
  t.same(b.ownership().local(), [1]);

  const created = await b.http('POST', '/api/v1/assets', { token, body: { name: 'Forklift', external_key: 'FL-1' } });
  t.equal(created.status, 201, 'a write through the non-owner is committed by the owner');
  t.equal(created.headers.get('location'), `/api/v1/assets/${created.json.data.id}`);
  t.ok(created.headers.get('x-ratelimit-limit'), 'the front node writes its rate-limit headers');
  t.ok(created.headers.get('x-request-id'));

  const path = `/api/v1/assets/${created.json.data.id}`;
  const [viaOwner, viaOther] = await Promise.all([a.http('GET', path, { token }), b.http('GET', path, { token })]);
  t.same(seen(viaOther), seen(viaOwner), 'GET: the same answer from either node');
  t.equal(viaOther.status, 200);

  const head = await b.http('HEAD', path, { token });
  t.equal(head.status, 200);
  t.equal(head.text, '', 'HEAD forwarded: headers only');
  t.equal(head.headers.get('content-length'), String(Buffer.byteLength(viaOwner.text)), 'with the GET body’s length');

  const list = '/api/v1/assets?limit=5&sort=external_key';
  t.same(seen(await b.http('GET', list, { token })), seen(await a.http('GET', list, { token })), 'a list with its query');

  const conflict = { name: 'Again', external_key: 'FL-1' };
  const [conflictA, conflictB] = [
    await a.http('POST', '/api/v1/assets', { token, body: conflict }),
    await b.http('POST', '/api/v1/assets', { token, body: conflict }),
  ];
  t.equal(conflictB.status, 409);
  t.same(seen(conflictB), seen(conflictA), 'an error envelope: the same from either node');
  t.equal(conflictB.json.error.request_id, conflictB.headers.get('x-request-id'), 'its request_id is the front node’s');

  const missing = await b.http('GET', '/api/v1/assets/999999', { token });
  t.same(seen(missing), seen(await a.http('GET', '/api/v1/assets/999999', { token })), '404 alike');
  t.equal(missing.json.error.instance, '/api/v1/assets/999999');

  // A body at the 1 MiB limit, valid: the whole of it crosses to the owner.
  const filler = 'x'.repeat(1024 * 1024 - 200);
  const big = JSON.stringify({ name: 'Big', external_key: 'BIG-1', metadata: { filler } });
  t.ok(Buffer.byteLength(big) <= 1024 * 1024 && Buffer.byteLength(big) > 1024 * 1024 - 300);
  const bigCreated = await b.http('POST', '/api/v1/assets', { token, body: big });
  t.equal(bigCreated.status, 201, 'a 1 MiB body forwarded and committed');
  const bigRead = await b.http('GET', `/api/v1/assets/${bigCreated.json.data.id}`, { token });
  t.equal(bigRead.json.data.metadata.filler, filler, 'and read back whole through the non-owner (an answer over 1 MiB)');

  // A 1 MiB body that fails validation: the owner's 400 envelope, every field, through the front.
  const badBig = JSON.stringify({ name: 7, external_key: 'BIG-2', metadata: { filler }, wat: 1 });
  const [badA, badB] = [
    await a.http('POST', '/api/v1/assets', { token, body: badBig }),
    await b.http('POST', '/api/v1/assets', { token, body: badBig }),
  ];
  t.equal(badB.status, 400);
  t.same(seen(badB), seen(badA), 'a validation envelope of a 1 MiB body: the same from either node');

  const tooBig = await b.http('POST', '/api/v1/assets', { token, body: `{"name":"x","metadata":{"f":"${'y'.repeat(1024 * 1024)}"}}` });
  t.equal(tooBig.status, 413, 'over the limit: refused by the front node, never forwarded');

  const patched = await b.http('PATCH', path, { token, body: { name: 'Forklift 2' } });
  t.equal(patched.status, 200);
  t.equal((await a.http('GET', path, { token })).json.data.name, 'Forklift 2', 'a PATCH through the non-owner');
  t.equal((await b.http('DELETE', path, { token })).status, 204, 'DELETE: 204 without a body');
  t.equal((await a.http('GET', path, { token })).status, 404);

  t.equal((await b.http('GET', '/api/v1/assets', { token: `${token}x` })).status, 401, 'a bad token: refused by the front node');
  t.equal((await b.http('GET', '/api/v1/orgs/me', { token })).status, 200, 'routes without a shard: answered by the front node');

  const injected = await b.request('GET', `/api/v1/assets/${bigCreated.json.data.id}`, { token });
  t.equal(injected.status, 200, 'the in-process pipeline of the main thread forwards too');
  const started = (node: Trackd) =>
    node
      .logs()
      .filter((l) => l.msg === 'shard actor started')
      .map((l) => l.shard);
  t.same(started(b), [1], 'node B never started shard 0: every answer for org 1 came from node A');
  t.same(started(a), [0]);
});

/** The front node's attempts that found no owner, from /metrics. */
async function misses(node: Trackd): Promise<number> {
  const text = (await node.http('GET', '/metrics')).text;
  const line = text.split('\n').find((l) => l.startsWith('trackd_shard_rpc_misses_total{reason="no owner"}'));
  return line === undefined ? 0 : Number(line.split(' ').at(-1));
}

t.test('without an owner: writes 503 with Retry-After at once, reads ask again until one answers', async (t) => {
  const { a, b, token } = await twoNodes(t);
  const created = await b.http('POST', '/api/v1/assets', { token, body: { name: 'Pallet', external_key: 'P-1' } });
  t.equal(created.status, 201);
  const path = `/api/v1/assets/${created.json.data.id}`;

  a.ownership().set(0, false); // node A lets shard 0 go: it leaves trackd.shard.0.rpc
  const missesBefore = await misses(b);
  const refused = await b.http('POST', '/api/v1/assets', { token, body: { name: 'Pallet 2', external_key: 'P-2' } });
  t.equal(refused.status, 503);
  t.equal(refused.json.error.type, 'service_unavailable');
  t.equal(refused.headers.get('retry-after'), '2');
  t.match(refused.json.error.detail, /nothing was changed/);
  t.equal(refused.json.error.request_id, refused.headers.get('x-request-id'));
  t.equal(refused.json.error.instance, '/api/v1/assets');
  t.equal((await misses(b)) - missesBefore, 1, 'a write asks once: it is not retried');

  const unanswered = await b.http('GET', path, { token });
  t.equal(unanswered.status, 503, 'a read with no owner for its whole retry time: 503');
  t.equal(unanswered.headers.get('retry-after'), '2');

  // A read in flight while the shard has no owner is answered once an owner subscribes again.
  const before = await misses(b);
  const pending = b.http('GET', path, { token });
  await eventually(async () => (await misses(b)) > before, 2000, 10);
  a.ownership().set(0, true);
  const read = await pending;
  t.equal(read.status, 200, 'the read asked again and got the new owner’s answer');
  t.equal(read.json.data.external_key, 'P-1');
  const again = await b.http('POST', '/api/v1/assets', { token, body: { name: 'Pallet 2', external_key: 'P-2' } });
  t.equal(again.status, 201, 'writes go through again');
  t.equal((await a.http('GET', '/api/v1/assets?limit=10', { token })).json.data.length, 2, 'the refused write changed nothing');
});

t.test('an upload to the node without the shard is staged and imported by the owner', async (t) => {
  const { a, b, token } = await twoNodes(t);
  // 20,000 rows (about 0.6 MB) in one streamed upload through node B, which does not own shard 0.
  const rows = Array.from({ length: 20_000 }, (_, i) => `Pallet ${i},UP-${i}`);
  const csv = `name,external_key\n${rows.join('\n')}\n`;
  const accepted = await b.http('POST', '/api/v1/assets/bulk', { token, body: csv, contentType: 'text/csv' });
  t.equal(accepted.status, 202, `forwarded upload accepted: ${accepted.text.slice(0, 200)}`);
  t.equal(accepted.headers.get('location'), `/api/v1/assets/bulk/${accepted.json.job_id}`);
  const job = await settledJob(b, token, 'assets', accepted.json.job_id);
  t.equal(job.status, 'completed');
  t.equal(job.total_rows, 20_000);
  // In cluster mode ids come in blocks from the cluster's bucket: a batch that outruns the next block is sent again, not failed.
  t.equal(
    job.created,
    20_000,
    `every row created by the owner${job.created === 20_000 ? '' : `: ${JSON.stringify(job.errors.slice(0, 2))}`}`,
  );
  const listed = await a.http('GET', '/api/v1/assets?limit=1&external_key=UP-19999', { token });
  t.equal(listed.json.data[0]?.name, 'Pallet 19999', 'the last row is on the owner');

  // Refused on the front node before anything is staged: the media type, the query.
  const wrongType = await b.http('POST', '/api/v1/assets/bulk', { token, body: csv, contentType: 'text/plain' });
  t.equal(wrongType.status, 415);
  t.equal(wrongType.json.error.type, 'unsupported_media_type');
  const badQuery = await b.http('POST', '/api/v1/assets/bulk?mode=sideways', { token, body: csv, contentType: 'text/csv' });
  t.equal(badQuery.status, 400);
  t.same(
    badQuery.json.error.fields.map((f: { field: string }) => f.field),
    ['mode'],
  );
  // The owner's refusal of the body comes back through the front node.
  const badHeader = await b.http('POST', '/api/v1/assets/bulk', { token, body: 'nom,colour\nx,y\n', contentType: 'text/csv' });
  const badHeaderOnOwner = await a.http('POST', '/api/v1/assets/bulk', { token, body: 'nom,colour\nx,y\n', contentType: 'text/csv' });
  t.same(seen(badHeader), seen(badHeaderOnOwner), 'a file the job cannot read: the owner’s 400, the same from either node');

  // Nothing staged is left behind.
  const nc = await natsClient(t, b.natsUrl);
  const bucket = await new Objm(jetstream(nc)).open('trackd_uploads');
  const left = async () => (await bucket.list()).filter((o) => !o.deleted).map((o) => o.name);
  await eventually(async () => (await left()).length === 0, 10_000).catch(() => undefined);
  t.same(await left(), [], 'the staged uploads were deleted after their answers');
});

t.test('an answer over the broker’s max_payload (an export) comes through the object store', async (t) => {
  // A broker that takes at most 64 KiB per message (the last max_payload of its configuration wins).
  const { a, b, token } = await twoNodes(t, ['max_payload: 65536']);
  const filler = 'y'.repeat(400);
  const rows = Array.from({ length: 400 }, (_, i) => JSON.stringify({ name: `Crate ${i}`, external_key: `CR-${i}`, metadata: { filler } }));
  const imported = await a.http('POST', '/api/v1/assets/bulk', {
    token,
    body: `${rows.join('\n')}\n`,
    contentType: 'application/x-ndjson',
  });
  t.equal(imported.status, 202, imported.text.slice(0, 200));
  t.equal((await settledJob(a, token, 'assets', imported.json.job_id)).created, 400);
  const [viaOwner, viaOther] = [
    await a.http('GET', '/api/v1/assets/export', { token }),
    await b.http('GET', '/api/v1/assets/export', { token }),
  ];
  t.equal(viaOwner.status, 200);
  t.ok(Buffer.byteLength(viaOwner.text) > 65536 * 2, `the export (${Buffer.byteLength(viaOwner.text)} bytes) is over max_payload`);
  t.equal(viaOther.status, 200, `through the non-owner: ${viaOther.text.slice(0, 200)}`);
  t.equal(viaOther.text, viaOwner.text, 'the same bytes from either node');
  t.equal(viaOther.headers.get('content-type'), viaOwner.headers.get('content-type'));
  const nc = await natsClient(t, b.natsUrl);
  const bucket = await new Objm(jetstream(nc)).open('trackd_uploads');
  const left = async () => (await bucket.list()).filter((o) => !o.deleted).map((o) => o.name);
  await eventually(async () => (await left()).length === 0, 10_000).catch(() => undefined);
  t.same(await left(), [], 'the staged answer was deleted once read');
});
