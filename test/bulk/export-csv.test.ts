/**
 * The asset export's CSV, built by SQLite (src/bulk/export.ts ASSET_CSV_LINE_SQL), byte for byte as
 * the JavaScript path before it wrote it: the import's columns, each cell quoted when it holds a
 * comma, a quote, CR or LF (quotes doubled), tab and unicode as they are, null description and
 * valid_to empty, metadata as stored, the live tags `type:value` in id order joined by `;`.
 * Table-driven: each row an asset's create body and its expected cells, written out by hand.
 */
import t from 'tap';
import { startTrackd } from '../helpers/trackd.js';

const HEADER = 'external_key,name,description,is_active,metadata,valid_from,valid_to,tags';
const FROM = '2026-01-02T03:04:05.006Z';
const tags = (...pairs: [string, string][]) => pairs.map(([tag_type, value]) => ({ tag_type, value }));

const CASES: { body: Record<string, unknown>; cells: string[] }[] = [
  { body: { external_key: 'C-PLAIN', name: 'Plain' }, cells: ['C-PLAIN', 'Plain', '', 'true', '{}', FROM, '', ''] },
  { body: { external_key: 'C-COMMA', name: 'Comma, name' }, cells: ['C-COMMA', '"Comma, name"', '', 'true', '{}', FROM, '', ''] },
  { body: { external_key: 'C-QUOTE', name: 'Say "hi"' }, cells: ['C-QUOTE', '"Say ""hi"""', '', 'true', '{}', FROM, '', ''] },
  { body: { external_key: 'C-LF', name: 'LF', description: 'one\ntwo' }, cells: ['C-LF', 'LF', '"one\ntwo"', 'true', '{}', FROM, '', ''] },
  { body: { external_key: 'C-CR', name: 'CR', description: 'one\rtwo' }, cells: ['C-CR', 'CR', '"one\rtwo"', 'true', '{}', FROM, '', ''] },
  {
    body: { external_key: 'C-CRLF', name: 'CRLF', description: 'a "b", c\r\nd' },
    cells: ['C-CRLF', 'CRLF', '"a ""b"", c\r\nd"', 'true', '{}', FROM, '', ''],
  },
  {
    body: { external_key: 'C-TAB', name: 'Tab', description: 'tab\there' },
    cells: ['C-TAB', 'Tab', 'tab\there', 'true', '{}', FROM, '', ''],
  },
  {
    body: { external_key: 'C-UNI', name: 'Ünïcödé 🚜 ключ', description: 'é, 🚜' },
    cells: ['C-UNI', 'Ünïcödé 🚜 ключ', '"é, 🚜"', 'true', '{}', FROM, '', ''],
  },
  {
    body: { external_key: 'C-META', name: 'Meta', metadata: { s: 'a,b', q: 'x"y', n: [1, 2.5, null, true], k: 'значение' } },
    cells: ['C-META', 'Meta', '', 'true', '"{""s"":""a,b"",""q"":""x\\""y"",""n"":[1,2.5,null,true],""k"":""значение""}"', FROM, '', ''],
  },
  {
    body: {
      external_key: 'C-OFF',
      name: 'Off',
      is_active: false,
      valid_from: '1901-03-04T05:06:07.089Z',
      valid_to: '9999-12-31T23:59:59.999Z',
    },
    cells: ['C-OFF', 'Off', '', 'false', '{}', '1901-03-04T05:06:07.089Z', '9999-12-31T23:59:59.999Z', ''],
  },
  {
    body: {
      external_key: 'C-TAGS',
      name: 'Tags',
      tags: tags(['rfid', 'C-R1'], ['ble', 'C-B1']),
    },
    cells: ['C-TAGS', 'Tags', '', 'true', '{}', FROM, '', 'rfid:C-R1;ble:C-B1'],
  },
  {
    body: {
      external_key: 'C-TAGQ',
      name: 'Tag quotes',
      tags: tags(['barcode', 'C,2'], ['rfid', 'C"3']),
    },
    cells: ['C-TAGQ', 'Tag quotes', '', 'true', '{}', FROM, '', '"barcode:C,2;rfid:C""3"'],
  },
  {
    body: {
      external_key: 'C-TAGLF',
      name: 'Tag LF',
      tags: tags(['ble', 'C\nLF'], ['rfid', 'C\rCR']),
    },
    cells: ['C-TAGLF', 'Tag LF', '', 'true', '{}', FROM, '', '"ble:C\nLF;rfid:C\rCR"'],
  },
];

t.test('asset CSV export: the cells byte for byte', async (t) => {
  const trackd = await startTrackd(t);
  const org = await trackd.createOrg('Export CSV');
  const { token } = await trackd.createKey(org.id);
  for (const { body } of CASES) {
    const res = await trackd.request('POST', '/api/v1/assets', { token, body: { valid_from: FROM, ...body } });
    t.equal(res.status, 201, `${String(body.external_key)} ${res.text}`);
  }
  const expected = `${HEADER}\n${CASES.map((c) => `${c.cells.join(',')}\n`).join('')}`;
  const keys = CASES.map((c) => `external_key=${String(c.body.external_key)}`).join('&');
  // Filtered by key (the org's index) and whole (the org is the shard's only one: walksTable): the same bytes.
  for (const [label, url] of [
    ['by key', `/api/v1/assets/export?${keys}`],
    ['the whole org', '/api/v1/assets/export'],
  ] as const) {
    const res = await trackd.request('GET', url, { token, headers: { accept: 'text/csv' } });
    t.equal(res.status, 200);
    const got = res.text.split('\n');
    const want = expected.split('\n');
    // Line by line first (a readable failure), then the whole body.
    for (let i = 0; i < want.length; i++) if (got[i] !== want[i]) t.equal(got[i], want[i], `${label}: line ${i + 1}`);
    t.equal(res.text, expected, `${label}: the whole body`);
  }
  // A deleted tag leaves the cell; the CSV of a deleted asset (include_deleted) keeps its columns.
  const listed = (await trackd.request('GET', '/api/v1/assets?external_key=C-TAGS', { token })).json.data[0];
  const ble = listed.tags.find((tag: { tag_type: string }) => tag.tag_type === 'ble');
  const del = await trackd.request('DELETE', `/api/v1/assets/${listed.id}/tags/${ble.id}`, { token });
  t.equal(del.status, 204, del.text);
  const after = await trackd.request('GET', '/api/v1/assets/export?external_key=C-TAGS', { token, headers: { accept: 'text/csv' } });
  t.equal(after.text, `${HEADER}\nC-TAGS,Tags,,true,{},${FROM},,rfid:C-R1\n`);
});
