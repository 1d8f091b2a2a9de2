import net from 'node:net';
import type { Test } from 'tap';
import type { HttpResult } from './trackd.js';

type Asserts = Test;

export const ULID = /^[0-9A-HJKMNP-TV-Z]{26}$/;
export const REALM_HEADER = 'Bearer realm="trackd-api"';

export const TITLES: Record<string, string> = {
  validation_error: 'Validation failed',
  bad_request: 'Bad request',
  unauthorized: 'Unauthorized',
  forbidden: 'Forbidden',
  not_found: 'Not found',
  method_not_allowed: 'Method not allowed',
  conflict: 'Conflict',
  cursor_expired: 'Cursor expired',
  payload_too_large: 'Payload too large',
  unsupported_media_type: 'Unsupported media type',
  missing_org_context: 'Missing org context',
  rate_limited: 'Rate limited',
  internal_error: 'Internal server error',
};

/**
 * Asserts the error envelope of interface 7.1 exactly: status, JSON content type, type, fixed title,
 * status echo, detail (exact string or pattern), instance = request path, request_id = X-Request-ID.
 */
export function expectError(
  t: Asserts,
  res: HttpResult,
  expected: { status: number; type: string; detail?: string | RegExp; instance: string; fields?: unknown },
  label = `${expected.status} ${expected.type}`,
): void {
  t.equal(res.status, expected.status, `${label}: status`);
  t.equal(res.headers.get('content-type'), 'application/json', `${label}: content type`);
  const error = res.json?.error;
  t.ok(error, `${label}: error envelope present`);
  if (!error) return;
  const keys = Object.keys(error).sort();
  const wantKeys = [
    'detail',
    'instance',
    'request_id',
    'status',
    'title',
    'type',
    ...(expected.fields === undefined ? [] : ['fields']),
  ].sort();
  t.same(keys, wantKeys, `${label}: envelope keys`);
  t.equal(error.type, expected.type, `${label}: type`);
  t.equal(error.title, TITLES[expected.type], `${label}: title`);
  t.equal(error.status, expected.status, `${label}: status field`);
  if (typeof expected.detail === 'string') t.equal(error.detail, expected.detail, `${label}: detail`);
  else if (expected.detail !== undefined) t.match(error.detail, expected.detail, `${label}: detail`);
  t.equal(error.instance, expected.instance, `${label}: instance`);
  t.equal(error.request_id, res.headers.get('x-request-id'), `${label}: request_id equals X-Request-ID`);
  if (expected.fields !== undefined) t.same(error.fields, expected.fields, `${label}: fields`);
}

export function expectRateHeaders(t: Asserts, res: HttpResult, label: string): void {
  t.match(res.headers.get('x-ratelimit-limit'), /^\d+$/, `${label}: X-RateLimit-Limit`);
  t.match(res.headers.get('x-ratelimit-remaining'), /^\d+$/, `${label}: X-RateLimit-Remaining`);
  t.match(res.headers.get('x-ratelimit-reset'), /^\d+$/, `${label}: X-RateLimit-Reset`);
}

export interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** Parses one HTTP/1.1 response with a Content-Length body out of raw bytes (skipping 100 Continue). */
function parseRaw(text: string): RawResponse | undefined {
  let rest = text;
  for (;;) {
    const end = rest.indexOf('\r\n\r\n');
    if (end === -1) return undefined;
    const [statusLine, ...lines] = rest.slice(0, end).split('\r\n');
    const status = Number(statusLine?.split(' ')[1]);
    const headers: Record<string, string> = {};
    for (const line of lines) {
      const i = line.indexOf(':');
      headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
    }
    rest = rest.slice(end + 4);
    if (status === 100) continue;
    const length = Number(headers['content-length'] ?? 0);
    if (Buffer.byteLength(rest) < length) return undefined;
    return { status, headers, body: rest.slice(0, length) };
  }
}

/**
 * Sends a request over a raw socket: `head` is the request line and headers (CRLF-joined, no final
 * blank line), then `body` chunks written one after another until a response arrives. Used where a
 * fetch client would refuse to send what the test needs (oversized declared lengths, endless chunked bodies).
 */
export function rawRequest(
  port: number,
  head: string,
  body: Iterable<Buffer | string> | AsyncIterable<Buffer | string> = [],
  timeoutMs = 10_000,
  /** Called when the server answers `Expect: 100-continue`: it has parsed the head and waits for the body. */
  onContinue?: () => void,
): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    let received = '';
    let settled = false;
    const timer = setTimeout(() => finish(new Error(`no response within ${timeoutMs} ms: ${received}`)), timeoutMs);
    const finish = (result: RawResponse | Error) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      if (result instanceof Error) reject(result);
      else resolve(result);
    };
    socket.on('data', (d) => {
      const before = received;
      received += d.toString('latin1');
      if (!/^HTTP\/1\.1 100 /.test(before) && /^HTTP\/1\.1 100 /.test(received)) onContinue?.();
      const parsed = parseRaw(received);
      if (parsed) finish(parsed);
    });
    socket.on('error', (err) => {
      const parsed = parseRaw(received);
      finish(parsed ?? err);
    });
    socket.on('close', () => {
      const parsed = parseRaw(received);
      finish(parsed ?? new Error(`connection closed without a full response: ${JSON.stringify(received)}`));
    });
    socket.on('connect', async () => {
      socket.write(`${head}\r\n\r\n`);
      for await (const chunk of body) {
        if (settled || socket.destroyed) return;
        if (!socket.write(chunk)) await new Promise((r) => socket.once('drain', r));
      }
    });
  });
}
