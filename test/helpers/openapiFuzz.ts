import fc from 'fast-check';

/**
 * fast-check arbitraries built from our own OpenAPI document: valid values per schema, and hostile
 * mutations of them (missing, unknown, wrongly typed, out of range, control characters, raw tokens
 * such as 1e400 that JSON.stringify cannot produce).
 */

type Schema = Record<string, any>;

export interface Operation {
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE';
  path: string;
  operationId: string;
  parameters: { name: string; in: 'path' | 'query'; schema: Schema; description?: string }[];
  requestBody?: { contentType: string; schema: Schema };
  responses: Record<string, { content?: { 'application/json'?: { schema: Schema } } }>;
  scopes: string[];
}

export function operationsOf(doc: any): Operation[] {
  const ops: Operation[] = [];
  for (const [p, item] of Object.entries<any>(doc.paths)) {
    for (const [method, op] of Object.entries<any>(item)) {
      if (!['get', 'post', 'patch', 'delete'].includes(method)) continue;
      const content = op.requestBody?.content ?? {};
      const contentType = Object.keys(content)[0];
      ops.push({
        method: method.toUpperCase() as Operation['method'],
        path: p,
        operationId: op.operationId,
        parameters: op.parameters ?? [],
        requestBody: contentType ? { contentType, schema: content[contentType].schema } : undefined,
        responses: op.responses,
        scopes: op['x-required-scopes'] ?? [],
      });
    }
  }
  return ops;
}

/** A JSON token written as is (numbers beyond doubles, deep nesting, lone surrogates). */
export class RawJson {
  constructor(readonly text: string) {}
}

export function serialize(value: unknown): string {
  if (value instanceof RawJson) return value.text;
  if (Array.isArray(value)) return `[${value.map(serialize).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    return `{${Object.entries(value)
      .filter(([, v]) => v !== undefined)
      .map(([k, v]) => `${JSON.stringify(k)}:${serialize(v)}`)
      .join(',')}}`;
  }
  return JSON.stringify(value);
}

const EXTERNAL_KEY_PATTERN = '^[A-Za-z0-9-]+$';
const alnum = fc.constantFrom(...'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789'.split(''));
const keyChars = fc.constantFrom(...'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-'.split(''));

/** Text that passes every name/description/tag-value rule: no controls, no edge whitespace. */
const safeText = (min: number, max: number) =>
  fc
    .array(fc.oneof({ weight: 8, arbitrary: alnum }, { weight: 1, arbitrary: fc.constantFrom(' ', 'é', '字', '-', '😀') }), {
      minLength: Math.max(min, 1),
      maxLength: Math.min(max, 24),
    })
    .map((chars) => {
      const s = chars.join('');
      return s.trim() === s && s !== '' ? s : `X${s.trim()}X`;
    });

export const validTimestamp = fc
  .date({ min: new Date('2000-01-01T00:00:00Z'), max: new Date('2099-12-31T00:00:00Z'), noInvalidDate: true })
  .chain((d) =>
    fc.constantFrom(
      d.toISOString(),
      d.toISOString().replace('Z', '+00:00'),
      d.toISOString().replace(/\.\d{3}Z$/, '.123456789Z'),
      d.toISOString().replace(/\.\d{3}Z$/, 'Z'),
    ),
  );

export interface ValueContext {
  /** Ids known to exist (any entity), so valid requests also hit real rows. */
  knownIds: () => number[];
  /** External keys known to exist. */
  knownKeys: () => string[];
}

function idArbitrary(ctx: ValueContext): fc.Arbitrary<number> {
  return fc.oneof(
    { weight: 3, arbitrary: fc.constant(0).map(() => pick(ctx.knownIds()) ?? 1) },
    { weight: 1, arbitrary: fc.integer({ min: 1, max: 2147483647 }) },
    { weight: 1, arbitrary: fc.integer({ min: 1, max: 50 }) },
  );
}

let pickCounter = 0;
function pick<T>(list: T[]): T | undefined {
  if (list.length === 0) return undefined;
  pickCounter = (pickCounter * 1103515245 + 12345) & 0x7fffffff;
  return list[pickCounter % list.length];
}

/** A value that satisfies `schema` (as far as JSON Schema says; cross-field rules may still reject it). */
export function validValue(schema: Schema, ctx: ValueContext, name = ''): fc.Arbitrary<unknown> {
  const base = validNonNull(schema, ctx, name);
  return schema.nullable ? fc.oneof({ weight: 4, arbitrary: base }, { weight: 1, arbitrary: fc.constant(null) }) : base;
}

function validNonNull(schema: Schema, ctx: ValueContext, name: string): fc.Arbitrary<unknown> {
  const variants = schema.oneOf ?? schema.anyOf;
  if (Array.isArray(variants)) return fc.oneof(...variants.map((v: Schema) => validValue(v, ctx, name)));
  if (Array.isArray(schema.enum)) return fc.constantFrom(...schema.enum);
  switch (schema.type) {
    case 'string': {
      if (schema.format === 'date-time') return validTimestamp;
      const min = schema.minLength ?? 0;
      const max = schema.maxLength ?? 64;
      if (schema.pattern === EXTERNAL_KEY_PATTERN) {
        return fc.oneof(
          { weight: 1, arbitrary: fc.constant(0).map(() => pick(ctx.knownKeys()) ?? 'K-1') },
          {
            weight: 2,
            arbitrary: fc.array(keyChars, { minLength: Math.max(min, 1), maxLength: Math.min(max, 20) }).map((c) => c.join('')),
          },
        );
      }
      return safeText(min, max);
    }
    case 'integer':
      if (/_id$/.test(name) || name === 'id') return idArbitrary(ctx);
      return fc.integer({ min: schema.minimum ?? -1000, max: Math.min(schema.maximum ?? 1000, 2147483647) });
    case 'number':
      return fc.double({ noNaN: true, noDefaultInfinity: true, min: -1e6, max: 1e6 });
    case 'boolean':
      return fc.boolean();
    case 'array':
      return fc.array(validValue(schema.items ?? {}, ctx, name), {
        minLength: schema.minItems ?? 0,
        maxLength: Math.min(schema.maxItems ?? 3, 3),
      });
    case 'object': {
      if (schema.properties === undefined) return fc.dictionary(fc.string({ maxLength: 8 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 4 });
      const required = new Set<string>(schema.required ?? []);
      const props: Record<string, fc.Arbitrary<unknown>> = {};
      for (const [key, sub] of Object.entries<Schema>(schema.properties)) {
        // Read-only fields (echo fields with empty schemas, fields rejected on presence) stay out of valid bodies.
        if (Object.keys(sub).length === 0 || sub.readOnly === true) continue;
        const value = validValue(sub, ctx, key);
        // Optional fields appear one time in three, so a valid body is usually valid as a whole too.
        props[key] = required.has(key)
          ? value
          : fc.oneof({ weight: 2, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: value });
      }
      return fc.record(props).map((o) => Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)));
    }
    default:
      return fc.jsonValue({ maxDepth: 2 });
  }
}

const deep = (n: number) => new RawJson(`${'['.repeat(n)}${']'.repeat(n)}`);

/** Values that are wrong for almost any field: types, bounds, controls, sentinels, raw tokens. */
export const hostileValue: fc.Arbitrary<unknown> = fc.oneof(
  fc.constantFrom<unknown>(
    null,
    true,
    false,
    0,
    -1,
    1.5,
    2147483648,
    -2147483649,
    new RawJson('9223372036854775808'),
    new RawJson('-9223372036854775809'),
    new RawJson('1e400'),
    new RawJson('-1e400'),
    new RawJson('1e-400'),
    new RawJson('"\\ud800"'),
    new RawJson('"\\udfff\\ud800"'),
    '',
    ' ',
    ' lead',
    'trail ',
    '\u0000',
    'a\u0000b',
    '\t',
    'a\nb',
    '\u007f',
    '\u202eevil',
    '\ufeff',
    'x'.repeat(256),
    'x'.repeat(5000),
    'a,b',
    'a_b',
    '../etc/passwd',
    "'; DROP TABLE assets; --",
    '%00',
    '0001-01-01T00:00:00Z',
    '1970-01-01T00:00:00Z',
    '1970-01-01T01:00:00+01:00',
    '2026-02-30T00:00:00Z',
    '2026-11-21',
    '2026/11/21 10:00',
    '9999-12-31T23:59:59.999999999Z',
    '2026-11-21T10:00:00.1234567891Z',
    [],
    [null],
    {},
    { nested: { deeper: [1, 'two', null] } },
    deep(64),
    deep(5000),
  ),
  fc.string({ maxLength: 20, unit: 'binary' }),
  fc.integer(),
  fc.jsonValue({ maxDepth: 3 }),
);

export const hostileKey = fc.oneof(
  fc.constantFrom(
    '__proto__',
    'constructor',
    'prototype',
    '',
    '\u0000',
    'NAME',
    'name ',
    'location_id',
    'location_external_key',
    'id',
    'updated_at',
    'x'.repeat(300),
  ),
  fc.string({ maxLength: 12, unit: 'binary' }),
);

export type BodyPlan =
  | { kind: 'object'; value: Record<string, unknown>; mutation: string }
  | { kind: 'text'; text: string | Buffer; mutation: string };

/** A request body for `schema`: valid, or valid with one hostile mutation, or a hostile whole body. */
export function bodyArbitrary(schema: Schema, ctx: ValueContext): fc.Arbitrary<BodyPlan> {
  const valid = validValue(schema, ctx) as fc.Arbitrary<Record<string, unknown>>;
  const keys = Object.keys(schema.properties ?? {});
  const required: string[] = schema.required ?? [];
  const mutated: fc.Arbitrary<BodyPlan> = fc
    .tuple(valid, fc.integer({ min: 0, max: 5 }), fc.constantFrom(...(keys.length ? keys : ['x'])), hostileValue, hostileKey)
    .map(([v, how, field, bad, badKey]): BodyPlan => {
      const value = { ...v };
      switch (how) {
        case 0:
          return { kind: 'object', value, mutation: 'none' };
        case 1:
          if (required.length > 0) delete value[required[0]!];
          return { kind: 'object', value, mutation: `drop ${required[0]}` };
        case 2:
          value[badKey] = bad;
          return { kind: 'object', value, mutation: `unknown key ${JSON.stringify(badKey)}` };
        case 3:
        case 4:
          value[field] = bad;
          return { kind: 'object', value, mutation: `hostile ${field}` };
        default: {
          const text = serialize(value);
          const dup = text.length > 2 ? `{${JSON.stringify(field)}:${serialize(bad)},${text.slice(1)}` : text;
          return { kind: 'text', text: dup, mutation: `duplicate ${field}` };
        }
      }
    });
  const wholeBody = fc.constantFrom<BodyPlan>(
    ...[
      '',
      'null',
      '[]',
      '[{}]',
      '1',
      '"text"',
      'true',
      '{',
      '{"name":',
      '{}garbage',
      '{"a":1}{"b":2}',
      '\ufeff{}',
      `{"x":${'['.repeat(100_000)}`,
      '['.repeat(100_000),
      `${'{"a":'.repeat(20_000)}1${'}'.repeat(20_000)}`,
      '{"name":"\\u0000"}',
      '{"\\u0000":"x"}',
    ].map((text): BodyPlan => ({ kind: 'text', text, mutation: `body ${JSON.stringify(text.slice(0, 16))}` })),
    {
      kind: 'text',
      text: Buffer.from([0x7b, 0x22, 0x6e, 0x61, 0x6d, 0x65, 0x22, 0x3a, 0x22, 0xc3, 0x28, 0x22, 0x7d]),
      mutation: 'invalid UTF-8',
    },
    { kind: 'text', text: Buffer.from([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x3a, 0x31, 0x7d]), mutation: 'invalid UTF-8 key' },
    { kind: 'text', text: Buffer.from('{"name":"\xed\xa0\x80"}', 'latin1'), mutation: 'UTF-8 encoded surrogate' },
  );
  return fc.oneof({ weight: 6, arbitrary: mutated }, { weight: 1, arbitrary: wholeBody });
}

const hostileQueryValue = fc.constantFrom(
  '',
  '-1',
  '0',
  '1',
  '2147483648',
  '99999999999999999999999',
  '1e3',
  '0x10',
  '1.0',
  ' 1',
  '\u0661',
  'abc',
  'a,b',
  'TRUE',
  'true',
  'false',
  'x'.repeat(300),
  '\u0000',
  '-created_at',
  'name,-name',
  ',',
  '0001-01-01T00:00:00Z',
  '2026-11-21T10:00:00Z',
);

/** The sort fields an endpoint's `sort` description allows ("Allowed: a, b."). */
function sortFields(description: string | undefined): string[] {
  const m = /Allowed: ([^.]*)\./.exec(description ?? '');
  return m?.[1] ? m[1].split(',').map((s) => s.trim()) : ['id'];
}

function validQueryValue(param: Operation['parameters'][number], ctx: ValueContext): fc.Arbitrary<string> {
  if (param.name === 'sort') {
    const fields = sortFields(param.description);
    return fc
      .array(fc.tuple(fc.boolean(), fc.constantFrom(...fields)), { minLength: 1, maxLength: 2 })
      .map((terms) => terms.map(([d, f]) => (d ? `-${f}` : f)).join(','));
  }
  const schema = param.schema.type === 'array' ? param.schema.items : param.schema;
  return validValue({ ...schema, nullable: false }, ctx, param.name).map((v) => String(v));
}

/** A query string of documented parameters with valid values (possibly none). */
export function validQueryArbitrary(op: Operation, ctx: ValueContext): fc.Arbitrary<string> {
  const params = op.parameters.filter((p) => p.in === 'query');
  if (params.length === 0) return fc.constant('');
  return fc
    .uniqueArray(fc.constantFrom(...params), { maxLength: 2, selector: (p) => p.name })
    .chain(
      (chosen): fc.Arbitrary<string[]> =>
        chosen.length === 0
          ? fc.constant([])
          : fc.tuple(...chosen.map((p) => validQueryValue(p, ctx).map((v) => `${encodeURIComponent(p.name)}=${encodeURIComponent(v)}`))),
    )
    .map((pieces) => pieces.join('&'));
}

/** A query string: valid parameters, hostile values, unknown names, repeats, broken escapes. */
export function queryArbitrary(op: Operation, ctx: ValueContext): fc.Arbitrary<string> {
  const params = op.parameters.filter((p) => p.in === 'query');
  const pieces: fc.Arbitrary<string>[] = [
    fc
      .tuple(fc.constantFrom('unknown', 'limit', 'include_deleted', 'external_key', 'foo[bar]', 'q', '%zz', ''), hostileQueryValue)
      .map(([n, v]) => `${n === '%zz' ? n : encodeURIComponent(n)}=${encodeURIComponent(v)}`),
    fc.constantFrom('%', '%zz=1', 'a=%E0%A4%A', '=', '&&', 'limit', 'limit=1&limit=2', 'q=%00', 'q=%C0%AF'),
  ];
  for (const p of params) {
    pieces.push(validQueryValue(p, ctx).map((v) => `${encodeURIComponent(p.name)}=${encodeURIComponent(v)}`));
    pieces.push(validQueryValue(p, ctx).map((v) => `${encodeURIComponent(p.name)}=${encodeURIComponent(v)}`));
    pieces.push(hostileQueryValue.map((v) => `${encodeURIComponent(p.name)}=${encodeURIComponent(v)}`));
  }
  return fc.oneof(
    { weight: 2, arbitrary: fc.constant('') },
    { weight: 5, arbitrary: fc.array(fc.oneof(...pieces), { minLength: 1, maxLength: 4 }).map((list) => list.join('&')) },
  );
}

export function knownPathIdArbitrary(ctx: ValueContext): fc.Arbitrary<string> {
  return fc.constant(0).map(() => String(pick(ctx.knownIds()) ?? 1));
}

export function pathIdArbitrary(ctx: ValueContext): fc.Arbitrary<string> {
  return fc.oneof(
    { weight: 6, arbitrary: idArbitrary(ctx).map(String) },
    {
      weight: 2,
      arbitrary: fc.constantFrom(
        '0',
        '-1',
        '2147483648',
        '9223372036854775808',
        '99999999999999999999',
        'abc',
        '1.0',
        '1e3',
        '01',
        '%20',
        '%00',
        '%2F',
        '+1',
        '0x1',
        'null',
        '%E2%80%AE1',
      ),
    },
  );
}

export const contentTypeArbitrary = (expected: string) =>
  fc.oneof(
    { weight: 8, arbitrary: fc.constant<string | null>(expected) },
    {
      weight: 3,
      arbitrary: fc.constantFrom<string | null>(
        null,
        `${expected}; charset=utf-8`,
        expected.toUpperCase(),
        'application/json',
        'application/merge-patch+json',
        'text/plain',
        'multipart/form-data; boundary=x',
        'application/x-www-form-urlencoded',
        'application/json, text/plain',
        '',
        ';',
        '\u00e9',
      ),
    },
  );

export function validBodyArbitrary(schema: Schema, ctx: ValueContext): fc.Arbitrary<BodyPlan> {
  return (validValue(schema, ctx) as fc.Arbitrary<Record<string, unknown>>).map((value) => ({ kind: 'object', value, mutation: 'none' }));
}
