import { Validator } from '@seriousme/openapi-schema-validator';
import t from 'tap';
import YAML from 'yaml';
import { startTrackd } from '../helpers/trackd.js';

const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'];

/** Every schema-like node of the document, with its JSON path. */
function* walk(node: unknown, at = '#'): Generator<[string, Record<string, unknown>]> {
  if (Array.isArray(node)) {
    for (const [i, item] of node.entries()) yield* walk(item, `${at}/${i}`);
  } else if (node !== null && typeof node === 'object') {
    yield [at, node as Record<string, unknown>];
    for (const [key, value] of Object.entries(node)) yield* walk(value, `${at}/${key}`);
  }
}

t.test('OpenAPI 3.0.3 description at /api/openapi.json and /api/openapi.yaml', async (t) => {
  const trackd = await startTrackd(t);
  const jsonRes = await trackd.request('GET', '/api/openapi.json');
  t.equal(jsonRes.status, 200);
  t.equal(jsonRes.headers.get('content-type'), 'application/json');
  const doc = jsonRes.json;
  const operations = Object.entries(doc.paths as Record<string, Record<string, any>>).flatMap(([path, item]) =>
    Object.entries(item).map(([method, op]) => ({ path, method: method.toUpperCase(), op })),
  );

  t.test('a real OpenAPI 3.0 validator accepts it', async (t) => {
    const validator = new Validator();
    const result = await validator.validate(structuredClone(doc));
    t.same(result.errors ?? [], [], 'no schema errors');
    t.equal(result.valid, true);
    t.equal(validator.version, '3.0');
    t.equal(doc.openapi, '3.0.3');
    t.equal(doc.info.version, '1.0.0', 'the document version is 1.0.0, independent of /v1/');
  });

  t.test('security: BearerAuth, HTTP bearer with JWT format, on every operation with x-required-scopes', async (t) => {
    t.same(doc.components.securitySchemes, { BearerAuth: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT' } });
    t.ok(operations.length >= 10, `${operations.length} operations`);
    for (const { path, method, op } of operations) {
      const label = `${method} ${path}`;
      t.same(op.security, [{ BearerAuth: [] }], `${label}: BearerAuth`);
      t.ok(Array.isArray(op['x-required-scopes']), `${label}: x-required-scopes is an array`);
      for (const scope of op['x-required-scopes']) {
        t.ok(
          ['assets:read', 'assets:write', 'locations:read', 'locations:write', 'tracking:read', 'webhooks:read', 'webhooks:write'].includes(
            scope,
          ),
          `${label}: ${scope} is an integrator scope`,
        );
      }
      t.type(op.operationId, 'string', `${label}: operationId`);
      t.notOk('head' in doc.paths[path], `${path}: HEAD is not declared`);
      t.notOk('options' in doc.paths[path], `${path}: OPTIONS is not declared`);
    }
    const me = doc.paths['/api/v1/orgs/me'].get;
    t.same(me['x-required-scopes'], [], '/orgs/me: any valid key');
    t.ok(me.responses['422'], '/orgs/me documents missing_org_context');
    t.same(doc.paths['/api/v1/assets'].get['x-required-scopes'], ['assets:read']);
    t.same(doc.paths['/api/v1/assets'].post['x-required-scopes'], ['assets:write']);
  });

  t.test('named components: every body an operation takes or returns is a $ref to one', async (t) => {
    const names = Object.keys(doc.components.schemas);
    for (const name of [
      'Asset',
      'AssetCreate',
      'AssetPatch',
      'AssetList',
      'AssetResponse',
      'Location',
      'LocationCreate',
      'LocationPatch',
      'LocationList',
      'Tag',
      'TagRequest',
      'AssetLocation',
      'AssetLocationList',
      'HistoryEvent',
      'HistoryEventList',
      'Organization',
      'FieldError',
      'ErrorEnvelope',
    ]) {
      t.ok(names.includes(name), `components/schemas/${name}`);
    }
    const inline: string[] = [];
    const dangling: string[] = [];
    const check = (label: string, schema: { $ref?: string } | undefined) => {
      if (schema === undefined) return;
      if (typeof schema.$ref !== 'string') inline.push(label);
      else if (!names.includes(schema.$ref.replace('#/components/schemas/', ''))) dangling.push(`${label}: ${schema.$ref}`);
    };
    for (const { path, method, op } of operations) {
      for (const [type, content] of Object.entries<any>(op.requestBody?.content ?? {}))
        check(`${method} ${path} request ${type}`, content.schema);
      for (const [status, response] of Object.entries<any>(op.responses))
        check(`${method} ${path} ${status}`, response.content?.['application/json']?.schema);
    }
    t.same(inline, [], 'no inline request or response schema');
    t.same(dangling, [], 'every $ref names a component');
    t.type(doc.info.license?.name, 'string', 'info.license');
    t.ok(
      doc.tags.every((tag: { description?: string }) => typeof tag.description === 'string' && tag.description.length > 0),
      'every tag has a description',
    );
    t.ok(new Set(operations.map((o) => o.op.operationId)).size === operations.length, 'operationIds are unique');
  });

  t.test('3.0 forms only: nullable instead of type arrays or null types, no const', async (t) => {
    let nullable = 0;
    const bad: string[] = [];
    for (const [at, node] of walk(doc)) {
      if (Array.isArray(node.type)) bad.push(`${at}: type array`);
      if (node.type === 'null') bad.push(`${at}: type null`);
      if ('const' in node && !at.includes('/properties/const')) bad.push(`${at}: const`);
      if (node.nullable === true) nullable++;
    }
    t.same(bad, [], 'no 3.1-only schema forms');
    t.ok(nullable > 0, `nullable: true is used (${nullable} times)`);
    const errorType = doc.components.schemas.ErrorEnvelope.properties.error.properties.type;
    t.equal(errorType['x-extensible-enum'], true, 'error.type is an extensible enum');
    t.ok(errorType.enum.includes('missing_org_context'));
  });

  t.test('/api/openapi.yaml is the same document; the bare paths answer 301', async (t) => {
    const yamlRes = await trackd.request('GET', '/api/openapi.yaml');
    t.equal(yamlRes.status, 200);
    t.match(yamlRes.headers.get('content-type'), /yaml/);
    t.same(YAML.parse(yamlRes.text), doc, 'YAML equals JSON');
    t.notMatch(yamlRes.text, /: [&*]a\d+/, 'no anchors or aliases (YAML clients cap alias expansion)');
    for (const [from, to] of [
      ['/openapi.json', '/api/openapi.json'],
      ['/openapi.yaml', '/api/openapi.yaml'],
    ] as const) {
      for (const method of ['GET', 'HEAD']) {
        const res = await trackd.request(method, from);
        t.equal(res.status, 301, `${method} ${from}`);
        t.equal(res.headers.get('location'), to, `${method} ${from}: Location`);
        t.equal(res.text, '', 'no body');
      }
    }
  });

  t.test('the document and the routes served under /api/v1/ are the same set', async (t) => {
    // Without a key every served operation answers 401 before anything else; an unserved method at a
    // documented path answers 405 whose Allow lists exactly the documented methods (HEAD with GET).
    for (const [path, item] of Object.entries(doc.paths as Record<string, Record<string, unknown>>)) {
      t.ok(path.startsWith('/api/v1/'), `${path} is under /api/v1/`);
      const concrete = path.replace(/\{\w+\}/g, '1');
      const documented = Object.keys(item).map((m) => m.toUpperCase());
      const allow = documented.flatMap((m) => (m === 'GET' ? ['GET', 'HEAD'] : [m]));
      for (const method of METHODS) {
        const res = await trackd.request(method, concrete, method === 'POST' || method === 'PATCH' ? { body: {} } : {});
        if (documented.includes(method)) {
          t.equal(res.status, 401, `${method} ${path} is served (401 without a key)`);
        } else {
          t.equal(res.status, 405, `${method} ${path} is not served`);
          t.same(res.headers.get('allow')?.split(', ').sort(), [...allow].sort(), `${path}: Allow matches the document`);
        }
      }
    }
    // Paths one segment off every documented path are not served either.
    for (const path of Object.keys(doc.paths)) {
      const concrete = path.replace(/\{\w+\}/g, '1');
      for (const extra of [`${concrete}/x`, `${concrete}x`]) {
        if (Object.keys(doc.paths).some((p) => new RegExp(`^${p.replace(/\{\w+\}/g, '[^/]+')}$`).test(extra))) continue;
        t.equal((await trackd.request('GET', extra)).status, 404, `GET ${extra} is not served`);
      }
    }
  });
});
