import t from 'tap';
import { fieldCodes, key, startAssets } from '../helpers/assets.js';

type Case = {
  name: string;
  body: Record<string, unknown>;
  fields: Array<[string, string]>;
  message?: RegExp;
  params?: Record<string, unknown>;
};

const nested = (depth: number): Record<string, unknown> => {
  let value: Record<string, unknown> = {};
  for (let i = 1; i < depth; i++) value = { n: value };
  return value;
};

/** POST /api/v1/assets bodies (a valid `name` is added unless the case is about name). */
const createCases: Case[] = [
  { name: 'name omitted', body: { name: undefined }, fields: [['name', 'required']] },
  {
    name: 'name null',
    body: { name: null },
    fields: [['name', 'invalid_value']],
    params: { expected_type: 'string', received_type: 'null' },
  },
  {
    name: 'name wrong JSON type',
    body: { name: 5 },
    fields: [['name', 'invalid_value']],
    params: { expected_type: 'string', received_type: 'number' },
  },
  { name: 'name empty', body: { name: '' }, fields: [['name', 'too_short']], params: { min_length: 1 } },
  { name: 'name too long', body: { name: 'n'.repeat(256) }, fields: [['name', 'too_long']] },
  { name: 'name leading space', body: { name: ' Forklift' }, fields: [['name', 'invalid_value']] },
  { name: 'name trailing space', body: { name: 'Forklift ' }, fields: [['name', 'invalid_value']] },
  { name: 'name with tab', body: { name: 'Fork\tlift' }, fields: [['name', 'invalid_value']] },
  { name: 'name with newline', body: { name: 'Fork\nlift' }, fields: [['name', 'invalid_value']] },
  { name: 'name with DEL', body: { name: 'Fork\u007flift' }, fields: [['name', 'invalid_value']] },
  { name: 'description empty', body: { description: '' }, fields: [['description', 'too_short']], params: { min_length: 1 } },
  { name: 'description with a C0 control', body: { description: 'a\u0001b' }, fields: [['description', 'invalid_value']] },
  { name: 'description with DEL', body: { description: 'a\u007f' }, fields: [['description', 'invalid_value']] },
  { name: 'external_key underscore', body: { external_key: 'A_B' }, fields: [['external_key', 'invalid_value']] },
  { name: 'external_key period', body: { external_key: 'A.B' }, fields: [['external_key', 'invalid_value']] },
  { name: 'external_key slash', body: { external_key: 'A/B' }, fields: [['external_key', 'invalid_value']] },
  { name: 'external_key colon', body: { external_key: 'A:B' }, fields: [['external_key', 'invalid_value']] },
  { name: 'external_key whitespace', body: { external_key: 'A B' }, fields: [['external_key', 'invalid_value']] },
  { name: 'external_key comma', body: { external_key: 'A,B' }, fields: [['external_key', 'invalid_value']] },
  { name: 'external_key empty', body: { external_key: '' }, fields: [['external_key', 'too_short']] },
  {
    name: 'external_key too long',
    body: { external_key: 'K'.repeat(256) },
    fields: [['external_key', 'too_long']],
    params: { max_length: 255 },
  },
  { name: 'external_key null', body: { external_key: null }, fields: [['external_key', 'invalid_value']] },
  { name: 'is_active null', body: { is_active: null }, fields: [['is_active', 'invalid_value']] },
  {
    name: 'is_active as a string',
    body: { is_active: 'true' },
    fields: [['is_active', 'invalid_value']],
    params: { expected_type: 'boolean', received_type: 'string' },
  },
  {
    name: 'metadata array',
    body: { metadata: [] },
    fields: [['metadata', 'invalid_value']],
    params: { expected_type: 'object', received_type: 'array' },
  },
  { name: 'metadata number', body: { metadata: 5 }, fields: [['metadata', 'invalid_value']] },
  { name: 'metadata string', body: { metadata: 'x' }, fields: [['metadata', 'invalid_value']] },
  { name: 'metadata boolean', body: { metadata: true }, fields: [['metadata', 'invalid_value']] },
  { name: 'metadata null', body: { metadata: null }, fields: [['metadata', 'invalid_value']] },
  { name: 'metadata nested too deep', body: { metadata: nested(33) }, fields: [['metadata', 'invalid_value']], message: /deeper than 32/ },
  { name: 'valid_from null', body: { valid_from: null }, fields: [['valid_from', 'invalid_value']] },
  {
    name: 'valid_from date only',
    body: { valid_from: '2026-01-01' },
    fields: [['valid_from', 'invalid_value']],
    message: /must be an RFC 3339 timestamp/,
  },
  {
    name: 'valid_from with slashes',
    body: { valid_from: '2026/01/01T00:00:00Z' },
    fields: [['valid_from', 'invalid_value']],
    message: /RFC 3339/,
  },
  { name: 'valid_from empty', body: { valid_from: '' }, fields: [['valid_from', 'invalid_value']], message: /RFC 3339/ },
  {
    name: 'valid_from year-one sentinel',
    body: { valid_from: '0001-01-01T00:00:00Z' },
    fields: [['valid_from', 'invalid_value']],
    message: /0001-01-01T00:00:00Z.*omit the field/,
  },
  {
    name: 'valid_from year 0000',
    body: { valid_from: '0000-01-01T00:00:00Z' },
    fields: [['valid_from', 'invalid_value']],
    message: /0000-01-01T00:00:00Z is outside the years 0001 to 9999/,
  },
  {
    name: 'valid_from before year 1 by its offset',
    body: { valid_from: '0001-01-01T00:30:00+01:00' },
    fields: [['valid_from', 'invalid_value']],
    message: /outside the years 0001 to 9999/,
  },
  {
    name: 'valid_to past year 9999 by its offset',
    body: { valid_to: '9999-12-31T23:30:00-01:00' },
    fields: [['valid_to', 'invalid_value']],
    message: /9999-12-31T23:30:00-01:00 is outside the years/,
  },
  {
    name: 'valid_to extended year',
    body: { valid_to: '+275760-09-13T00:00:00Z' },
    fields: [['valid_to', 'invalid_value']],
    message: /must be an RFC 3339 timestamp/,
  },
  {
    name: 'valid_from epoch sentinel by instant',
    body: { valid_from: '1970-01-01T01:00:00+01:00' },
    fields: [['valid_from', 'invalid_value']],
    message: /1970-01-01T01:00:00\+01:00.*omit the field/,
  },
  {
    name: 'valid_to epoch sentinel',
    body: { valid_to: '1970-01-01T00:00:00.000Z' },
    fields: [['valid_to', 'invalid_value']],
    message: /use null/,
  },
  {
    name: 'valid_to before valid_from',
    body: { valid_from: '2026-01-02T00:00:00Z', valid_to: '2026-01-01T00:00:00Z' },
    fields: [['valid_to', 'invalid_value']],
    message: /later than valid_from/,
  },
  {
    name: 'valid_to equal to valid_from (other offset)',
    body: { valid_from: '2026-01-02T00:00:00Z', valid_to: '2026-01-02T02:00:00+02:00' },
    fields: [['valid_to', 'invalid_value']],
  },
  {
    name: 'valid_to in the past with the default valid_from',
    body: { valid_to: '2020-01-01T00:00:00Z' },
    fields: [['valid_to', 'invalid_value']],
  },
  { name: 'unknown field', body: { colour: 'red' }, fields: [['colour', 'unknown_field']] },
  {
    name: 'location_id',
    body: { location_id: 5 },
    fields: [['location_id', 'read_only']],
    message: /fixed-reader pipeline.*handheld submission/,
  },
  {
    name: 'location_external_key',
    body: { location_external_key: 'L-1' },
    fields: [['location_external_key', 'read_only']],
    message: /fixed-reader pipeline.*handheld submission/,
  },
  { name: 'location_id null is still present', body: { location_id: null }, fields: [['location_id', 'read_only']] },
  { name: 'tags not an array', body: { tags: {} }, fields: [['tags', 'invalid_value']] },
  {
    name: 'more than 100 tags',
    body: { tags: Array.from({ length: 101 }, (_, i) => ({ tag_type: 'rfid', value: `V${i}` })) },
    fields: [['tags', 'too_long']],
  },
  { name: 'tag without tag_type', body: { tags: [{ value: 'V' }] }, fields: [['tags[0].tag_type', 'required']] },
  { name: 'tag with null tag_type', body: { tags: [{ tag_type: null, value: 'V' }] }, fields: [['tags[0].tag_type', 'required']] },
  {
    name: 'tag with another tag_type',
    body: { tags: [{ tag_type: 'nfc', value: 'V' }] },
    fields: [['tags[0].tag_type', 'invalid_value']],
    params: { allowed_values: ['rfid', 'ble', 'barcode'] },
  },
  { name: 'tag without value', body: { tags: [{ tag_type: 'rfid' }] }, fields: [['tags[0].value', 'required']] },
  { name: 'tag value empty', body: { tags: [{ tag_type: 'ble', value: '' }] }, fields: [['tags[0].value', 'too_short']] },
  { name: 'tag value too long', body: { tags: [{ tag_type: 'ble', value: 'v'.repeat(256) }] }, fields: [['tags[0].value', 'too_long']] },
  { name: 'tag value with NUL', body: { tags: [{ tag_type: 'barcode', value: 'a\u0000' }] }, fields: [['tags[0].value', 'invalid_value']] },
  {
    name: 'tag with an unknown key',
    body: { tags: [{ tag_type: 'rfid', value: 'V', is_active: true }] },
    fields: [['tags[0].is_active', 'unknown_field']],
  },
];

t.test('asset validation', async (t) => {
  const api = await startAssets(t);

  t.test('POST /api/v1/assets: one case per rule', async (t) => {
    for (const c of createCases) {
      const body: Record<string, unknown> = { name: 'Forklift', ...c.body };
      if (body.name === undefined) delete body.name;
      const res = await api.req('POST', '/api/v1/assets', body);
      t.equal(res.status, 400, `${c.name}: status`);
      t.equal(res.json?.error?.type, 'validation_error', `${c.name}: type`);
      t.same(fieldCodes(res), c.fields, `${c.name}: fields`);
      if (c.message) t.match(res.json.error.fields[0].message, c.message, `${c.name}: message`);
      if (c.params) t.match(res.json.error.fields[0].params, c.params, `${c.name}: params`);
    }
    const list = await api.req('GET', '/api/v1/assets?include_deleted=true');
    t.equal(list.json.total_count, 0, 'no rejected create left a row behind');
  });

  t.test('accepted edge values', async (t) => {
    const asset = await api.create({
      name: 'Fork lift 2',
      description: 'line one\n\tline two\r\n',
      metadata: nested(32),
      valid_from: '2026-01-01T10:00:00.123999999+02:00',
      valid_to: '2099-12-31T23:59:59Z',
      tags: [{ tag_type: 'barcode', value: 'has\ttab and, comma/slash' }],
    });
    t.equal(asset.valid_from, '2026-01-01T08:00:00.123Z', 'offset applied, sub-millisecond digits truncated, never rounded');
    t.equal(asset.valid_to, '2099-12-31T23:59:59.000Z', 'outbound .NNNZ even without input fraction');
    t.equal(asset.description, 'line one\n\tline two\r\n');
    t.same(
      asset.tags.map((tag: any) => tag.value),
      ['has\ttab and, comma/slash'],
    );
  });

  t.test('absurdly deep or overflowing values are refused cleanly', async (t) => {
    const depth = 100_000;
    const deep = `{"name":"Deep","metadata":${'{"n":'.repeat(depth)}1${'}'.repeat(depth)}}`;
    const res = await api.req('POST', '/api/v1/assets', deep);
    t.same([res.status, fieldCodes(res)], [400, [['metadata', 'invalid_value']]], 'no stack overflow, no 500');
    const deepArray = `{"name":"Deep","metadata":{"a":${'['.repeat(depth)}${']'.repeat(depth)}}}`;
    t.same(fieldCodes(await api.req('POST', '/api/v1/assets', deepArray)), [['metadata', 'invalid_value']]);
    const asset = await api.create({ name: 'Echo overflow' });
    const overflow = await api.req('PATCH', `/api/v1/assets/${asset.id}`, `{"id": 99999999999999999999}`);
    t.same([overflow.status, fieldCodes(overflow)], [400, [['id', 'invalid_value']]], 'int64 overflow of an echoed id');
    const fraction = await api.req('PATCH', `/api/v1/assets/${asset.id}`, { id: 1.5 });
    t.same(fieldCodes(fraction), [['id', 'invalid_value']]);
  });

  t.test('several failures are reported together', async (t) => {
    const res = await api.req('POST', '/api/v1/assets', {
      name: '',
      external_key: 'a_b',
      metadata: [],
      location_id: 1,
      tags: [{ tag_type: null, value: 'x' }],
    });
    t.equal(res.status, 400);
    t.same(fieldCodes(res), [
      ['external_key', 'invalid_value'],
      ['name', 'too_short'],
      ['metadata', 'invalid_value'],
      ['tags[0].tag_type', 'required'],
      ['location_id', 'read_only'],
    ]);
    t.match(res.json.error.detail, /\(and 4 more validation errors\)$/);
  });

  t.test('body and content type failures', async (t) => {
    const notJson = await api.req('POST', '/api/v1/assets', '{"name":');
    t.same([notJson.status, notJson.json.error.type, notJson.json.error.detail], [400, 'bad_request', 'Request body is not valid JSON']);
    t.notOk(notJson.json.error.fields, 'bad_request has no fields[]');
    const array = await api.req('POST', '/api/v1/assets', [{ name: 'x' }]);
    t.same([array.status, array.json.error.type], [400, 'bad_request']);
    for (const contentType of ['application/merge-patch+json', 'multipart/form-data', null]) {
      const res = await api.req('POST', '/api/v1/assets', { name: 'x' }, { contentType });
      t.equal(res.status, 415, `POST with ${contentType}`);
      t.equal(res.json.error.type, 'unsupported_media_type');
      t.match(res.json.error.detail, /application\/json/);
    }
    const asset = await api.create({ name: 'Patch target' });
    for (const contentType of ['application/json', 'text/plain', null]) {
      const res = await api.req('PATCH', `/api/v1/assets/${asset.id}`, { name: 'x' }, { contentType });
      t.equal(res.status, 415, `PATCH with ${contentType}`);
      t.match(res.json.error.detail, /application\/merge-patch\+json on PATCH operations/);
    }
    const literalNull = await api.req('PATCH', `/api/v1/assets/${asset.id}`, 'null');
    t.same(
      [literalNull.status, literalNull.json.error.type, literalNull.json.error.detail],
      [400, 'bad_request', 'Request body must be a JSON object (RFC 7396)'],
    );
  });

  t.test('PATCH: one case per rule', async (t) => {
    const asset = await api.create({ name: 'Patch rules', valid_from: '2026-01-01T00:00:00Z' });
    const cases: Case[] = [
      { name: 'name null', body: { name: null }, fields: [['name', 'invalid_value']] },
      { name: 'is_active null', body: { is_active: null }, fields: [['is_active', 'invalid_value']] },
      { name: 'metadata null (clear is {})', body: { metadata: null }, fields: [['metadata', 'invalid_value']] },
      { name: 'metadata array', body: { metadata: [1] }, fields: [['metadata', 'invalid_value']] },
      { name: 'valid_from null', body: { valid_from: null }, fields: [['valid_from', 'invalid_value']] },
      { name: 'description empty (clear is null)', body: { description: '' }, fields: [['description', 'too_short']] },
      {
        name: 'valid_from sentinel',
        body: { valid_from: '0001-01-01T00:00:00Z' },
        fields: [['valid_from', 'invalid_value']],
        message: /leave it unchanged/,
      },
      {
        name: 'valid_to sentinel',
        body: { valid_to: '1970-01-01T00:00:00Z' },
        fields: [['valid_to', 'invalid_value']],
        message: /use null/,
      },
      {
        name: 'valid_to not after the stored valid_from',
        body: { valid_to: '2025-12-31T00:00:00Z' },
        fields: [['valid_to', 'invalid_value']],
      },
      {
        name: 'valid_from moved past the stored valid_to',
        body: { valid_to: '2026-06-01T00:00:00Z', valid_from: '2026-07-01T00:00:00Z' },
        fields: [['valid_to', 'invalid_value']],
      },
      { name: 'unknown field', body: { colour: 'red' }, fields: [['colour', 'unknown_field']] },
      { name: 'location_id', body: { location_id: 3 }, fields: [['location_id', 'read_only']], message: /handheld submission/ },
      { name: 'location_external_key', body: { location_external_key: 'L' }, fields: [['location_external_key', 'read_only']] },
    ];
    for (const c of cases) {
      const res = await api.req('PATCH', `/api/v1/assets/${asset.id}`, c.body);
      t.equal(res.status, 400, `${c.name}: status`);
      t.equal(res.json?.error?.type, 'validation_error', `${c.name}: type`);
      t.same(fieldCodes(res), c.fields, `${c.name}: fields`);
      if (c.message) t.match(res.json.error.fields[0].message, c.message, `${c.name}: message`);
    }
    const after = await api.req('GET', `/api/v1/assets/${asset.id}`);
    t.same(after.json.data, asset, 'no rejected PATCH changed anything, updated_at included');
  });

  t.test('path ids and query parameters', async (t) => {
    for (const [id, code] of [
      ['0', 'too_small'],
      ['-1', 'too_small'],
      ['abc', 'invalid_value'],
      ['2147483648', 'too_large'],
    ]) {
      const res = await api.req('GET', `/api/v1/assets/${id}`);
      t.same([res.status, res.json.error.type, fieldCodes(res)], [400, 'validation_error', [['asset_id', code]]], `asset_id ${id}`);
    }
    const missing = await api.req('GET', '/api/v1/assets/2147483647');
    t.same([missing.status, missing.json.error.type], [404, 'not_found']);
    const detail = await api.req('GET', '/api/v1/assets/1?include_deleted=true&q=x&colour=red');
    t.same(fieldCodes(detail), [
      ['include_deleted', 'invalid_context'],
      ['q', 'invalid_context'],
      ['colour', 'unknown_field'],
    ]);
    const onWrite = await api.req('POST', `/api/v1/assets?external_key=${key('A')}`, { name: 'x' });
    t.same(fieldCodes(onWrite), [['external_key', 'invalid_context']], 'list filter on a write endpoint');
  });
});
