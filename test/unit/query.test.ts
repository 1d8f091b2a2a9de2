/** Query strings: decoding, paging bounds, sort terms, ids, external keys, unknown and misplaced names. */
import t from 'tap';
import type { FieldError } from '../../src/errors/catalog.js';
import { ID_MAX, pagingParams, parseQuery, parsePathId, splitQuery } from '../../src/http/query.js';
import { masterListParams, substringMatch } from '../../src/masterdata/filters.js';

const LIST = masterListParams(['name', 'created_at', 'external_key'], 'name');
const DETAIL = {};

function parse(raw: string, spec = LIST): { values: Record<string, unknown>; errors: FieldError[] } {
  const errors: FieldError[] = [];
  const values = parseQuery(raw, spec, errors);
  return { values, errors };
}

const codes = (errors: FieldError[]) => errors.map((e) => `${e.field}:${e.code}`);

t.test('paging: defaults, and the bounds of limit and offset', async (t) => {
  t.match(parse('').values, { limit: 50, offset: 0, sort: [{ field: 'name', desc: false }], include_deleted: false });
  const cases: [string, string[] | Record<string, unknown>][] = [
    ['limit=1', { limit: 1 }],
    ['limit=200', { limit: 200 }],
    ['limit=0', ['limit:too_small']],
    ['limit=201', ['limit:too_large']],
    ['limit=-1', ['limit:too_small']],
    ['limit=1.5', ['limit:invalid_value']],
    ['limit=', ['limit:invalid_value']],
    ['limit=ten', ['limit:invalid_value']],
    ['offset=0', { offset: 0 }],
    ['offset=-1', ['offset:too_small']],
    [`offset=${ID_MAX}`, { offset: ID_MAX }],
    [`offset=${ID_MAX + 1}`, ['offset:too_large']],
  ];
  for (const [raw, expected] of cases) {
    const { values, errors } = parse(raw);
    if (Array.isArray(expected)) t.same(codes(errors), expected, raw);
    else {
      t.same(errors, [], `${raw}: no error`);
      t.match(values, expected, raw);
    }
  }
});

t.test('sort: comma-separated allowed fields, a leading - for descending', async (t) => {
  t.same(parse('sort=-created_at,name').values.sort, [
    { field: 'created_at', desc: true },
    { field: 'name', desc: false },
  ]);
  for (const raw of ['sort=color', 'sort=name,', 'sort=--name', 'sort=+name', 'sort=']) {
    const { errors } = parse(raw);
    t.same(codes(errors), ['sort:invalid_value'], raw);
    t.same(errors[0]?.params?.allowed_values, ['name', 'created_at', 'external_key'], `${raw}: names the allowed fields`);
  }
});

t.test('booleans are exactly true or false', async (t) => {
  t.equal(parse('is_active=true').values.is_active, true);
  t.equal(parse('is_active=false').values.is_active, false);
  for (const raw of ['is_active=1', 'is_active=TRUE', 'is_active=', 'is_active=yes'])
    t.same(codes(parse(raw).errors), ['is_active:invalid_value'], raw);
  t.equal(parse('').values.is_active, undefined, 'no default: both');
});

t.test('external keys repeat; comma-joined, empty, long or odd ones are refused', async (t) => {
  t.same(parse('external_key=A-1&external_key=b2').values.external_key, ['A-1', 'b2']);
  const cases: [string, string][] = [
    ['external_key=A,B', 'external_key:invalid_value'],
    ['external_key=', 'external_key:too_short'],
    [`external_key=${'k'.repeat(256)}`, 'external_key:too_long'],
    ['external_key=a_b', 'external_key:invalid_value'],
    ['external_key=a%20b', 'external_key:invalid_value'],
  ];
  for (const [raw, code] of cases) t.same(codes(parse(raw).errors), [code], raw.slice(0, 40));
  t.same(parse(`external_key=${'k'.repeat(255)}`).errors, [], '255 characters are fine');
});

t.test('q: only the first is honoured, control characters refused, + is a space', async (t) => {
  t.equal(parse('q=first&q=second').values.q, 'first');
  t.equal(parse('q=a+b').values.q, 'a b');
  t.same(codes(parse('q=a%00b').errors), ['q:invalid_value']);
  t.same(codes(parse('q=%E0%A4%A').errors), ['q:invalid_value'], 'broken percent-encoding');
});

t.test('names: unknown on a list is unknown_field; a list parameter on a detail endpoint is invalid_context', async (t) => {
  t.same(codes(parse('color=red').errors), ['color:unknown_field']);
  t.same(codes(parse('parent_id=3').errors), ['parent_id:unknown_field'], "another list's filter is unknown here");
  t.same(codes(parse('limit=5&color=red', DETAIL).errors), ['limit:invalid_context', 'color:unknown_field']);
  t.same(codes(parse('limit=5', pagingParams(['id'], 'id')).errors), [], 'paging alone is a list');
});

t.test('path ids: 1..2147483647, integers only', async (t) => {
  const cases: [string, number, string[]][] = [
    ['1', 1, []],
    [String(ID_MAX), ID_MAX, []],
    ['0', 0, ['id:too_small']],
    ['-5', 0, ['id:too_small']],
    [String(ID_MAX + 1), 0, ['id:too_large']],
    ['1e3', 0, ['id:invalid_value']],
    ['abc', 0, ['id:invalid_value']],
    ['', 0, ['id:invalid_value']],
  ];
  for (const [text, value, expected] of cases) {
    const errors: FieldError[] = [];
    t.equal(parsePathId('id', text, errors), value, `${JSON.stringify(text)}: value`);
    t.same(codes(errors), expected, `${JSON.stringify(text)}: errors`);
  }
});

t.test('splitting keeps order and repeats, skips empty pieces, reports undecodable names', async (t) => {
  const { params, errors } = splitQuery('a=1&&b=2&a=3&c');
  t.same(
    [...params],
    [
      ['a', ['1', '3']],
      ['b', ['2']],
      ['c', ['']],
    ],
  );
  t.same(errors, []);
  t.same(codes(splitQuery('%ZZ=1').errors), ['%ZZ:invalid_value']);
});

t.test('q matching: LIKE for ASCII (it folds ASCII only), JavaScript lowercase for anything else', async (t) => {
  const ascii = substringMatch('Dock_5%');
  t.match(ascii.sql('name'), /^name LIKE \? ESCAPE/);
  t.equal(ascii.value, '%Dock\\_5\\%%', 'LIKE wildcards in q are escaped');
  const other = substringMatch('ÉTAGÈRE');
  t.match(other.sql('name'), /^instr\(trackd_lower\(name\), \?\) > 0$/);
  t.equal(other.value, 'étagère');
});
