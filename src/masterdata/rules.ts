import { fieldError, type FieldError } from '../errors/catalog.js';
import { parseTimestamp } from '../wire/timestamps.js';

/** Deepest metadata nesting accepted; deeper documents are refused before anything recurses into them. */
export const METADATA_MAX_DEPTH = 32;

/** A schema-validated request timestamp as epoch ms (null stays null, absent stays undefined). */
export function requestTime(value: unknown): number | null | undefined {
  if (value === undefined || value === null) return value;
  return parseTimestamp(value as string)!.ms;
}

/** Effective window rule: valid_to must be later than valid_from. */
export function checkValidityWindow(validFrom: number, validTo: number | null, errors: FieldError[]): void {
  if (validTo !== null && validTo <= validFrom) {
    errors.push(fieldError('valid_to', 'invalid_value', 'valid_to must be later than valid_from'));
  }
}

/** Every accepted write advances updated_at, strictly, so it works as an optimistic-concurrency token. */
export function nextUpdatedAt(previous: number, now: number): number {
  return now > previous ? now : previous + 1;
}

/** Nesting depth of a JSON value, computed iteratively (a recursive walk could overflow the stack). */
function depthExceeds(value: unknown, max: number): boolean {
  const stack: Array<{ node: unknown; depth: number }> = [{ node: value, depth: 1 }];
  while (stack.length > 0) {
    const { node, depth } = stack.pop()!;
    if (node === null || typeof node !== 'object') continue;
    if (depth > max) return true;
    for (const child of Array.isArray(node) ? node : Object.values(node)) {
      if (child !== null && typeof child === 'object') stack.push({ node: child, depth: depth + 1 });
    }
  }
  return false;
}

/**
 * The metadata rule beyond "is an object" (the schema says that): bounded nesting, so that storing
 * (JSON.stringify) and every later read stay safe. Runs as a body `check`, on possibly ill-typed input.
 */
export function metadataErrors(body: Record<string, unknown>): FieldError[] {
  const metadata = body.metadata;
  if (metadata === null || typeof metadata !== 'object' || Array.isArray(metadata)) return [];
  if (!depthExceeds(metadata, METADATA_MAX_DEPTH)) return [];
  return [
    fieldError('metadata', 'invalid_value', `metadata must not be nested deeper than ${METADATA_MAX_DEPTH} levels`, {
      max_depth: METADATA_MAX_DEPTH,
    }),
  ];
}

function parsedTime(value: unknown): number | undefined {
  if (typeof value !== 'string') return undefined;
  const parsed = parseTimestamp(value);
  return parsed === undefined || parsed.sentinel ? undefined : parsed.ms;
}

/**
 * The window rule as a body `check`, reported together with the schema's failures. On create pass
 * `defaultValidFrom` (now: valid_from defaults to it); on PATCH it applies only when both are sent
 * (the handler checks the merged row).
 */
export function bodyWindowErrors(body: Record<string, unknown>, defaultValidFrom?: number): FieldError[] {
  if (body.valid_to === undefined || body.valid_to === null) return [];
  const validTo = parsedTime(body.valid_to);
  const validFrom = body.valid_from === undefined ? defaultValidFrom : parsedTime(body.valid_from);
  if (validTo === undefined || validFrom === undefined) return [];
  const errors: FieldError[] = [];
  checkValidityWindow(validFrom, validTo, errors);
  return errors;
}
