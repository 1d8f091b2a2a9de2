import t from 'tap';
import fc from 'fast-check';
import AjvModule from 'ajv';
import { startTrackd } from '../helpers/trackd.js';
import { envelopeProblems, shardSnapshotter } from '../helpers/hostile.js';
import { inlineRefs } from '../helpers/openapi.js';
import {
  bodyArbitrary,
  contentTypeArbitrary,
  knownPathIdArbitrary,
  validBodyArbitrary,
  validQueryArbitrary,
  operationsOf,
  pathIdArbitrary,
  queryArbitrary,
  serialize,
  type BodyPlan,
  type Operation,
  type ValueContext,
} from '../helpers/openapiFuzz.js';

const Ajv = AjvModule.default;
/** Seeded: a failure reproduces with the same seed. Override with HARDENING_SEED. */
const SEED = Number(process.env.HARDENING_SEED ?? 20261122);
/** Generated requests across all operations (a few hundred, well under a minute). */
const TOTAL_RUNS = Number(process.env.HARDENING_RUNS ?? 900);

t.test('every operation of our OpenAPI document, driven with generated valid and hostile requests', async (t) => {
  const trackd = await startTrackd(t);
  const orgA = await trackd.createOrg('Fuzz A');
  const orgB = await trackd.createOrg('Fuzz B');
  const tokens = {
    a: (await trackd.createKey(orgA.id)).token,
    aReadOnly: (await trackd.createKey(orgA.id, ['assets:read', 'locations:read'])).token,
    b: (await trackd.createKey(orgB.id)).token,
  };
  const doc = inlineRefs((await trackd.request('GET', '/api/openapi.json')).json);
  const ops = operationsOf(doc);
  t.ok(ops.length >= 10, `the document lists ${ops.length} operations`);

  const knownIds = new Set<number>();
  const knownKeys = new Set<string>();
  const harvest = (value: unknown): void => {
    if (Array.isArray(value)) value.forEach(harvest);
    else if (value !== null && typeof value === 'object') {
      for (const [k, v] of Object.entries(value)) {
        if (k === 'id' && typeof v === 'number') knownIds.add(v);
        else if (k === 'external_key' && typeof v === 'string') knownKeys.add(v);
        else harvest(v);
      }
    }
  };
  // A little master data to aim at, through whatever create endpoints exist.
  const has = (method: string, p: string) => ops.some((o) => o.method === method && o.path === p);
  if (has('POST', '/api/v1/locations')) {
    const root = await trackd.request('POST', '/api/v1/locations', { token: tokens.a, body: { name: 'Root', external_key: 'FUZZ-ROOT' } });
    harvest(root.json);
    for (let i = 0; i < 3; i++) {
      harvest(
        (
          await trackd.request('POST', '/api/v1/locations', {
            token: tokens.a,
            body: { name: `Bay ${i}`, parent_id: root.json.data.id, tags: [{ tag_type: 'barcode', value: `BAY-${i}` }] },
          })
        ).json,
      );
    }
  }
  if (has('POST', '/api/v1/assets')) {
    for (let i = 0; i < 3; i++) {
      harvest(
        (
          await trackd.request('POST', '/api/v1/assets', {
            token: tokens.a,
            body: { name: `Pallet ${i}`, tags: [{ tag_type: 'rfid', value: `E2-${i}` }] },
          })
        ).json,
      );
    }
  }
  t.ok(knownIds.size > 0, 'seed records exist');
  const ctx: ValueContext = { knownIds: () => [...knownIds], knownKeys: () => [...knownKeys] };

  const snapshot = shardSnapshotter(t, trackd);
  const ajv = new Ajv({ strict: false, validateFormats: false, allErrors: true });
  const responseValidators = new Map<string, (data: unknown) => boolean>();
  let tried = 0;
  const statusCounts: Record<string, number> = {};

  type Auth = 'a' | 'aReadOnly' | 'b' | 'none' | 'garbage' | 'basic' | 'x-api-key';
  /** Each request is valid, or hostile in one dimension (so most hostile requests pass the other checks). */
  const requestArbitrary = (op: Operation) => {
    const valid = {
      ids: fc.array(knownPathIdArbitrary(ctx), { minLength: 3, maxLength: 3 }),
      query: validQueryArbitrary(op, ctx),
      body: op.requestBody ? validBodyArbitrary(op.requestBody.schema, ctx) : fc.constant<BodyPlan | undefined>(undefined),
      contentType: fc.constant<string | null>(op.requestBody?.contentType ?? 'application/json'),
      auth: fc.constant<Auth>('a'),
      requestId: fc.option(fc.stringMatching(/^[A-Za-z0-9._-]{1,40}$/), { freq: 3 }),
    };
    const hostile = {
      ids: fc.array(pathIdArbitrary(ctx), { minLength: 3, maxLength: 3 }),
      query: queryArbitrary(op, ctx),
      body: op.requestBody ? bodyArbitrary(op.requestBody.schema, ctx) : fc.constant<BodyPlan | undefined>(undefined),
      contentType: contentTypeArbitrary(op.requestBody?.contentType ?? 'application/json'),
      auth: fc.constantFrom<Auth>('aReadOnly', 'b', 'none', 'garbage', 'basic', 'x-api-key'),
      requestId: valid.requestId,
    };
    const dimensions = ['ids', 'query', 'body', 'contentType', 'auth'] as const;
    return fc.constantFrom('valid', 'valid', 'valid', ...dimensions).chain((flavor) =>
      fc.record({
        flavor: fc.constant(flavor),
        ids: flavor === 'ids' ? hostile.ids : valid.ids,
        query: flavor === 'query' ? hostile.query : valid.query,
        body: flavor === 'body' ? hostile.body : valid.body,
        contentType: flavor === 'contentType' ? hostile.contentType : valid.contentType,
        auth: flavor === 'auth' ? hostile.auth : valid.auth,
        requestId: valid.requestId,
      }),
    );
  };

  const runsPerOp = Math.max(12, Math.ceil(TOTAL_RUNS / ops.length));
  for (const op of ops) {
    await t.test(`${op.method} ${op.path}`, async (t) => {
      const triedBefore = tried;
      await fc.assert(
        fc.asyncProperty(requestArbitrary(op), async (r) => {
          let i = 0;
          const urlPath = op.path.replace(/\{\w+\}/g, () => r.ids[i++]!);
          const url = r.query === '' ? urlPath : `${urlPath}?${r.query}`;
          const headers: Record<string, string> = {};
          if (r.auth === 'a' || r.auth === 'aReadOnly' || r.auth === 'b') headers.authorization = `Bearer ${tokens[r.auth]}`;
          else if (r.auth === 'garbage') headers.authorization = 'Bearer eyJhbGciOiJub25lIn0.e30.';
          else if (r.auth === 'basic') headers.authorization = 'Basic dXNlcjpwYXNz';
          else if (r.auth === 'x-api-key') headers['x-api-key'] = tokens.a;
          if (r.requestId !== null) headers['x-request-id'] = r.requestId;
          let body: string | Buffer | undefined;
          if (r.body !== undefined) {
            body = r.body.kind === 'object' ? serialize(r.body.value) : r.body.text;
            if (r.contentType !== null) headers['content-type'] = r.contentType;
          }
          const before = snapshot();
          tried++;
          const res = await fetch(`${trackd.baseUrl}${url}`, { method: op.method, headers, body, signal: AbortSignal.timeout(10_000) });
          // An event stream stays open: its headers are the answer here (test/events/stream.test.ts reads streams).
          const opened = res.status === 200 && (res.headers.get('content-type') ?? '').startsWith('text/event-stream');
          const text = opened ? '' : await res.text();
          if (opened) await res.body?.cancel();
          statusCounts[res.status] = (statusCounts[res.status] ?? 0) + 1;
          if (process.env.HARDENING_DEBUG && res.status === Number(process.env.HARDENING_DEBUG) && r.flavor === 'valid')
            console.error(op.method, url, r.flavor, text.slice(0, 200));
          const where = `${op.method} ${url} [${r.flavor}: ${r.auth}, ${r.contentType}, ${r.body?.mutation ?? 'no body'}] -> ${res.status} ${text.slice(0, 300)}`;

          if (res.status === 500) throw new Error(`500: ${where}`);
          if (!(String(res.status) in op.responses)) throw new Error(`undocumented status: ${where}`);
          if (r.requestId !== null && res.headers.get('x-request-id') !== r.requestId) throw new Error(`X-Request-ID not echoed: ${where}`);
          if (!res.headers.get('x-ratelimit-limit') || !res.headers.get('x-ratelimit-remaining'))
            throw new Error(`no rate-limit headers: ${where}`);
          if (res.status >= 400) {
            const problems = envelopeProblems(res.status, res.headers, text, urlPath);
            if (problems.length > 0) throw new Error(`${problems.join('; ')}: ${where}`);
            if (snapshot() !== before) throw new Error(`a rejected request changed stored rows: ${where}`);
          } else {
            const schema = op.responses[String(res.status)]?.content?.['application/json']?.schema;
            if (res.status === 204) {
              if (text !== '') throw new Error(`204 with a body: ${where}`);
            } else if (schema !== undefined) {
              const key = `${op.operationId} ${res.status}`;
              let validate = responseValidators.get(key);
              if (validate === undefined) responseValidators.set(key, (validate = ajv.compile(schema)));
              const json = JSON.parse(text);
              if (!validate(json))
                throw new Error(`response does not match the documented schema (${ajv.errorsText((validate as any).errors)}): ${where}`);
              harvest(json);
            }
            if (op.method === 'GET' && snapshot() !== before) throw new Error(`a GET changed stored rows: ${where}`);
          }
        }),
        { seed: SEED + ops.indexOf(op), numRuns: runsPerOp, endOnFailure: true },
      );
      t.equal(tried - triedBefore, runsPerOp, `${runsPerOp} generated requests, each answered as documented`);
    });
  }
  t.comment(`generated requests tried: ${tried}; statuses: ${JSON.stringify(statusCounts)}`);
  t.ok(tried >= ops.length * 12, `${tried} generated requests`);
  const health = await trackd.request('GET', '/healthz');
  t.equal(health.status, 200, 'the server is still serving after the generated run');
});
