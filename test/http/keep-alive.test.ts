/**
 * Keep-alive clients never lose a request to a connection trackd closed without saying so: early
 * answers (before or without reading a body) keep the connection usable, closing answers say
 * `Connection: close`, and idle connections outlive the idle time announced in `Keep-Alive`.
 */
import net from 'node:net';
import t from 'tap';
import { startTrackd } from '../helpers/trackd.js';

/** Writes `requests` on one socket, in order, and returns the status lines and headers of every answer. */
function onOneSocket(port: number, requests: string[], pauseMs = 0): Promise<{ status: number; headers: Record<string, string> }[]> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    let data = '';
    const answers: { status: number; headers: Record<string, string> }[] = [];
    socket.on('data', (chunk) => {
      data += chunk.toString('latin1');
      for (;;) {
        const end = data.indexOf('\r\n\r\n');
        if (end < 0) return;
        const [statusLine, ...lines] = data.slice(0, end).split('\r\n');
        const headers = Object.fromEntries(
          lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]),
        );
        const length = Number(headers['content-length'] ?? 0);
        if (data.length < end + 4 + length) return;
        answers.push({ status: Number(statusLine?.split(' ')[1]), headers });
        data = data.slice(end + 4 + length);
        if (answers.length === requests.length) {
          socket.end();
          resolve(answers);
        } else setTimeout(() => socket.write(requests[answers.length]!), pauseMs);
      }
    });
    socket.on('error', reject);
    socket.on('close', () => resolve(answers));
    socket.write(requests[0]!);
  });
}

t.test('keep-alive connections', async (t) => {
  const trackd = await startTrackd(t);
  const org = await trackd.createOrg('KeepAlive');
  const { token } = await trackd.createKey(org.id);
  const get = 'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n';
  const post = (path: string, headers: string, body: string) =>
    `POST ${path} HTTP/1.1\r\nHost: x\r\n${headers}Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;

  await t.test('early answers leave the connection usable for the next request', async (t) => {
    const answers = await onOneSocket(trackd.port, [
      post('/api/v1/assets', 'Content-Type: application/json\r\n', '{"name":"no key"}'), // 401 before the body is needed
      post('/api/v1/nowhere', 'Content-Type: application/json\r\n', '{"a":1}'), // 404: no route reads the body
      post('/api/v1/assets', `Authorization: Bearer ${token}\r\nContent-Type: text/plain\r\n`, 'plain'), // 415
      `GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc`, // a body on a route that takes none
      `PATCH /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}`, // 405
      get,
    ]);
    t.same(
      answers.map((a) => a.status),
      [401, 404, 415, 200, 405, 200],
      'every request on the one connection answered, in order',
    );
    for (const a of answers) t.equal(a.headers['keep-alive'], 'timeout=5', 'each answer announces the idle time');
  });

  await t.test('answers that close the connection say so', async (t) => {
    const tooLarge = (
      await onOneSocket(trackd.port, [
        `POST /api/v1/assets HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\nContent-Length: 9999999\r\n\r\n`,
      ])
    )[0]!;
    t.equal(tooLarge.status, 413);
    t.equal(tooLarge.headers.connection, 'close');
    t.notOk(tooLarge.headers['keep-alive'], 'no idle time offered on a closing answer');
  });

  await t.test('an idle connection outlives the announced idle time', async (t) => {
    const answers = await onOneSocket(trackd.port, [get, get], 6_000);
    t.same(
      answers.map((a) => a.status),
      [200, 200],
      'the second request, 6 s after the first (announced: 5 s), is answered on the same connection',
    );
  });

  await t.test('a pooled keep-alive client (fetch) loses nothing over a mix with early answers', async (t) => {
    const base = `http://127.0.0.1:${trackd.port}`;
    const auth = { authorization: `Bearer ${token}` };
    const kinds = [
      () => fetch(`${base}/api/v1/orgs/me`, { headers: auth }),
      () => fetch(`${base}/api/v1/assets`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"name":"x"}' }),
      () => fetch(`${base}/api/v1/nowhere`, { method: 'POST', headers: auth, body: 'x'.repeat(2000) }),
      () => fetch(`${base}/api/v1/assets`, { method: 'POST', headers: { ...auth, 'content-type': 'text/plain' }, body: 'plain' }),
      () => fetch(`${base}/api/v1/assets?limit=1`, { headers: auth }),
    ];
    const expected = [200, 401, 404, 415, 200];
    let failures = 0;
    let wrong = 0;
    const total = 2_000;
    for (let i = 0; i < total; i += 20) {
      await Promise.all(
        Array.from({ length: 20 }, async (_, j) => {
          const k = (i + j) % kinds.length;
          try {
            const res = await kinds[k]!();
            await res.arrayBuffer();
            if (res.status !== expected[k]) wrong++;
          } catch {
            failures++;
          }
        }),
      );
    }
    t.equal(failures, 0, `0 of ${total} requests lost to a reset`);
    t.equal(wrong, 0, 'every answer as expected');
  });
});
