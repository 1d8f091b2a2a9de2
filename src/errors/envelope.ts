import { ApiError, ERROR_TYPES, type FieldError } from './catalog.js';
import { DomainError } from './domain.js';

export interface ErrorEnvelope {
  error: {
    type: string;
    title: string;
    status: number;
    detail: string;
    instance: string;
    request_id: string;
    fields?: FieldError[];
  };
}

const GENERIC_INTERNAL_DETAIL = 'An unexpected error occurred; retry with backoff and quote the request_id if it persists';

/**
 * The edge's one mapping of anything thrown to an ApiError: domain errors to the interface's types,
 * ApiErrors as they are, anything else to a generic internal_error.
 */
export function asApiError(err: unknown): ApiError {
  if (err instanceof ApiError) return err;
  if (err instanceof DomainError) {
    switch (err.kind) {
      case 'not_found':
        return new ApiError('not_found', err.detail);
      case 'conflict':
        return new ApiError('conflict', err.detail);
      case 'invalid':
        return new ApiError('validation_error', err.detail, { fields: err.fields });
      case 'unavailable':
        return new ApiError(
          'service_unavailable',
          err.detail,
          err.retryAfterSeconds === undefined ? {} : { headers: { 'Retry-After': String(err.retryAfterSeconds) } },
        );
    }
  }
  return new ApiError('internal_error', GENERIC_INTERNAL_DETAIL);
}

/** The only place an error body is built. */
export function errorEnvelope(err: ApiError, instance: string, requestId: string): ErrorEnvelope {
  const body: ErrorEnvelope['error'] = {
    type: err.type,
    title: ERROR_TYPES[err.type].title,
    status: err.status,
    detail: err.detail,
    instance,
    request_id: requestId,
  };
  if (err.fields !== undefined) body.fields = err.fields;
  return { error: body };
}
