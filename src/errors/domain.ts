/**
 * The errors of trackd's domain and storage code: what went wrong in the service's own words (not
 * found, conflict, invalid fields, unavailable), with no HTTP in them. One function at the edge
 * (asApiError in envelope.ts) maps each to the interface's error type and status.
 */

export type FieldCode =
  | 'required'
  | 'invalid_value'
  | 'unknown_field'
  | 'invalid_context'
  | 'too_short'
  | 'too_long'
  | 'too_small'
  | 'too_large'
  | 'fk_not_found'
  | 'ambiguous_fields'
  | 'read_only'
  /** A bulk import row whose key or tag is held by another live row, or repeats an earlier row of the same file (additive code). */
  | 'conflict';

export interface FieldError {
  field: string;
  code: FieldCode;
  message: string;
  params?: Record<string, unknown>;
}

export function fieldError(field: string, code: FieldCode, message: string, params?: Record<string, unknown>): FieldError {
  return params === undefined ? { field, code, message } : { field, code, message, params };
}

export type DomainErrorKind = 'not_found' | 'conflict' | 'invalid' | 'unavailable';

export class DomainError extends Error {
  constructor(
    readonly kind: DomainErrorKind,
    readonly detail: string,
    readonly fields?: FieldError[],
    /** For `unavailable`: when a retry may succeed. */
    readonly retryAfterSeconds?: number,
  ) {
    super(detail);
    this.name = 'DomainError';
  }
}

export const notFound = (detail: string): DomainError => new DomainError('not_found', detail);

export const conflict = (detail: string): DomainError => new DomainError('conflict', detail);

export const unavailable = (detail: string, retryAfterSeconds?: number): DomainError =>
  new DomainError('unavailable', detail, undefined, retryAfterSeconds);

/** Invalid fields; the detail is the first field's message plus the count of the rest. */
export function invalid(fields: FieldError[]): DomainError {
  const [first] = fields;
  if (first === undefined) throw new Error('invalid() needs at least one field');
  const rest = fields.length - 1;
  return new DomainError('invalid', rest > 0 ? `${first.message} (and ${rest} more validation errors)` : first.message, fields);
}

/** Throws when any field failed; lets a rule collect every failure first. */
export function throwIfInvalid(fields: FieldError[]): void {
  if (fields.length > 0) throw invalid(fields);
}
