/**
 * The owner's side of shard RPC letting a shard go (src/cluster/rpcServer.ts) against a real
 * nats-server: a request the broker delivered before it saw the owner leave the subject is answered
 * "not the owner", so the front node refuses a write at once (nothing was run) instead of waiting
 * out its answer timeout with the write's outcome unknown.
 */
import t from 'tap';
import { ApiError } from '../../src/errors/catalog.js';
import { createLogger } from '../../src/log.js';
import { ShardRpcClient, type Miss } from '../../src/cluster/rpcClient.js';
import { ShardRpcServer } from '../../src/cluster/rpcServer.js';
import type { ForwardedRequest } from '../../src/cluster/rpcWire.js';
import { natsClient } from '../helpers/scans.js';
import { startNats } from '../helpers/trackd.js';

const nats = await startNats(t);

t.test('a request already on its way when the owner lets the shard go: "not the owner", a write refused at once', async (t) => {
  const owner = await natsClient(t, nats.url);
  const front = await natsClient(t, nats.url);
  let owned = true;
  let ran = 0;
  const server = new ShardRpcServer(
    owner,
    () => owned,
    async () => {
      ran++;
      return { status: 201, headers: {}, contentType: 'application/json', body: '{}' };
    },
    createLogger('silent'),
  );
  t.teardown(() => server.close());
  server.follow([0]);
  // The owner lets shard 0 go when a message on `release` reaches it. The front node publishes that
  // message and then its request on one connection, so the broker has delivered the request to the
  // owner before the owner's UNSUB can reach it.
  owner.subscribe('release', {
    callback: () => {
      owned = false;
      server.follow([]);
    },
  });
  await owner.flush();

  const misses: Miss[] = [];
  const client = new ShardRpcClient(front, (miss) => misses.push(miss), { readRetryMs: 2000, answerTimeoutMs: 5000, retryAfterSeconds: 2 });
  const request: ForwardedRequest = {
    method: 'POST',
    url: '/api/v1/assets',
    headers: {},
    remoteAddress: '127.0.0.1',
    body: Buffer.from('{}'),
  };
  front.publish('release');
  const refused = await client.forward(0, request, false).then(
    () => undefined,
    (err: unknown) => err,
  );
  t.ok(refused instanceof ApiError, 'the write is refused');
  t.equal((refused as ApiError).status, 503);
  t.match((refused as ApiError).detail, /nothing was changed/, 'its detail says nothing was run');
  t.same(misses, ['no owner'], 'answered "not the owner", not timed out');
  t.equal(ran, 0, 'the handler never ran');

  // Once the broker has the UNSUB, nobody takes the subject: no responders, the same refusal.
  await owner.flush();
  const again = await client.forward(0, request, false).catch((err: unknown) => err);
  t.match((again as ApiError).detail, /nothing was changed/);
  t.same(misses, ['no owner', 'no owner']);
});
