/** The HTTP/1.1 client of webhook deliveries: responses read by ResponseReader, connections kept and replaced by Sender. */
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import t from 'tap';
import { AddressPolicy } from '../../src/webhooks/addresses.js';
import { ResponseReader } from '../../src/webhooks/response.js';
import { Sender } from '../../src/webhooks/send.js';

const read = (raw: string, chunk: number, close = false) => {
  const reader = new ResponseReader(64, 8);
  const bytes = Buffer.from(raw, 'latin1');
  for (let at = 0; at < bytes.length; at += chunk) {
    const r = reader.push(bytes.subarray(at, at + chunk));
    if (r !== undefined) return r;
  }
  return close ? reader.end() : undefined;
};

t.test('responses: status, excerpt (8 bytes kept here), reuse, bounds and errors', async (t) => {
  const cases: [string, string, boolean, unknown][] = [
    ['204, no body', 'HTTP/1.1 204 No Content\r\nDate: x\r\n\r\n', false, { status: 204, excerpt: '', reusable: true }],
    ['content-length', 'HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello', false, { status: 200, excerpt: 'hello', reusable: true }],
    [
      'excerpt cut',
      'HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\nhello world!',
      false,
      { status: 200, excerpt: 'hello wo', reusable: true },
    ],
    [
      'chunked with an extension and a trailer',
      'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;x=1\r\nabc\r\n2\r\nde\r\n0\r\nT: 1\r\n\r\n',
      false,
      { status: 200, excerpt: 'abcde', reusable: true },
    ],
    ['until the close', 'HTTP/1.1 200 OK\r\n\r\nbye', true, { status: 200, excerpt: 'bye', reusable: false }],
    ['connection: close', 'HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n', false, { reusable: false }],
    ['HTTP/1.0', 'HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n', false, { reusable: false }],
    ['interim 100 then 410', 'HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 410 Gone\r\nContent-Length: 0\r\n\r\n', false, { status: 410 }],
    ['Retry-After kept', 'HTTP/1.1 503 Busy\r\nRetry-After: 7\r\nContent-Length: 0\r\n\r\n', false, { status: 503 }],
  ];
  for (const [label, raw, close, expected] of cases)
    for (const chunk of [1, 7, raw.length]) {
      const r = read(raw, chunk, close);
      t.ok(r !== undefined && 'done' in r, `${label} (${chunk}-byte chunks): complete`);
      if (r !== undefined && 'done' in r)
        t.match({ ...r.done, excerpt: r.done.excerpt.toString('latin1') }, expected as object, `${label} (${chunk}-byte chunks)`);
    }
  t.match(
    read('HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nxy', 100),
    { done: { reusable: false } },
    'bytes after the response: not reused',
  );
  const retry = read('HTTP/1.1 503 Busy\r\nRetry-After: 7\r\nContent-Length: 0\r\n\r\n', 3);
  t.equal(retry !== undefined && 'done' in retry ? retry.done.headers.get('retry-after') : undefined, '7');
  const errors: [string, string, boolean, string][] = [
    ['not HTTP', 'SSH-2.0-OpenSSH\r\n\r\n', false, 'connection error: malformed response'],
    ['bad header line', 'HTTP/1.1 200 OK\r\nnocolon\r\n\r\n', false, 'connection error: malformed response'],
    ['bad length', 'HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n', false, 'connection error: malformed response'],
    ['bad chunk size', 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n', false, 'connection error: malformed response'],
    ['body over the bound', `HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n${'a'.repeat(100)}`, false, 'response larger than 64 bytes'],
    [
      'chunked over the bound',
      `HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n41\r\n${'a'.repeat(65)}\r\n0\r\n\r\n`,
      false,
      'response larger than 64 bytes',
    ],
    ['closed before the length', 'HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nabc', true, 'connection error: response cut off'],
    ['closed before any byte', '', true, 'connection error: response cut off'],
  ];
  for (const [label, raw, close, error] of errors)
    for (const chunk of [1, Math.max(1, raw.length)]) t.same(read(raw, chunk, close), { error }, `${label} (${chunk}-byte chunks)`);
  t.equal(read('HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nabc', 100), undefined, 'a partial body waits for more');
});

/** A raw receiver: answers each request (one per connection at a time) with `answer(n)`, counting connections. */
async function rawReceiver(
  t: { teardown: (f: () => void) => void },
  answer: (n: number, onConnection: number) => { bytes: string; thenClose?: boolean; closeAfterMs?: number; drop?: boolean },
) {
  const state = { connections: 0, requests: 0 };
  const server = net.createServer((socket) => {
    state.connections++;
    let buffer = '';
    let onConnection = 0;
    socket.on('data', (d) => {
      buffer += d.toString('latin1');
      const end = buffer.indexOf('\r\n\r\n');
      if (end < 0) return;
      const length = Number(/content-length: (\d+)/i.exec(buffer.slice(0, end))?.[1] ?? 0);
      if (buffer.length < end + 4 + length) return;
      buffer = buffer.slice(end + 4 + length);
      const a = answer(++state.requests, ++onConnection);
      if (a.drop) return void socket.destroy();
      socket.write(a.bytes);
      if (a.thenClose) socket.end();
      if (a.closeAfterMs !== undefined) setTimeout(() => socket.destroy(), a.closeAfterMs);
    });
    socket.on('error', () => undefined);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  t.teardown(() => server.close());
  return { state, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook` };
}

const OK = 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok';

t.test('connections: kept alive, not reused after connection: close, replaced when the receiver dropped a kept one', async (t) => {
  const sender = new Sender(new AddressPolicy('127.0.0.1/32'), 2000);
  t.teardown(() => sender.close());
  const kept = await rawReceiver(t, () => ({ bytes: OK }));
  for (let i = 0; i < 3; i++)
    t.match(await sender.send(kept.url, { 'webhook-id': `m${i}` }, '{}'), { status: 200, excerpt: 'ok', error: null });
  t.equal(kept.state.connections, 1, 'three deliveries on one connection');

  const closing = await rawReceiver(t, () => ({
    bytes: 'HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n',
    thenClose: true,
  }));
  for (let i = 0; i < 2; i++) t.match(await sender.send(closing.url, {}, '{}'), { status: 200 });
  t.equal(closing.state.connections, 2, 'connection: close: a new connection for the next');

  // The receiver drops each connection 20 ms after answering (an idle timeout shorter than ours).
  const dropping = await rawReceiver(t, () => ({ bytes: OK, closeAfterMs: 20 }));
  t.match(await sender.send(dropping.url, {}, '{}'), { status: 200 });
  await new Promise((r) => setTimeout(r, 100));
  t.match(await sender.send(dropping.url, {}, '{}'), { status: 200 }, 'the dropped connection is not used');
  t.equal(dropping.state.requests, 2, 'each delivery sent once');

  // The receiver closes a kept connection as the next request arrives (its idle timeout firing then):
  // the attempt goes again on a new connection instead of failing.
  const racing = await rawReceiver(t, (_n, onConnection) => (onConnection === 2 ? { bytes: '', drop: true } : { bytes: OK }));
  t.match(await sender.send(racing.url, {}, '{}'), { status: 200 });
  t.match(
    await sender.send(racing.url, {}, '{}'),
    { status: 200, error: null },
    'a kept connection closed unanswered: sent again on a new one',
  );
  t.equal(racing.state.connections, 2);
  // A new connection closed unanswered is a failed attempt (no second try).
  const refusing = await rawReceiver(t, () => ({ bytes: '', drop: true }));
  t.match(await sender.send(refusing.url, {}, '{}'), { status: null, error: /^connection error/ });
  t.equal(refusing.state.requests, 1);

  const gone = await rawReceiver(t, () => ({ bytes: 'HTTP/1.1 410 Gone\r\nRetry-After: 3\r\nContent-Length: 4\r\n\r\ngone' }));
  t.match(await sender.send(gone.url, {}, '{}'), { status: 410, excerpt: 'gone', retryAfter: '3' });
});
