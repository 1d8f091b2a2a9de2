/** The pure rules of webhooks: receiver addresses, retry delays, Retry-After, signatures, secrets at rest. */
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import t from 'tap';
import { Webhook } from 'standardwebhooks';
import { AddressPolicy, cidrListProblem } from '../../src/webhooks/addresses.js';
import { retryAfterMs, retryDelay } from '../../src/webhooks/dispatcher.js';
import { decryptSecret, encryptSecret, newSecret, signatureHeader } from '../../src/webhooks/secrets.js';
import { Sender } from '../../src/webhooks/send.js';

t.test('receiver addresses: private, loopback, link-local, metadata and reserved refused unless allowed', async (t) => {
  const strict = new AddressPolicy(undefined);
  const cases: [string, boolean][] = [
    ['127.0.0.1', false],
    ['127.255.0.9', false],
    ['10.1.2.3', false],
    ['172.16.0.1', false],
    ['172.31.255.255', false],
    ['192.168.1.1', false],
    ['169.254.169.254', false],
    ['100.64.0.1', false],
    ['0.0.0.0', false],
    ['224.0.0.1', false],
    ['255.255.255.255', false],
    ['::1', false],
    ['::', false],
    ['fe80::1', false],
    ['fd00:ec2::254', false],
    ['fc00::1', false],
    ['::ffff:127.0.0.1', false],
    ['::ffff:169.254.169.254', false],
    ['8.8.8.8', true],
    ['172.32.0.1', true],
    ['2606:4700:4700::1111', true],
    ['::ffff:8.8.8.8', true],
  ];
  for (const [address, allowed] of cases)
    t.equal(strict.refusal(address) === undefined, allowed, `${address} ${allowed ? 'allowed' : 'refused'}`);
  const lenient = new AddressPolicy('127.0.0.1/32, 10.0.0.0/8,::1');
  t.equal(lenient.refusal('127.0.0.1'), undefined, 'allowed by WEBHOOK_ALLOWED_CIDRS');
  t.equal(lenient.refusal('10.9.9.9'), undefined);
  t.equal(lenient.refusal('::1'), undefined);
  t.not(lenient.refusal('127.0.0.2'), undefined, 'outside the allowed range still refused');
  t.not(lenient.refusal('192.168.0.1'), undefined);
  t.match(
    await strict.hostRefusal('localhost'),
    /localhost resolves to .* (WEBHOOK_ALLOWED_CIDRS)/,
    'a name is judged by what it resolves to',
  );
  t.match(await strict.hostRefusal('[::1]'), /::1 is a private/);
  t.equal(await strict.hostRefusal('8.8.8.8'), undefined);
  t.match(await strict.hostRefusal('no-such-host.invalid'), /does not resolve/);
  for (const [text, problem] of [
    ['127.0.0.1/32', undefined],
    ['10.0.0.0/8,::1/128, fd00::/8', undefined],
    ['', undefined],
    ['10.0.0.0/33', /not a CIDR/],
    ['localhost', /not a CIDR/],
    ['10.0.0.0/8/1', /not a CIDR/],
    ['::1/129', /not a CIDR/],
  ] as const)
    if (problem === undefined) t.equal(cidrListProblem(text), undefined, text);
    else t.match(cidrListProblem(text), problem, text);
});

t.test('a delivery to a name that resolves to a refused address fails before any byte is sent', async (t) => {
  let hits = 0;
  const server = http.createServer((_req, res) => {
    hits++;
    res.end('ok');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  t.teardown(() => server.close());
  const port = (server.address() as AddressInfo).port;
  const strict = new Sender(new AddressPolicy(undefined), 2000);
  t.teardown(() => strict.close());
  const byName = await strict.send(`http://localhost:${port}/`, {}, '{}');
  t.match(byName, { status: null, error: /^refused address: localhost resolves to/ });
  const byAddress = await strict.send(`http://127.0.0.1:${port}/`, {}, '{}');
  t.match(byAddress, { status: null, error: /^refused address: 127\.0\.0\.1 is a private/ });
  const metadata = await strict.send('http://169.254.169.254/latest/meta-data/', {}, '{}');
  t.match(metadata, { status: null, error: /^refused address/ });
  t.equal(hits, 0, 'nothing reached the receiver');
  const allowed = new Sender(new AddressPolicy('127.0.0.1/32'), 2000);
  t.teardown(() => allowed.close());
  t.match(await allowed.send(`http://127.0.0.1:${port}/`, {}, '{}'), { status: 200, error: null, excerpt: 'ok' });
  t.equal(hits, 1);
});

t.test('bounded: a slow receiver times out, a large answer is cut off', async (t) => {
  const server = http.createServer((req, res) => {
    if (req.url === '/slow') return; // never answers
    res.writeHead(200);
    res.end(Buffer.alloc(200_000, 97));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  t.teardown(() => {
    server.closeAllConnections();
    server.close();
  });
  const port = (server.address() as AddressInfo).port;
  const sender = new Sender(new AddressPolicy('127.0.0.1/32'), 300);
  t.teardown(() => sender.close());
  t.match(await sender.send(`http://127.0.0.1:${port}/slow`, {}, '{}'), { status: null, error: 'timeout after 300 ms' });
  t.match(await sender.send(`http://127.0.0.1:${port}/big`, {}, '{}'), { status: null, error: 'response larger than 65536 bytes' });
});

t.test('retry delays double from the first up to the most, jittered in their upper half', async (t) => {
  const low = () => 0;
  const high = () => 1;
  t.same(
    [1, 2, 3, 4, 5, 12].map((n) => retryDelay(n, 1000, 8000, high)),
    [1000, 2000, 4000, 8000, 8000, 8000],
  );
  t.same(
    [1, 2, 3, 4].map((n) => retryDelay(n, 1000, 8000, low)),
    [500, 1000, 2000, 4000],
  );
  t.equal(retryDelay(1000, 5000, 3_600_000, high), 3_600_000, 'no overflow after many attempts');
  const now = Date.parse('2026-11-25T12:00:00Z');
  t.equal(retryAfterMs('120', now), 120_000);
  t.equal(retryAfterMs(' 3 ', now), 3000);
  t.equal(retryAfterMs('Wed, 25 Nov 2026 12:00:30 GMT', now), 30_000);
  t.equal(retryAfterMs('Wed, 25 Nov 2026 11:00:00 GMT', now), 0, 'a date past is no wait');
  t.equal(retryAfterMs('soon', now), 0);
  t.equal(retryAfterMs(undefined, now), 0);
});

t.test('signatures: what standardwebhooks verifies; secrets encrypted per organization', async (t) => {
  const secret = newSecret();
  const previous = newSecret();
  const body = '{"id":"x","type":"asset.created"}';
  const ts = Math.floor(Date.now() / 1000);
  const header = signatureHeader([secret, previous], 'msg_1', ts, body);
  const headers = { 'webhook-id': 'msg_1', 'webhook-timestamp': String(ts), 'webhook-signature': header };
  t.same(new Webhook(secret).verify(body, headers), JSON.parse(body));
  t.same(new Webhook(previous).verify(body, headers), JSON.parse(body));
  t.throws(() => new Webhook(newSecret()).verify(body, headers));
  const old = {
    ...headers,
    'webhook-timestamp': String(ts - 3600),
    'webhook-signature': signatureHeader([secret], 'msg_1', ts - 3600, body),
  };
  t.throws(() => new Webhook(secret).verify(body, old), 'a timestamp an hour old is refused by the receiver library');

  const key = randomBytes(32);
  const stored = encryptSecret(key, 7, secret);
  t.notMatch(stored, secret.slice(6, 20), 'the stored form does not carry the secret');
  t.equal(decryptSecret(key, 7, stored), secret);
  t.throws(() => decryptSecret(key, 8, stored), 'another organization cannot use it');
  t.throws(() => decryptSecret(randomBytes(32), 7, stored), 'another key cannot read it');
});
