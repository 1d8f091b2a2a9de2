/**
 * The error types of the interface, plus additive types (new error types are additive within v1): `payload_too_large` (body
 * limit), `request_timeout` (body not received in time), `service_unavailable` (shutting down),
 * `cursor_expired` (an event cursor older than the log's retention) and `upgrade_required` (a plain
 * request on the events WebSocket's path).
 */
export const ERROR_TYPES = {
  validation_error: { status: 400, title: 'Validation failed' },
  bad_request: { status: 400, title: 'Bad request' },
  unauthorized: { status: 401, title: 'Unauthorized' },
  forbidden: { status: 403, title: 'Forbidden' },
  not_found: { status: 404, title: 'Not found' },
  method_not_allowed: { status: 405, title: 'Method not allowed' },
  conflict: { status: 409, title: 'Conflict' },
  cursor_expired: { status: 410, title: 'Cursor expired' },
  request_timeout: { status: 408, title: 'Request timeout' },
  payload_too_large: { status: 413, title: 'Payload too large' },
  upgrade_required: { status: 426, title: 'Upgrade required' },
  unsupported_media_type: { status: 415, title: 'Unsupported media type' },
  missing_org_context: { status: 422, title: 'Missing org context' },
  rate_limited: { status: 429, title: 'Rate limited' },
  internal_error: { status: 500, title: 'Internal server error' },
  service_unavailable: { status: 503, title: 'Service unavailable' },
} as const;

export type ErrorType = keyof typeof ERROR_TYPES;

export { fieldError, throwIfInvalid, type FieldCode, type FieldError } from './domain.js';
import { invalid, type FieldError } from './domain.js';

/** The one error type that flows to the wire. Anything else thrown becomes internal_error. */
export class ApiError extends Error {
  readonly type: ErrorType;
  readonly status: number;
  readonly detail: string;
  readonly fields: FieldError[] | undefined;
  readonly headers: Record<string, string> | undefined;

  constructor(type: ErrorType, detail: string, options: { fields?: FieldError[]; headers?: Record<string, string> } = {}) {
    super(detail);
    this.type = type;
    this.status = ERROR_TYPES[type].status;
    this.detail = detail;
    this.fields = options.fields;
    this.headers = options.headers;
  }

  /** A validation_error whose detail is the first field's message plus the count of the rest. */
  static validation(fields: FieldError[]): ApiError {
    return new ApiError('validation_error', invalid(fields).detail, { fields });
  }

  static notFound(detail = 'Resource not found'): ApiError {
    return new ApiError('not_found', detail);
  }

  static conflict(detail: string): ApiError {
    return new ApiError('conflict', detail);
  }
}
