/**
 * Splitting import bodies (src/bulk/records.ts, rowSource.ts): CSV records and NDJSON lines come
 * out the same whatever chunks the body arrives in (quotes, CRLF and multi-byte characters cut
 * anywhere), and the tags cell's form.
 */
import t from 'tap';
import { CsvSplitter, LineSplitter, Utf8Chunks } from '../../src/bulk/records.js';
import { parseTagsCell } from '../../src/bulk/rowSource.js';

function splitCsv(text: string, cuts: number[]): { fields: string[]; unterminated?: boolean }[] {
  const bytes = Buffer.from(text);
  const decoder = new Utf8Chunks();
  const splitter = new CsvSplitter();
  const out = [];
  let at = 0;
  for (const cut of [...cuts, bytes.length]) {
    out.push(...splitter.push(decoder.decode(bytes.subarray(at, cut), false)));
    at = cut;
  }
  out.push(...splitter.push(decoder.decode(Buffer.alloc(0), true)));
  const last = splitter.end();
  if (last !== undefined) out.push(last);
  return out;
}

const CSV_CASES: [string, string, string[][]][] = [
  [
    'plain, LF',
    'a,b\nc,d\n',
    [
      ['a', 'b'],
      ['c', 'd'],
    ],
  ],
  [
    'CRLF',
    'a,b\r\nc,d\r\n',
    [
      ['a', 'b'],
      ['c', 'd'],
    ],
  ],
  [
    'no final newline',
    'a,b\nc,d',
    [
      ['a', 'b'],
      ['c', 'd'],
    ],
  ],
  ['empty cells', ',b,\n', [['', 'b', '']]],
  ['quoted comma and newline', '"a,1","b\nc"\n', [['a,1', 'b\nc']]],
  ['escaped quotes', '"say ""hi""",x\n', [['say "hi"', 'x']]],
  ['a quote inside an unquoted cell stays', 'a"b,c\n', [['a"b', 'c']]],
  ['only quotes', '"",""""\n', [['', '"']]],
  [
    'multi-byte',
    'é,日本\n€,😀\n',
    [
      ['é', '日本'],
      ['€', '😀'],
    ],
  ],
  ['blank line', 'a\n\nb\n', [['a'], [''], ['b']]],
];

t.test('CSV records are the same at every chunk boundary', async (t) => {
  for (const [name, text, expected] of CSV_CASES) {
    const length = Buffer.byteLength(text);
    t.same(
      splitCsv(text, []).map((r) => r.fields),
      expected,
      `${name}: whole`,
    );
    for (let cut = 1; cut < length; cut++) {
      const got = splitCsv(text, [cut]).map((r) => r.fields);
      if (JSON.stringify(got) !== JSON.stringify(expected)) t.same(got, expected, `${name}: cut at byte ${cut}`);
    }
    t.same(
      splitCsv(
        text,
        Array.from({ length: length - 1 }, (_, i) => i + 1),
      ).map((r) => r.fields),
      expected,
      `${name}: one byte at a time`,
    );
  }
});

t.test('a body that ends inside quotes says so; invalid UTF-8 fails', async (t) => {
  t.same(splitCsv('a,"open\n', []), [{ fields: ['a', 'open\n'], unterminated: true }]);
  t.throws(() => new Utf8Chunks().decode(Buffer.from([0x61, 0xff, 0x62]), true), /not valid UTF-8/);
  t.throws(() => new Utf8Chunks().decode(Buffer.from([0xc3]), true), /not valid UTF-8/, 'a character cut off at the end');
});

t.test('NDJSON lines: LF or CRLF, blank lines skipped, the last line without a newline kept', async (t) => {
  const text = '{"a":1}\r\n\n  \n{"b":"x\\ny"}\n{"c":2}';
  for (let cut = 0; cut <= text.length; cut++) {
    const splitter = new LineSplitter();
    const lines = [...splitter.push(text.slice(0, cut)), ...splitter.push(text.slice(cut))];
    const last = splitter.end();
    if (last !== undefined) lines.push(last);
    t.same(lines, ['{"a":1}', '{"b":"x\\ny"}', '{"c":2}'], `cut at ${cut}`);
  }
});

t.test('the tags cell: type:value pairs joined by ;, the value may hold a colon', async (t) => {
  t.same(parseTagsCell('rfid:E200;ble:AA:BB'), [
    { tag_type: 'rfid', value: 'E200' },
    { tag_type: 'ble', value: 'AA:BB' },
  ]);
  t.same(parseTagsCell('rfid'), [{ tag_type: 'rfid' }], 'no colon: no value (the create rules say required)');
  t.same(parseTagsCell('rfid:'), [{ tag_type: 'rfid', value: '' }]);
});
