import { fieldError, type FieldError } from '../errors/catalog.js';
import { parseTimestamp, timestampMessages } from '../wire/timestamps.js';

export const ID_MAX = 2147483647;
export const EXTERNAL_KEY_PATTERN = /^[A-Za-z0-9-]+$/;
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is this pattern's purpose
const CONTROL_CHARS = /[\u0000-\u001f\u007f]/;

export type QueryParam = { description?: string } & (
  | { kind: 'integer'; min: number; max: number; default?: number }
  | { kind: 'id'; repeatable?: boolean }
  | { kind: 'boolean'; default?: boolean }
  | { kind: 'external_key'; repeatable?: boolean }
  | { kind: 'timestamp' }
  | { kind: 'sort'; fields: readonly string[]; default: string }
  | { kind: 'q' }
  /** One of a fixed set of words (repeatable: several of them). */
  | { kind: 'enum'; values: readonly string[]; default?: string; repeatable?: boolean }
  | { kind: 'reject'; message: string }
  /** An opaque token of letters, digits, '.', '_' and '-' (at most 128). */
  | { kind: 'token' }
);

export type QuerySpec = Record<string, QueryParam>;

export interface SortTerm {
  field: string;
  desc: boolean;
}

/**
 * Names that are list parameters somewhere in the API. On an endpoint that does not take one, it is
 * invalid_context (right field, wrong surface) rather than unknown_field.
 */
export const LIST_PARAMETER_NAMES = new Set([
  'limit',
  'offset',
  'sort',
  'q',
  'external_key',
  'is_active',
  'include_deleted',
  'parent_id',
  'parent_external_key',
  'location_id',
  'location_external_key',
  'asset_id',
  'asset_external_key',
  'from',
  'to',
]);

/** The list parameters every list endpoint takes. */
export function pagingParams(sortFields: readonly string[], defaultSort: string): Record<'limit' | 'offset' | 'sort', QueryParam> {
  return {
    limit: { kind: 'integer', min: 1, max: 200, default: 50, description: 'Page size (default 50, max 200).' },
    offset: { kind: 'integer', min: 0, max: ID_MAX, default: 0, description: 'Rows to skip (default 0).' },
    sort: {
      kind: 'sort',
      fields: sortFields,
      default: defaultSort,
      description: `Comma-separated fields, '-' prefix for descending. Allowed: ${sortFields.join(', ')}. Default: ${defaultSort}.`,
    },
  };
}

function decode(text: string): string | undefined {
  try {
    return decodeURIComponent(text.replace(/\+/g, ' '));
  } catch {
    return undefined;
  }
}

/** Splits a raw query string into decoded name -> values (in order). Undecodable pieces are reported. */
export function splitQuery(raw: string): { params: Map<string, string[]>; errors: FieldError[] } {
  const params = new Map<string, string[]>();
  const errors: FieldError[] = [];
  if (raw === '') return { params, errors };
  for (const piece of raw.split('&')) {
    if (piece === '') continue;
    const eq = piece.indexOf('=');
    const name = decode(eq === -1 ? piece : piece.slice(0, eq));
    const value = decode(eq === -1 ? '' : piece.slice(eq + 1));
    if (name === undefined || value === undefined) {
      errors.push(
        fieldError(name ?? piece.slice(0, eq === -1 ? undefined : eq), 'invalid_value', 'query parameter is not valid percent-encoding'),
      );
      continue;
    }
    const list = params.get(name);
    if (list) list.push(value);
    else params.set(name, [value]);
  }
  return { params, errors };
}

function parseId(name: string, text: string, errors: FieldError[]): number | undefined {
  if (!/^-?\d+$/.test(text)) {
    errors.push(fieldError(name, 'invalid_value', `${name} must be an integer`, { expected_type: 'number', received_type: 'string' }));
    return undefined;
  }
  const n = Number(text);
  if (n < 1) errors.push(fieldError(name, 'too_small', `${name} must be at least 1`, { min: 1 }));
  else if (n > ID_MAX) errors.push(fieldError(name, 'too_large', `${name} must be at most ${ID_MAX}`, { max: ID_MAX }));
  else return n;
  return undefined;
}

/** Validates a path id (outside 1..2147483647 is 400 validation_error, never 404). */
export function parsePathId(name: string, text: string, errors: FieldError[]): number {
  return parseId(name, text, errors) ?? 0;
}

export function parseExternalKey(name: string, text: string, errors: FieldError[]): string | undefined {
  if (text.length === 0) errors.push(fieldError(name, 'too_short', `${name} must be at least 1 characters long`, { min_length: 1 }));
  else if (text.length > 255) errors.push(fieldError(name, 'too_long', `${name} must be at most 255 characters long`, { max_length: 255 }));
  else if (text.includes(','))
    errors.push(fieldError(name, 'invalid_value', `${name} must not be comma-joined; repeat the parameter for several values`));
  else if (!EXTERNAL_KEY_PATTERN.test(text))
    errors.push(
      fieldError(name, 'invalid_value', `${name} must contain only letters, digits and hyphens`, { pattern: EXTERNAL_KEY_PATTERN.source }),
    );
  else return text;
  return undefined;
}

function parseOne(name: string, spec: QueryParam, text: string, errors: FieldError[]): unknown {
  switch (spec.kind) {
    case 'integer': {
      if (!/^-?\d+$/.test(text)) {
        errors.push(fieldError(name, 'invalid_value', `${name} must be an integer`, { expected_type: 'number', received_type: 'string' }));
        return undefined;
      }
      const n = Number(text);
      if (n < spec.min) errors.push(fieldError(name, 'too_small', `${name} must be at least ${spec.min}`, { min: spec.min }));
      else if (n > spec.max) errors.push(fieldError(name, 'too_large', `${name} must be at most ${spec.max}`, { max: spec.max }));
      else return n;
      return undefined;
    }
    case 'id':
      return parseId(name, text, errors);
    case 'boolean':
      if (text === 'true') return true;
      if (text === 'false') return false;
      errors.push(fieldError(name, 'invalid_value', `${name} must be true or false`, { allowed_values: ['true', 'false'] }));
      return undefined;
    case 'external_key':
      return parseExternalKey(name, text, errors);
    case 'token':
      if (/^[A-Za-z0-9._-]{1,128}$/.test(text)) return text;
      errors.push(fieldError(name, 'invalid_value', `${name} must be 1 to 128 letters, digits, '.', '_' or '-'`));
      return undefined;
    case 'timestamp': {
      const ts = parseTimestamp(text);
      if (ts === undefined) errors.push(fieldError(name, 'invalid_value', timestampMessages.invalid(name)));
      else if (ts.sentinel) errors.push(fieldError(name, 'invalid_value', timestampMessages.sentinelRequired(name, text)));
      else return ts.ms;
      return undefined;
    }
    case 'sort': {
      const terms: SortTerm[] = [];
      for (const part of text.split(',')) {
        const desc = part.startsWith('-');
        const field = desc ? part.slice(1) : part;
        if (!spec.fields.includes(field)) {
          errors.push(fieldError(name, 'invalid_value', `unknown sort field: ${field}`, { allowed_values: [...spec.fields] }));
          return undefined;
        }
        terms.push({ field, desc });
      }
      return terms;
    }
    case 'q':
      if (CONTROL_CHARS.test(text)) {
        errors.push(fieldError(name, 'invalid_value', `${name} must not contain control characters`));
        return undefined;
      }
      return text;
    case 'enum':
      if (spec.values.includes(text)) return text;
      errors.push(
        fieldError(name, 'invalid_value', `${name} must be one of: ${spec.values.join(', ')}`, { allowed_values: [...spec.values] }),
      );
      return undefined;
    case 'reject':
      errors.push(fieldError(name, 'invalid_context', spec.message));
      return undefined;
  }
}

function isRepeatable(spec: QueryParam): boolean {
  return (spec.kind === 'id' || spec.kind === 'external_key' || spec.kind === 'enum') && spec.repeatable === true;
}

/** The split of an empty query string, shared (read only) so that most requests allocate nothing here. */
const NO_QUERY: { params: ReadonlyMap<string, string[]>; errors: readonly FieldError[] } = { params: new Map(), errors: [] };

/** Validates a query against an endpoint's spec; unknown names are unknown_field or invalid_context. */
export function parseQuery(raw: string, spec: QuerySpec, errors: FieldError[]): Record<string, unknown> {
  const { params, errors: decodeErrors } = raw === '' ? NO_QUERY : splitQuery(raw);
  if (decodeErrors.length > 0) errors.push(...decodeErrors);
  const values: Record<string, unknown> = {};
  // A list parameter sent to a detail or write endpoint is invalid_context; on a list endpoint,
  // a parameter it does not take (another list's filter) is simply unknown there.
  const isListEndpoint = Object.hasOwn(spec, 'limit');
  for (const [name, texts] of params) {
    const param = Object.hasOwn(spec, name) ? spec[name] : undefined;
    if (param === undefined) {
      if (!isListEndpoint && LIST_PARAMETER_NAMES.has(name))
        errors.push(fieldError(name, 'invalid_context', `${name} is not accepted on this endpoint`));
      else errors.push(fieldError(name, 'unknown_field', `${name} is not a recognized query parameter`));
      continue;
    }
    if (isRepeatable(param)) {
      const list: unknown[] = [];
      for (const text of texts) {
        const v = parseOne(name, param, text, errors);
        if (v !== undefined) list.push(v);
      }
      values[name] = list;
    } else {
      // Only the first value of a non-repeatable parameter is honoured (the rule the interface gives for q).
      const v = parseOne(name, param, texts[0] ?? '', errors);
      if (v !== undefined) values[name] = v;
    }
  }
  for (const name in spec) {
    const param = spec[name]!; // a key of spec (for-in over own keys: no allocation per request)
    if (values[name] !== undefined) continue;
    if (param.kind === 'integer') {
      if (param.default !== undefined) values[name] = param.default;
    } else if (param.kind === 'sort') values[name] = parseOne(name, param, param.default, []);
    else if (param.kind === 'boolean' && param.default !== undefined) values[name] = param.default;
    else if (param.kind === 'enum' && param.default !== undefined) values[name] = param.default;
  }
  return values;
}
