import type { TSchema } from '@sinclair/typebox';
import { ERROR_TYPES } from '../errors/catalog.js';
import type { Route } from '../http/route.js';
import type { QueryParam } from '../http/query.js';
import { ID_MAX } from '../http/query.js';

type Json = Record<string, unknown>;

const DROPPED_KEYWORDS = new Set(['$id', '$schema', 'x-int64', 'x-timestamp', 'x-pattern-message', 'examples', 'x-component']);

function isNullSchema(node: unknown): boolean {
  return typeof node === 'object' && node !== null && (node as Json).type === 'null' && Object.keys(node).length === 1;
}

/** `{ ...schema, nullable: true }`, wrapping a bare `$ref` in allOf (3.0 ignores siblings of `$ref`). */
function makeNullable(schema: Json): Json {
  // 3.0 wants a type beside nullable; the only nullable references are to objects (EventRef).
  return '$ref' in schema ? { type: 'object', allOf: [schema], nullable: true } : { ...schema, nullable: true };
}

/** anyOf of literals of one scalar type, as TypeBox writes `Union([Literal(a), Literal(b)])`. */
function literalUnion(members: Json[]): Json | undefined {
  const type = members[0]?.type;
  if (typeof type !== 'string' || type === 'object' || type === 'array') return undefined;
  if (!members.every((m) => m.type === type && 'const' in m && Object.keys(m).length === 2)) return undefined;
  return { type, enum: members.map((m) => m.const) };
}

/** Where named schemas (`x-component`) are published while a document is built, and on which side they are used. */
interface Publishing {
  components: Map<string, Json>;
  /** Response side: the published form does not refuse additive fields (responses may gain fields within v1). */
  response: boolean;
}

function convert(node: unknown, publishing?: Publishing): unknown {
  if (Array.isArray(node)) return node.map((n) => convert(n, publishing));
  if (node === null || typeof node !== 'object') return node;
  const input = node as Json;
  if (typeof input['x-component'] === 'string' && publishing !== undefined) {
    const { 'x-component': name, ...schema } = input;
    return publish(name as string, convert(schema, publishing) as Json, publishing);
  }
  // A schema may carry a different documented form (e.g. oneOf variants over a flat validation schema).
  if ('x-openapi' in input) return convert(input['x-openapi'], publishing);
  let out: Json = {};
  for (const [key, value] of Object.entries(input)) {
    if (DROPPED_KEYWORDS.has(key)) continue;
    if (key === 'const') out.enum = [value];
    else if (key === 'patternProperties') out.additionalProperties = convert(Object.values(value as Json)[0] ?? {}, publishing);
    else if (key === 'exclusiveMinimum' || key === 'exclusiveMaximum') {
      // JSON Schema 2019 numbers become the 3.0 boolean form.
      if (typeof value === 'number') {
        out[key === 'exclusiveMinimum' ? 'minimum' : 'maximum'] = value;
        out[key] = true;
      } else out[key] = value;
    } else out[key] = convert(value, publishing);
  }
  if (input['x-timestamp'] !== undefined) out.format = 'date-time';
  if (Array.isArray(input.examples) && out.example === undefined && input.examples.length > 0) out.example = input.examples[0];
  if (Array.isArray(out.type)) {
    const types = (out.type as string[]).filter((t) => t !== 'null');
    const nullable = types.length < (out.type as string[]).length;
    if (types.length === 1) out.type = types[0];
    else {
      delete out.type;
      out.anyOf = types.map((type) => ({ type }));
    }
    if (nullable) out.nullable = true;
  }
  for (const combinator of ['anyOf', 'oneOf'] as const) {
    const members = out[combinator];
    if (!Array.isArray(members)) continue;
    const nonNull = (members as Json[]).filter((m) => !isNullSchema(m));
    const nullable = nonNull.length < members.length;
    const { [combinator]: _, ...rest } = out;
    const literals = literalUnion(nonNull);
    let merged: Json;
    if (literals !== undefined) merged = { ...rest, ...literals };
    else if (nonNull.length === 1) merged = { ...rest, ...nonNull[0] };
    else merged = { ...rest, [combinator]: nonNull };
    out = nullable ? makeNullable(merged) : merged;
  }
  return out;
}

/**
 * Response shapes may gain fields within v1, so the document never tells clients to refuse
 * unknown response properties; request bodies keep `additionalProperties: false` (unknown_field).
 */
function openResponseSchema(node: unknown): Json {
  const walk = (n: unknown): unknown => {
    if (Array.isArray(n)) return n.map(walk);
    if (n === null || typeof n !== 'object') return n;
    const out: Json = {};
    for (const [key, value] of Object.entries(n)) {
      if (key === 'additionalProperties' && value === false) continue;
      out[key] = walk(value);
    }
    return out;
  };
  return walk(node) as Json;
}

/**
 * TypeBox schema to an OpenAPI 3.0 schema: plain JSON, with the 2019 forms 3.0 lacks rewritten
 * (null members and type arrays become `nullable: true`, `const` becomes a one-value `enum`,
 * unions of literals become an `enum`) and trackd's custom keywords turned into their 3.0 form.
 */
export function toOpenApiSchema(schema: TSchema | Json, publishing?: Publishing): Json {
  return convert(JSON.parse(JSON.stringify(schema)), publishing) as Json;
}

/** Files a named schema under components/schemas and returns its `$ref`; one name, one form. */
function publish(name: string, schema: Json, publishing: Publishing): Json {
  const form = publishing.response ? openResponseSchema(schema) : schema;
  const existing = publishing.components.get(name);
  if (existing !== undefined && JSON.stringify(existing) !== JSON.stringify(form))
    throw new Error(`component ${name} is published in two different forms`);
  publishing.components.set(name, form);
  return { $ref: `#/components/schemas/${name}` };
}

const errorEnvelopeSchema: Json = {
  type: 'object',
  required: ['error'],
  properties: {
    error: {
      type: 'object',
      required: ['type', 'title', 'status', 'detail', 'instance', 'request_id'],
      properties: {
        type: { type: 'string', enum: Object.keys(ERROR_TYPES), 'x-extensible-enum': true },
        title: { type: 'string' },
        status: { type: 'integer' },
        detail: { type: 'string' },
        instance: { type: 'string' },
        request_id: { type: 'string', description: 'ULID equal to the X-Request-ID response header' },
        fields: { type: 'array', items: { $ref: '#/components/schemas/FieldError' } },
      },
    },
  },
};

const fieldErrorSchema: Json = {
  type: 'object',
  required: ['field', 'code', 'message'],
  properties: {
    field: { type: 'string' },
    code: {
      type: 'string',
      enum: [
        'required',
        'invalid_value',
        'unknown_field',
        'invalid_context',
        'too_short',
        'too_long',
        'too_small',
        'too_large',
        'fk_not_found',
        'ambiguous_fields',
        'read_only',
      ],
      'x-extensible-enum': true,
    },
    message: { type: 'string' },
    params: { type: 'object', additionalProperties: true },
  },
};

const TAG_DESCRIPTIONS: Record<string, string> = {
  Organization: 'The organization and scopes of the API key in use.',
  Locations: 'The location tree (site > building > dock > shelf): create, read, change, rename, soft-delete, walk.',
  Assets: 'Tracked assets with their RFID, BLE and barcode tags.',
  Tracking: "Read-only: the current location of every scanned asset, and each asset's visits.",
  Events: "The organization's event log (moves and master-data changes) with its gapless per-organization sequence.",
  Webhooks:
    'Endpoints that receive the event log pushed in the Standard Webhooks format: signed, at least once, in order per endpoint, retried for days; their delivery log.',
};

function queryParamSchema(p: QueryParam): Json {
  switch (p.kind) {
    case 'integer':
      return { type: 'integer', format: 'int64', minimum: p.min, maximum: p.max, default: p.default };
    case 'id':
      return p.repeatable
        ? { type: 'array', items: { type: 'integer', format: 'int64', minimum: 1, maximum: ID_MAX } }
        : { type: 'integer', format: 'int64', minimum: 1, maximum: ID_MAX };
    case 'boolean':
      return p.default === undefined ? { type: 'boolean' } : { type: 'boolean', default: p.default };
    case 'external_key': {
      const key = { type: 'string', minLength: 1, maxLength: 255, pattern: '^[A-Za-z0-9-]+$' };
      return p.repeatable ? { type: 'array', items: key } : key;
    }
    case 'timestamp':
      return { type: 'string', format: 'date-time' };
    case 'sort':
      return { type: 'string', default: p.default };
    case 'q':
      return { type: 'string' };
    case 'enum':
      return p.repeatable
        ? { type: 'array', items: { type: 'string', enum: [...p.values] } }
        : { type: 'string', enum: [...p.values], default: p.default };
    case 'token':
      return { type: 'string', pattern: '^[A-Za-z0-9._-]{1,128}$' };
    case 'reject':
      return {};
  }
}

const RATE_HEADERS: Json = {
  'X-Request-ID': { description: 'Correlation id (ULID, or the client-supplied value echoed)', schema: { type: 'string' } },
  'X-RateLimit-Limit': { description: 'Requests allowed per window', schema: { type: 'integer' } },
  'X-RateLimit-Remaining': { description: 'Requests left in the current window', schema: { type: 'integer' } },
  'X-RateLimit-Reset': { description: 'Seconds until the current window ends', schema: { type: 'integer' } },
};

const ERROR_RESPONSES: Record<string, string> = {
  400: 'validation_error or bad_request',
  401: 'unauthorized',
  403: 'forbidden',
  404: 'not_found',
  408: 'request_timeout (the body did not arrive in time)',
  409: 'conflict',
  410: 'cursor_expired (the events after the cursor are pruned; header Trackd-Oldest-Seq names the oldest held)',
  413: 'payload_too_large',
  415: 'unsupported_media_type',
  422: 'missing_org_context',
  429: 'rate_limited',
  500: 'internal_error',
  503: 'service_unavailable (shutting down)',
};

function errorStatusesFor(route: Route): number[] {
  const statuses = [400, 401, 429, 500, 503];
  if ((route.scopes?.length ?? 0) > 0) statuses.push(403);
  if (route.path.includes('{')) statuses.push(404);
  if (route.body || route.upload) statuses.push(408, 413, 415);
  if ((route.method !== 'GET' && route.path.includes('{')) || route.method === 'POST') statuses.push(409);
  if (route.path === '/api/v1/orgs/me') statuses.push(422);
  if (route.path === '/api/v1/events') statuses.push(403, 410);
  return [...new Set(statuses)].sort();
}

/** The OpenAPI 3.0.3 document of every documented route: the single source is the route table. */
export function buildOpenApiDocument(routes: Route[]): Json {
  const paths: Record<string, Record<string, Json>> = {};
  const components = new Map<string, Json>([
    ['ErrorEnvelope', errorEnvelopeSchema],
    ['FieldError', fieldErrorSchema],
  ]);
  const requests: Publishing = { components, response: false };
  const responses_: Publishing = { components, response: true };
  for (const route of routes) {
    if (route.undocumented) continue;
    const parameters: Json[] = [];
    for (const m of route.path.matchAll(/\{(\w+)\}/g)) {
      parameters.push({
        name: m[1],
        in: 'path',
        required: true,
        schema: route.textParams?.includes(m[1]!) ? { type: 'string' } : { type: 'integer', format: 'int64', minimum: 1, maximum: ID_MAX },
      });
    }
    if (route.upload !== undefined) {
      parameters.push({
        name: 'Idempotency-Key',
        in: 'header',
        required: false,
        description: 'Sent again with the same value (same org and kind), the request answers the job the first one started.',
        schema: { type: 'string', minLength: 1, maxLength: 255 },
      });
    }
    for (const [name, p] of Object.entries(route.query ?? {})) {
      if (p.kind === 'reject') continue;
      const schema = queryParamSchema(p);
      const param: Json = { name, in: 'query', required: false, schema };
      if (p.description) param.description = p.description;
      if (schema.type === 'array') {
        param.style = 'form';
        param.explode = true;
      }
      parameters.push(param);
    }
    const responses: Record<string, Json> = {};
    for (const [status, spec] of Object.entries(route.responses)) {
      const r: Json = { description: spec.description, headers: { ...RATE_HEADERS } };
      if (spec.headers) {
        for (const [h, def] of Object.entries(spec.headers))
          (r.headers as Json)[h] = { description: def.description, schema: toOpenApiSchema(def.schema) };
      }
      if (spec.schema) r.content = { 'application/json': { schema: openResponseSchema(toOpenApiSchema(spec.schema, responses_)) } };
      if (spec.streamed) {
        const schema = toOpenApiSchema(spec.streamed.schema, responses_);
        r.content = Object.fromEntries(spec.streamed.mediaTypes.map((type) => [type, { schema }]));
      }
      responses[status] = r;
    }
    for (const status of errorStatusesFor(route)) {
      responses[String(status)] ??= {
        description: ERROR_RESPONSES[status],
        headers: { ...RATE_HEADERS },
        content: { 'application/json': { schema: { $ref: '#/components/schemas/ErrorEnvelope' } } },
      };
    }
    const op: Json = {
      operationId: route.operationId,
      summary: route.summary,
      tags: [route.tag],
      security: [{ BearerAuth: [] }],
      'x-required-scopes': route.scopes ?? [],
      parameters,
      responses,
    };
    if (route.upload) {
      op.requestBody = {
        required: true,
        description: route.upload.description,
        content: Object.fromEntries(
          route.upload.contentTypes.map((type) => [type, { schema: toOpenApiSchema(route.upload!.schema, requests) }]),
        ),
      };
    }
    if (route.body) {
      op.requestBody = { required: true, content: { [route.body.contentType]: { schema: toOpenApiSchema(route.body.schema, requests) } } };
    }
    (paths[route.path] ??= {})[route.method.toLowerCase()] = op;
  }
  return {
    openapi: '3.0.3',
    info: {
      title: 'trackd: asset and location tracking API',
      version: '1.0.0',
      description: 'Master data (assets, locations, tags) read-write; scan-derived location and history read-only.',
      license: { name: 'Proprietary (UNLICENSED)' },
    },
    servers: [{ url: '/' }],
    tags: [...new Set(routes.filter((r) => !r.undocumented).map((r) => r.tag))].map((name) =>
      TAG_DESCRIPTIONS[name] ? { name, description: TAG_DESCRIPTIONS[name] } : { name },
    ),
    paths,
    components: {
      securitySchemes: { BearerAuth: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT' } },
      schemas: Object.fromEntries([...components].sort(([a], [b]) => a.localeCompare(b))),
    },
  };
}
