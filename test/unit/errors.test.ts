/** Error mapping: every domain error to its interface type and status, anything else to a generic 500, one envelope. */
import t from 'tap';
import { ApiError, ERROR_TYPES, fieldError, throwIfInvalid } from '../../src/errors/catalog.js';
import { conflict, DomainError, invalid, notFound, unavailable } from '../../src/errors/domain.js';
import { asApiError, errorEnvelope } from '../../src/errors/envelope.js';

t.test('domain errors map to the interface types, with their status and headers', async (t) => {
  const name = fieldError('name', 'required', 'name is required');
  const cases: [string, unknown, { type: string; status: number; headers?: Record<string, string> }][] = [
    ['not found', notFound('Asset not found'), { type: 'not_found', status: 404 }],
    ['conflict', conflict('external_key already exists'), { type: 'conflict', status: 409 }],
    ['invalid', invalid([name]), { type: 'validation_error', status: 400 }],
    ['unavailable, no retry hint', unavailable('disk full'), { type: 'service_unavailable', status: 503 }],
    [
      'unavailable, retry in 5 s',
      unavailable('disk full', 5),
      { type: 'service_unavailable', status: 503, headers: { 'Retry-After': '5' } },
    ],
    ['an ApiError as it is', new ApiError('rate_limited', 'slow down'), { type: 'rate_limited', status: 429 }],
  ];
  for (const [label, err, expected] of cases) {
    const api = asApiError(err);
    t.equal(api.type, expected.type, `${label}: type`);
    t.equal(api.status, expected.status, `${label}: status`);
    t.same(api.headers, expected.headers, `${label}: headers`);
  }
  t.same(asApiError(invalid([name])).fields, [name], 'invalid keeps its fields');
});

t.test('anything else is a 500 whose detail reveals nothing', async (t) => {
  for (const thrown of [new Error('SQLITE_CORRUPT at /var/lib/trackd/shard-1.sqlite'), 'a string', undefined, { code: 'EIO' }]) {
    const api = asApiError(thrown);
    t.equal(api.type, 'internal_error');
    t.equal(api.status, 500);
    t.notMatch(api.detail, /SQLITE|\/var|EIO|string/, 'no internals in the detail');
  }
});

t.test('a validation detail is the first message plus the count of the rest', async (t) => {
  const a = fieldError('name', 'required', 'name is required');
  const b = fieldError('valid_to', 'invalid_value', 'valid_to must be after valid_from');
  const c = fieldError('color', 'unknown_field', 'color is not a recognized field');
  t.equal(invalid([a]).detail, 'name is required');
  t.equal(invalid([a, b]).detail, 'name is required (and 1 more validation errors)');
  t.equal(ApiError.validation([a, b, c]).detail, 'name is required (and 2 more validation errors)');
  t.doesNotThrow(() => throwIfInvalid([]), 'no field, no error');
  t.throws(() => throwIfInvalid([a]), DomainError, 'a field failed');
});

t.test('the envelope: type, title and status from the catalog, fields only when there are some', async (t) => {
  const plain = errorEnvelope(new ApiError('not_found', 'Asset not found'), '/api/v1/assets/9', 'req-1');
  t.same(plain, {
    error: {
      type: 'not_found',
      title: 'Not found',
      status: 404,
      detail: 'Asset not found',
      instance: '/api/v1/assets/9',
      request_id: 'req-1',
    },
  });
  const fields = [fieldError('name', 'required', 'name is required')];
  const withFields = errorEnvelope(ApiError.validation(fields), '/api/v1/assets', 'req-2');
  t.same(withFields.error.fields, fields);
  t.equal(withFields.error.title, 'Validation failed');
  for (const [type, { status, title }] of Object.entries(ERROR_TYPES)) {
    const env = errorEnvelope(new ApiError(type as keyof typeof ERROR_TYPES, 'x'), '/', 'r');
    t.same([env.error.status, env.error.title], [status, title], type);
    t.ok(status >= 400 && status < 600, `${type}: an error status`);
  }
});
