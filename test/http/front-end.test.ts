import t from 'tap';
import { ALL_SCOPES, startTrackd } from '../helpers/trackd.js';
import { ULID, expectError, expectRateHeaders, rawRequest } from '../helpers/wire.js';

const ME = '/api/v1/orgs/me';
const MAX_BODY = 1024 * 1024;

t.test('HTTP front end: methods, paths, request ids, bodies, content types, ids and query names', async (t) => {
  const trackd = await startTrackd(t);
  const org = await trackd.createOrg('Acme');
  const { token } = await trackd.createKey(org.id, ALL_SCOPES);
  const created = await trackd.http('POST', '/api/v1/assets', { token, body: { name: 'Forklift' } });
  t.equal(created.status, 201, 'an asset to PATCH');
  const assetPath = `/api/v1/assets/${created.json.data.id}`;

  t.test('HEAD answers every GET path with the same headers and an empty body', async (t) => {
    for (const [path, auth] of [
      [ME, true],
      ['/api/v1/assets', true],
      [assetPath, true],
      ['/api/openapi.json', false],
      ['/healthz', false],
      [ME, false],
    ] as const) {
      const get = await trackd.http('GET', path, auth ? { token } : {});
      const head = await trackd.http('HEAD', path, auth ? { token } : {});
      const label = `HEAD ${path}${auth ? '' : ' (no key)'}`;
      t.equal(head.status, get.status, `${label}: status`);
      t.equal(head.text, '', `${label}: empty body`);
      t.equal(head.headers.get('content-length'), String(Buffer.byteLength(get.text)), `${label}: Content-Length of the GET body`);
      const names = (h: Headers) => [...h.keys()].filter((n) => n !== 'date' && n !== 'connection').sort();
      t.same(names(head.headers), names(get.headers), `${label}: same header names`);
      for (const name of ['content-type', 'www-authenticate', 'x-ratelimit-limit']) {
        t.equal(head.headers.get(name), get.headers.get(name), `${label}: same ${name}`);
      }
    }
  });

  t.test('OPTIONS and wrong methods: 405 with Allow (HEAD included) mirrored in detail', async (t) => {
    const cases: [string, string, string][] = [
      ['OPTIONS', ME, 'GET, HEAD'],
      ['POST', ME, 'GET, HEAD'],
      ['DELETE', ME, 'GET, HEAD'],
      ['OPTIONS', '/api/v1/assets', 'GET, HEAD, POST'],
      ['PUT', '/api/v1/assets', 'GET, HEAD, POST'],
      ['PATCH', '/api/v1/assets', 'GET, HEAD, POST'],
      ['OPTIONS', assetPath, 'GET, HEAD, PATCH, DELETE'],
      ['PUT', assetPath, 'GET, HEAD, PATCH, DELETE'],
      ['POST', assetPath, 'GET, HEAD, PATCH, DELETE'],
      ['GET', `${assetPath}/rename`, 'POST'],
      ['HEAD', `${assetPath}/rename`, 'POST'],
      ['OPTIONS', '/api/openapi.json', 'GET, HEAD'],
    ];
    for (const [method, path, allow] of cases) {
      for (const auth of [true, false]) {
        const res = await trackd.http(method, path, auth ? { token } : {});
        const label = `${method} ${path}${auth ? '' : ' (no key)'}`;
        t.equal(res.headers.get('allow'), allow, `${label}: Allow`);
        if (method === 'HEAD') {
          t.equal(res.status, 405, `${label}: status`);
          t.equal(res.text, '', `${label}: no body on HEAD`);
          continue;
        }
        expectError(t, res, { status: 405, type: 'method_not_allowed', instance: path }, label);
        t.ok(res.json.error.detail.endsWith(allow), `${label}: detail mirrors Allow (${res.json.error.detail})`);
        t.match(res.json.error.detail, method, `${label}: detail names the method`);
        expectRateHeaders(t, res, label);
      }
    }
  });

  t.test('unknown paths are 404 in the envelope', async (t) => {
    for (const path of [
      '/',
      '/api',
      '/api/v1',
      '/api/v1/nope',
      '/api/v2/orgs/me',
      `${ME}/extra`,
      `${ME}/`,
      '/api/v1/assets/1/unknown',
      '/API/V1/ORGS/ME',
    ]) {
      for (const auth of [true, false]) {
        const res = await trackd.http('GET', path, auth ? { token } : {});
        expectError(t, res, { status: 404, type: 'not_found', instance: path }, `GET ${path}${auth ? '' : ' (no key)'}`);
      }
    }
  });

  t.test('no CORS headers, not even for a browser origin', async (t) => {
    for (const [method, path] of [
      ['GET', ME],
      ['OPTIONS', ME],
      ['GET', '/api/openapi.json'],
      ['GET', '/nope'],
      ['POST', '/api/v1/assets'],
    ] as const) {
      const res = await trackd.http(method, path, {
        token,
        headers: { origin: 'https://app.example.com', 'access-control-request-method': 'GET' },
      });
      const cors = [...res.headers.keys()].filter((n) => n.startsWith('access-control-'));
      t.same(cors, [], `${method} ${path}: no Access-Control-* headers`);
      if (method === 'OPTIONS') t.equal(res.status, 405, 'OPTIONS is not honored');
    }
  });

  t.test('X-Request-ID: a ULID generated per request, or the client value echoed unchanged', async (t) => {
    const seen = new Set<string>();
    for (const [method, path, auth] of [
      ['GET', ME, true],
      ['GET', ME, false],
      ['GET', '/nope', false],
      ['PUT', ME, true],
      ['GET', '/healthz', false],
    ] as const) {
      const res = await trackd.http(method, path, auth ? { token } : {});
      const id = res.headers.get('x-request-id') ?? '';
      t.match(id, ULID, `${method} ${path}: generated id is a ULID`);
      t.notOk(seen.has(id), 'ids are unique');
      seen.add(id);
      if (res.status >= 400) t.equal(res.json.error.request_id, id, 'error.request_id equals the header');
    }
    for (const supplied of ['client-trace-1', '01ARZ3NDEKTSV4RRFFQ69G5FAV', 'with spaces and: colons', 'x'.repeat(200)]) {
      for (const [path, auth] of [
        [ME, true],
        [ME, false],
        ['/nope', true],
      ] as const) {
        const res = await trackd.http('GET', path, { ...(auth ? { token } : {}), headers: { 'x-request-id': supplied } });
        t.equal(res.headers.get('x-request-id'), supplied, `echoed unchanged on ${res.status}`);
        if (res.status >= 400) t.equal(res.json.error.request_id, supplied, 'error.request_id is the echoed value');
      }
    }
  });

  t.test(`bodies over ${MAX_BODY} bytes: 413 payload_too_large in the envelope`, async (t) => {
    const head = (extra: string, withKey = true) =>
      [
        `POST /api/v1/assets HTTP/1.1`,
        'Host: 127.0.0.1',
        'Content-Type: application/json',
        ...(withKey ? [`Authorization: Bearer ${token}`] : []),
        extra,
      ].join('\r\n');
    const check = (res: { status: number; headers: Record<string, string>; body: string }, label: string) => {
      t.equal(res.status, 413, `${label}: status`);
      t.equal(res.headers['content-type'], 'application/json', `${label}: content type`);
      const error = JSON.parse(res.body).error;
      t.equal(error.type, 'payload_too_large', `${label}: type`);
      t.equal(error.title, 'Payload too large', `${label}: title`);
      t.equal(error.status, 413, `${label}: status field`);
      t.equal(error.detail, `Request body exceeds the ${MAX_BODY} byte limit`, `${label}: detail`);
      t.equal(error.instance, '/api/v1/assets', `${label}: instance`);
      t.equal(error.request_id, res.headers['x-request-id'], `${label}: request id`);
      t.match(res.headers['x-ratelimit-remaining'], /^\d+$/, `${label}: rate-limit headers`);
    };
    // Declared too large: refused before a byte of the body is read (none is ever sent here).
    check(await rawRequest(trackd.port, head(`Content-Length: ${MAX_BODY + 1}`)), 'declared Content-Length');
    check(await rawRequest(trackd.port, head(`Content-Length: ${MAX_BODY + 1}`, false)), 'declared Content-Length, no key');
    // Chunked: no declared length, so the limit is counted as the bytes arrive.
    const frame = (b: Buffer) => Buffer.concat([Buffer.from(`${b.length.toString(16)}\r\n`), b, Buffer.from('\r\n')]);
    const chunk = frame(Buffer.alloc(64 * 1024, 'a'));
    // Just past the limit, then nothing more: everything sent has been read when the server answers and
    // closes, so the close is a FIN and cannot reset the 413 away (a client still writing would get RST).
    const chunked = [frame(Buffer.from('{"name":"')), ...Array.from({ length: 17 }, () => chunk)];
    check(await rawRequest(trackd.port, head('Transfer-Encoding: chunked'), chunked), 'chunked');
    // Exactly at the limit is read and judged on its content instead.
    const name = 'n'.repeat(MAX_BODY - '{"name":""}'.length);
    const atLimit = await trackd.http('POST', '/api/v1/assets', { token, body: `{"name":"${name}"}` });
    t.equal(Buffer.byteLength(`{"name":"${name}"}`), MAX_BODY);
    expectError(
      t,
      atLimit,
      { status: 400, type: 'validation_error', instance: '/api/v1/assets', fields: atLimit.json?.error?.fields },
      'body of exactly the limit',
    );
    t.equal(atLimit.json.error.fields[0].code, 'too_long');
    t.equal((await trackd.http('GET', ME, { token })).status, 200, 'the server is fine afterwards');
  });

  t.test('415 rules of interface 4.1 with their details', async (t) => {
    const post = 'Content-Type must be application/json';
    const patch = 'Content-Type must be application/merge-patch+json on PATCH operations';
    const cases: [string, string, string | null, string][] = [
      ['POST', '/api/v1/assets', null, post],
      ['POST', '/api/v1/assets', 'application/merge-patch+json', post],
      ['POST', '/api/v1/assets', 'multipart/form-data; boundary=x', post],
      ['POST', '/api/v1/assets', 'text/plain', post],
      ['POST', '/api/v1/assets', 'application/jsonx', post],
      ['POST', `${assetPath}/rename`, 'text/plain', post],
      ['PATCH', assetPath, 'application/json', patch],
      ['PATCH', assetPath, null, patch],
      ['PATCH', assetPath, 'text/plain', patch],
      ['PATCH', assetPath, 'application/merge-patch+jsonx', patch],
    ];
    for (const [method, path, contentType, detail] of cases) {
      const res = await trackd.http(method, path, { token, body: { name: 'X' }, contentType });
      const label = `${method} ${path} with ${contentType ?? 'no Content-Type'}`;
      expectError(t, res, { status: 415, type: 'unsupported_media_type', detail, instance: path }, label);
      expectRateHeaders(t, res, label);
    }
    for (const [method, path, contentType] of [
      ['POST', '/api/v1/assets', 'application/json; charset=utf-8'],
      ['POST', '/api/v1/assets', 'Application/JSON'],
      ['PATCH', assetPath, 'application/merge-patch+json; charset=utf-8'],
    ] as const) {
      const res = await trackd.http(method, path, { token, body: { name: 'Accepted' }, contentType });
      t.ok(res.status === 200 || res.status === 201, `${method} with ${contentType} is accepted (${res.status})`);
    }
    const del = await trackd.http('DELETE', `/api/v1/assets/${created.json.data.id + 100000}`, {
      token,
      headers: { 'content-type': 'text/plain' },
    });
    t.equal(del.status, 404, 'DELETE does not enforce a content type');
  });

  t.test('bodies that are not a JSON object: bad_request with the quoted details, no fields', async (t) => {
    const notJson = 'Request body is not valid JSON';
    const wrongType = 'Request body could not be decoded as the expected type';
    const cases: [string, string, string | Buffer, string][] = [
      ['POST', '/api/v1/assets', '{bad', notJson],
      ['POST', '/api/v1/assets', '', notJson],
      ['POST', '/api/v1/assets', '{"name":"a"', notJson],
      ['POST', '/api/v1/assets', Buffer.from([0x7b, 0x22, 0x6e, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0x22, 0x7d]), notJson],
      ['POST', '/api/v1/assets', '[]', wrongType],
      ['POST', '/api/v1/assets', '"name"', wrongType],
      ['POST', '/api/v1/assets', '42', wrongType],
      ['POST', '/api/v1/assets', 'true', wrongType],
      ['POST', '/api/v1/assets', 'null', wrongType],
      ['PATCH', assetPath, 'null', 'Request body must be a JSON object (RFC 7396)'],
      ['PATCH', assetPath, '[{"name":"x"}]', wrongType],
      ['PATCH', assetPath, '"x"', wrongType],
      ['PATCH', assetPath, 'nul', notJson],
    ];
    for (const [method, path, body, detail] of cases) {
      const res = await trackd.http(method, path, { token, body });
      expectError(t, res, { status: 400, type: 'bad_request', detail, instance: path }, `${method} ${JSON.stringify(body.toString())}`);
    }
  });

  t.test('path ids outside 1..2147483647 are 400 validation_error naming the parameter', async (t) => {
    const cases: [string, string][] = [
      ['0', 'too_small'],
      ['-1', 'too_small'],
      ['2147483648', 'too_large'],
      ['99999999999999999999', 'too_large'],
      ['abc', 'invalid_value'],
      ['1.5', 'invalid_value'],
      ['1e3', 'invalid_value'],
      ['%20', 'invalid_value'],
    ];
    for (const [id, code] of cases) {
      for (const [method, suffix] of [
        ['GET', ''],
        ['DELETE', ''],
        ['DELETE', '/tags/1'],
        ['GET', '/history'],
      ] as const) {
        const path = `/api/v1/assets/${id}${suffix}`;
        const res = await trackd.http(method, path, { token });
        expectError(
          t,
          res,
          { status: 400, type: 'validation_error', instance: path, fields: res.json?.error?.fields },
          `${method} ${path}`,
        );
        t.equal(res.json.error.fields.length, 1, 'one field');
        t.match(res.json.error.fields[0], { field: 'asset_id', code }, `${method} ${path}: asset_id ${code}`);
        t.equal(res.json.error.detail, res.json.error.fields[0].message, 'detail is the field message');
      }
    }
    const both = await trackd.http('DELETE', '/api/v1/assets/0/tags/abc', { token });
    t.same(
      both.json.error.fields.map((f: any) => [f.field, f.code]),
      [
        ['asset_id', 'too_small'],
        ['tag_id', 'invalid_value'],
      ],
      'every bad path id is reported',
    );
    t.equal(both.json.error.detail, `${both.json.error.fields[0].message} (and 1 more validation errors)`);
    const top = await trackd.http('GET', '/api/v1/assets/2147483647', { token });
    expectError(t, top, { status: 404, type: 'not_found', instance: '/api/v1/assets/2147483647' }, 'the ceiling itself is in range');
  });

  t.test('unknown query parameters: unknown_field, one entry per key', async (t) => {
    const res = await trackd.http('GET', `${ME}?foo=1&bar=2&foo=3&baz`, { token });
    expectError(t, res, { status: 400, type: 'validation_error', instance: ME, fields: res.json?.error?.fields }, 'three unknown names');
    t.same(
      res.json.error.fields.map((f: any) => [f.field, f.code]),
      [
        ['foo', 'unknown_field'],
        ['bar', 'unknown_field'],
        ['baz', 'unknown_field'],
      ],
    );
    t.equal(res.json.error.detail, `${res.json.error.fields[0].message} (and 2 more validation errors)`, 'detail rule');
    const one = await trackd.http('GET', `${ME}?x=1`, { token });
    t.equal(one.json.error.detail, one.json.error.fields[0].message, 'a single failure has no suffix');
    const list = await trackd.http('GET', `${ME}?limit=5`, { token });
    t.match(
      list.json.error.fields,
      [{ field: 'limit', code: 'invalid_context' }],
      'a list parameter on a detail endpoint is invalid_context',
    );
    const onList = await trackd.http('GET', '/api/v1/assets?limit=5&colour=red', { token });
    t.same(
      onList.json.error.fields.map((f: any) => [f.field, f.code]),
      [['colour', 'unknown_field']],
      'unknown beside a known one',
    );
    const onItem = await trackd.http('GET', `${assetPath}?include_deleted=true`, { token });
    t.match(onItem.json.error.fields, [{ field: 'include_deleted', code: 'invalid_context' }]);
  });

  t.test('403 forbidden when the key lacks the scope', async (t) => {
    const readOnly = await trackd.createKey(org.id, ['locations:read']);
    for (const [method, path, body] of [
      ['GET', '/api/v1/assets', undefined],
      ['POST', '/api/v1/assets', { name: 'Nope' }],
      ['GET', '/api/v1/reports/asset-locations', undefined],
    ] as const) {
      const res = await trackd.http(method, path, { token: readOnly.token, body });
      expectError(t, res, { status: 403, type: 'forbidden', instance: path }, `${method} ${path}`);
      t.equal(res.headers.get('www-authenticate'), null, 'no challenge on 403');
    }
    t.equal((await trackd.http('GET', ME, { token: readOnly.token })).status, 200, '/orgs/me needs no scope');
  });
});
