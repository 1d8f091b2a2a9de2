import { ApiError, ERROR_TYPES, type FieldError } from './catalog.js';

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

/** Normalises anything thrown into an ApiError; unknown errors become a generic internal_error. */
export function asApiError(err: unknown): ApiError {
  if (err instanceof ApiError) return err;
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
