import AjvModule, { type ErrorObject, type ValidateFunction } from 'ajv';

const Ajv = AjvModule.default;
import type { TSchema } from '@sinclair/typebox';
import { fieldError, type FieldError } from '../errors/catalog.js';
import { outsideSupportedYears, parseTimestamp, timestampMessages } from './timestamps.js';

/**
 * Body validation: TypeBox schemas compiled by ajv (allErrors, strict: an unknown keyword or a loose
 * type in a schema fails at start, not silently at run time), every ajv failure mapped once to a
 * fields[] entry. Custom keywords carry the trackd rules that JSON Schema cannot say:
 * - `x-timestamp: 'nullable' | 'required'`: RFC 3339 text, not a sentinel instant;
 * - `x-pattern-message`: the message used when `pattern` fails;
 * - `x-int64`: an integer that must fit int64 (overflow is invalid_value, not too_large).
 */
// validateSchema off: checking each schema against the draft-07 meta-schema meant compiling that meta-schema
// first, half a second of CPU in every thread at every start (test/unit/schemas checks the schemas once instead).
const ajv = new Ajv({ allErrors: true, strict: true, verbose: true, ownProperties: true, validateSchema: false });

/** 2^63: as a double, 9223372036854775807 rounds up to it, so the bound must be exclusive. */
const INT64_LIMIT = 2 ** 63;
const OVERFLOW_SUFFIX = ' is outside the 64-bit integer range';

ajv.addKeyword({
  keyword: 'x-timestamp',
  type: 'string',
  errors: true,
  validate: function validateTimestamp(mode: string, data: string, _parent: unknown, ctx?: { instancePath: string }) {
    const parsed = parseTimestamp(data);
    if (parsed !== undefined && !parsed.sentinel) return true;
    const field = pathToField(ctx?.instancePath ?? '');
    let message: string;
    if (parsed === undefined)
      message = outsideSupportedYears(data) ? timestampMessages.outOfRange(field, data) : timestampMessages.invalid(field);
    else message = mode === 'nullable' ? timestampMessages.sentinelNullable(field, data) : timestampMessages.sentinelRequired(field, data);
    (validateTimestamp as unknown as { errors: Partial<ErrorObject>[] }).errors = [{ keyword: 'x-timestamp', message, params: {} }];
    return false;
  },
});
// int64 is documentation (OpenAPI); the bounds are minimum/maximum and x-int64. Declared so ajv does not warn.
ajv.addFormat('int64', { type: 'number', validate: () => true });
ajv.addKeyword({ keyword: 'x-pattern-message', schemaType: 'string' });
ajv.addKeyword({ keyword: 'x-extensible-enum' });
// The OpenAPI component name of a schema (src/openapi/document.ts): an annotation, nothing to check.
ajv.addKeyword({ keyword: 'x-component', schemaType: 'string' });
// The form a schema is published in when it differs from the one validated (document.ts): not checked here.
ajv.addKeyword({ keyword: 'x-openapi', schemaType: 'object' });
ajv.addKeyword({ keyword: 'x-allowed-values' });
ajv.addKeyword({
  keyword: 'x-int64',
  type: 'number',
  errors: true,
  validate: function validateInt64(_s: unknown, data: number) {
    if (Math.abs(data) < INT64_LIMIT) return true;
    (validateInt64 as unknown as { errors: Partial<ErrorObject>[] }).errors = [{ keyword: 'x-int64', message: 'overflow', params: {} }];
    return false;
  },
});

/** `/tags/0/value` becomes `tags[0].value`. */
export function pathToField(instancePath: string, leaf?: string): string {
  let out = '';
  for (const part of instancePath.split('/').slice(1)) {
    const key = part.replace(/~1/g, '/').replace(/~0/g, '~');
    out += /^\d+$/.test(key) ? `[${key}]` : out === '' ? key : `.${key}`;
  }
  if (leaf !== undefined) out += out === '' ? leaf : `.${leaf}`;
  return out;
}

export function jsonTypeOf(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  return typeof value === 'object' ? 'object' : typeof value;
}

function expectedTypeName(type: unknown): string {
  const t = Array.isArray(type) ? type.find((x) => x !== 'null') : type;
  return t === 'integer' ? 'number' : String(t);
}

function toFieldError(e: ErrorObject): FieldError | undefined {
  const parent = (e.parentSchema ?? {}) as Record<string, unknown>;
  switch (e.keyword) {
    case 'required': {
      const field = pathToField(e.instancePath, (e.params as { missingProperty: string }).missingProperty);
      return fieldError(field, 'required', `${field} is required`);
    }
    case 'additionalProperties': {
      const field = pathToField(e.instancePath, (e.params as { additionalProperty: string }).additionalProperty);
      return fieldError(field, 'unknown_field', `${field} is not a recognized field`);
    }
    default:
      break;
  }
  const field = pathToField(e.instancePath) || 'body';
  switch (e.keyword) {
    case 'type': {
      const received = jsonTypeOf(e.data);
      const expected = expectedTypeName(e.schema);
      if (received === 'null')
        return fieldError(field, 'invalid_value', `${field} must not be null`, { expected_type: expected, received_type: received });
      if (e.schema === 'integer' && received === 'number')
        return fieldError(field, 'invalid_value', `${field} must be an integer`, { expected_type: 'number', received_type: received });
      return fieldError(field, 'invalid_value', `${field} must be of type ${expected}, got ${received}`, {
        expected_type: expected,
        received_type: received,
      });
    }
    case 'minLength':
      return fieldError(field, 'too_short', `${field} must be at least ${e.schema} characters long`, { min_length: e.schema });
    case 'maxLength':
      return fieldError(field, 'too_long', `${field} must be at most ${e.schema} characters long`, { max_length: e.schema });
    case 'minItems':
      return fieldError(field, 'too_short', `${field} must have at least ${e.schema} items`, { min_items: e.schema });
    case 'maxItems':
      return fieldError(field, 'too_long', `${field} must have at most ${e.schema} items`, { max_items: e.schema });
    case 'minimum':
      return fieldError(field, 'too_small', `${field} must be at least ${e.schema}`, { min: e.schema });
    case 'maximum':
      return fieldError(field, 'too_large', `${field} must be at most ${e.schema}`, { max: e.schema });
    case 'x-int64':
      return fieldError(field, 'invalid_value', `${field}${OVERFLOW_SUFFIX}`);
    case 'pattern':
      return fieldError(
        field,
        'invalid_value',
        `${field} ${(parent['x-pattern-message'] as string | undefined) ?? 'has an invalid format'}`,
        {
          pattern: e.schema,
        },
      );
    case 'enum': {
      const allowed = e.schema as unknown[];
      return fieldError(field, 'invalid_value', `${field} must be one of: ${allowed.join(', ')}`, { allowed_values: allowed });
    }
    case 'const':
      return fieldError(field, 'invalid_value', `${field} must be ${JSON.stringify(e.schema)}`, { allowed_values: [e.schema] });
    case 'x-timestamp':
      return fieldError(field, 'invalid_value', e.message ?? `${field} is invalid`);
    default:
      return fieldError(field, 'invalid_value', `${field} ${e.message ?? 'is invalid'}`);
  }
}

export type BodyValidator = (body: unknown) => FieldError[];

/**
 * Compiles a TypeBox schema once, at its first use: compiling every route's schema at start took
 * most of a second of CPU in each HTTP thread. The returned function maps every failure to fields[] entries.
 */
export function compileValidator(schema: TSchema): BodyValidator {
  let compiled: ValidateFunction | undefined;
  return (body: unknown) => {
    compiled ??= ajv.compile(schema);
    const validate = compiled;
    if (validate(body)) return [];
    const out: FieldError[] = [];
    const seen = new Set<string>();
    for (const e of validate.errors ?? []) {
      const fe = toFieldError(e);
      if (fe === undefined) continue;
      const key = `${fe.field}\u0000${fe.code}`;
      if (seen.has(key)) continue;
      seen.add(key);
      out.push(fe);
    }
    // A value past int64 is an overflow (invalid_value), not also a bound failure.
    const overflowed = new Set(out.filter((f) => f.code === 'invalid_value' && f.message.endsWith(OVERFLOW_SUFFIX)).map((f) => f.field));
    // An empty string fails a `+` pattern too; it is reported once, as too_short.
    const tooShort = new Set(out.filter((f) => f.code === 'too_short').map((f) => f.field));
    return out.filter(
      (f) =>
        !((f.code === 'too_large' || f.code === 'too_small') && overflowed.has(f.field)) &&
        !(f.code === 'invalid_value' && f.params?.pattern !== undefined && tooShort.has(f.field)),
    );
  };
}

/** What the draft-07 meta-schema finds wrong in a schema (the check compileValidator leaves out), or undefined. */
export function schemaProblems(schema: TSchema): string | undefined {
  return ajv.validateSchema(schema) ? undefined : ajv.errorsText(ajv.errors);
}
