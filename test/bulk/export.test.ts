/**
 * Exports (issue 16, step 4): every row the list filters select, NDJSON or CSV by Accept, one point
 * in time (writes during a slow download are not in it), the CSV importing back as a no-op, the
 * report's rows as the report lists them, and the read scopes.
 */
import http from 'node:http';
import t from 'tap';
import { runImport } from '../helpers/bulk.js';
import { drained, natsClient, publish, scanBody } from '../helpers/scans.js';
import { startTrackd } from '../helpers/trackd.js';

const ASSETS = 3_000;
const lines = (text: string) => text.split('\n').filter((l) => l !== '');

t.test('exports', async (t) => {
  const trackd = await startTrackd(t);
  const org = await trackd.createOrg('Export');
  const { token } = await trackd.createKey(org.id);
  const get = (url: string, accept?: string) => trackd.request('GET', url, { token, headers: accept === undefined ? {} : { accept } });

  const description = `${'long text, with "quotes", '.repeat(20)}end`;
  let csv = 'external_key,name,description,metadata,tags,is_active\n';
  for (let i = 1; i <= ASSETS; i++) {
    csv += `E-${i},Asset ${i},"${description.replace(/"/g, '""')}","{""n"":${i},""s"":""a,b""}",rfid:ET-${i},${i % 10 === 0 ? 'false' : 'true'}\n`;
  }
  t.match(await runImport(trackd, token, 'assets', csv, { timeoutMs: 60_000 }), { created: ASSETS, failed_rows: 0 });
  const locations =
    'external_key,name,parent_external_key,tags\nX-DOCK,Dock,X-SITE,ble:X-B\nX-SITE,Site,,\nX-SHELF,"Shelf, north",X-DOCK,\n';
  t.match(await runImport(trackd, token, 'locations', locations), { created: 3 });

  await t.test('assets as NDJSON: every asset once, by id, each line the list item', async (t) => {
    const res = await get('/api/v1/assets/export');
    t.equal(res.status, 200);
    t.equal(res.headers.get('content-type'), 'application/x-ndjson');
    t.match(res.headers.get('trackd-export-as-of'), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    const head = (await get('/api/v1/events?after=9007199254740991')).json.last_seq;
    t.equal(
      res.headers.get('trackd-event-sequence'),
      String(head),
      "the event-log sequence it reflects: the org's last, nothing written since",
    );
    t.ok(head >= ASSETS, 'every imported asset recorded its asset.created');
    const items = lines(res.text).map((l) => JSON.parse(l));
    t.equal(items.length, ASSETS);
    t.ok(
      items.every((item, i) => i === 0 || item.id > items[i - 1].id),
      'ordered by id',
    );
    const one = (await get(`/api/v1/assets/${items[41].id}`)).json.data;
    t.same(items[41], one, 'a line is the asset as GET /assets/{id} shows it');
  });

  await t.test('NDJSON lines of unusual assets: the asset as a read shows it', async (t) => {
    const odd = await trackd.createOrg('Export odd');
    const { token } = await trackd.createKey(odd.id);
    const get = (url: string) => trackd.request('GET', url, { token });
    const bodies = [
      {
        external_key: 'ODD-1',
        name: 'Ünïcödé 🚜 "q" \\ back',
        description: 'tab\there\nline\r\ncrlf',
        valid_from: '1901-03-04T05:06:07.089Z',
      },
      {
        external_key: 'ODD-2',
        name: 'Window',
        valid_from: '2026-01-02T03:04:05.006Z',
        valid_to: '9999-12-31T23:59:59.999Z',
        is_active: false,
      },
      { external_key: 'ODD-3', name: 'Meta', metadata: { nested: { a: [1, 2.5, null, true] }, ключ: 'значение' } },
      {
        external_key: 'ODD-4',
        name: 'Gone',
        tags: [
          { tag_type: 'ble', value: 'ODD-B4' },
          { tag_type: 'rfid', value: 'ODD-R4' },
        ],
      },
    ];
    const keys = bodies.map((b) => `external_key=${b.external_key}`).join('&');
    for (const body of bodies) {
      const res = await trackd.request('POST', '/api/v1/assets', { token, body });
      t.equal(res.status, 201, `${body.external_key} ${res.text}`);
    }
    const raw = lines((await get(`/api/v1/assets/export?${keys}`)).text);
    const items = raw.map((l) => JSON.parse(l));
    t.equal(items.length, bodies.length);
    for (const item of items) t.same(item, (await get(`/api/v1/assets/${item.id}`)).json.data, `${item.external_key}: as GET shows it`);
    // Byte for byte: each line is JSON.stringify of the read's view (key order, escapes, numbers, timestamps).
    for (const [i, item] of items.entries())
      t.equal(raw[i], JSON.stringify((await get(`/api/v1/assets/${item.id}`)).json.data), `${item.external_key}: the same bytes`);
    // Unfiltered, the export may walk the table instead of the org's index (walksTable): the same lines.
    t.same(
      lines((await get('/api/v1/assets/export')).text).map((l) => JSON.parse(l)),
      items,
      'the whole export of the org: the same lines',
    );
    const gone = items.find((item) => item.external_key === 'ODD-4');
    t.equal((await trackd.request('DELETE', `/api/v1/assets/${gone.id}`, { token })).status, 204);
    const deleted = lines((await get('/api/v1/assets/export?include_deleted=true&external_key=ODD-4')).text).map((l) => JSON.parse(l));
    const listed = (await get('/api/v1/assets?include_deleted=true&external_key=ODD-4')).json.data;
    t.same(deleted, listed, 'a deleted asset (include_deleted) as the list shows it');
    t.match(deleted[0]?.deleted_at, /Z$/);
  });

  await t.test('the list filters select the same rows as the list', async (t) => {
    for (const filter of ['q=ET-12', 'is_active=false', 'external_key=E-7&external_key=E-9', 'q=nothing-like-this']) {
      const exported = lines((await get(`/api/v1/assets/export?${filter}`)).text).length;
      const listed = (await get(`/api/v1/assets?${filter}`)).json.total_count;
      t.equal(exported, listed, `${filter}: ${listed} rows`);
    }
    const paging = await get('/api/v1/assets/export?limit=5');
    t.equal(paging.status, 400, 'an export does not page');
    t.same(
      paging.json.error.fields.map((f: any) => [f.field, f.code]),
      [['limit', 'invalid_context']],
    );
  });

  await t.test('assets as CSV: the import columns; imported back in upsert mode it changes nothing', async (t) => {
    const res = await get('/api/v1/assets/export', 'text/csv');
    t.equal(res.headers.get('content-type'), 'text/csv; charset=utf-8');
    t.equal(res.text.slice(0, res.text.indexOf('\n')), 'external_key,name,description,is_active,metadata,valid_from,valid_to,tags');
    const job = await runImport(trackd, token, 'assets', res.text, { query: 'mode=upsert', timeoutMs: 60_000 });
    t.match(job, { total_rows: ASSETS, unchanged: ASSETS, created: 0, updated: 0, failed_rows: 0 });
    const locationCsv = (await get('/api/v1/locations/export', 'text/csv')).text;
    t.match(await runImport(trackd, token, 'locations', locationCsv, { query: 'mode=upsert' }), {
      unchanged: 3,
      updated: 0,
      failed_rows: 0,
    });
  });

  await t.test('locations, with the parent filters of their list', async (t) => {
    const all = lines((await get('/api/v1/locations/export')).text).map((l) => JSON.parse(l));
    t.same(
      all.map((l) => [l.external_key, l.parent_external_key]),
      [
        ['X-SITE', null],
        ['X-DOCK', 'X-SITE'],
        ['X-SHELF', 'X-DOCK'],
      ],
      'by id: the import created them parents first',
    );
    const under = lines((await get('/api/v1/locations/export?parent_external_key=X-SITE')).text).map((l) => JSON.parse(l).external_key);
    t.same(under, ['X-DOCK']);
    const both = await get('/api/v1/locations/export?parent_external_key=X-SITE&parent_id=1');
    t.same(
      both.json.error.fields.map((f: any) => f.code),
      ['ambiguous_fields', 'ambiguous_fields'],
    );
  });

  await t.test('the report: the rows the report lists, by asset id', async (t) => {
    const nc = await natsClient(t, trackd.natsUrl);
    const at = Date.now() - 60_000;
    for (let i = 1; i <= 50; i++) {
      await publish(nc, `scans.${org.id}.fixed`, scanBody(i % 2 === 0 ? 'X-DOCK' : 'X-SHELF', [`rfid:ET-${i}`], new Date(at + i)));
    }
    await drained(nc);
    const exported = lines((await get('/api/v1/reports/asset-locations/export')).text).map((l) => JSON.parse(l));
    const listed = (await get('/api/v1/reports/asset-locations?limit=200&sort=asset_external_key')).json.data;
    t.equal(exported.length, 50);
    t.same(
      [...exported].sort((a, b) => a.asset_id - b.asset_id),
      [...listed].sort((a: any, b: any) => a.asset_id - b.asset_id),
      'the same rows, field for field',
    );
    const docked = lines((await get('/api/v1/reports/asset-locations/export?location_external_key=X-DOCK')).text);
    t.equal(docked.length, 25);
    const csvReport = await get('/api/v1/reports/asset-locations/export', 'text/csv');
    t.equal(lines(csvReport.text)[0], 'asset_id,asset_external_key,location_id,location_external_key,asset_last_seen,asset_deleted_at');
    t.equal(lines(csvReport.text).length, 51);
  });

  await t.test('one point in time: writes while a slow client downloads are not in its export', async (t) => {
    const chunks: Buffer[] = [];
    let paused!: () => void;
    const headersIn = new Promise<void>((resolve) => {
      paused = resolve;
    });
    let response!: http.IncomingMessage;
    const done = new Promise<void>((resolve, reject) => {
      const req = http.get(
        {
          host: '127.0.0.1',
          port: trackd.port,
          path: '/api/v1/assets/export',
          headers: { authorization: `Bearer ${token}` },
          agent: false,
        },
        (res) => {
          response = res;
          res.pause();
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', resolve);
          res.on('error', reject);
          paused();
        },
      );
      req.on('error', reject);
    });
    await headersIn;
    const removed = (await get('/api/v1/assets?external_key=E-1')).json.data[0];
    t.equal((await trackd.request('DELETE', `/api/v1/assets/${removed.id}`, { token })).status, 204);
    t.equal((await trackd.request('POST', '/api/v1/assets', { token, body: { external_key: 'LATE-1', name: 'Late' } })).status, 201);
    t.equal(
      (await trackd.request('PATCH', '/api/v1/assets/' + String(removed.id + 1), { token, body: { name: 'Renamed late' } })).status,
      200,
    );
    response.resume();
    await done;
    const items = lines(Buffer.concat(chunks).toString('utf8')).map((l) => JSON.parse(l));
    t.equal(items.length, ASSETS, 'as many rows as when it began');
    t.ok(
      items.some((i) => i.external_key === 'E-1'),
      'the asset deleted meanwhile is in it',
    );
    t.notOk(
      items.some((i) => i.external_key === 'LATE-1'),
      'the asset created meanwhile is not',
    );
    t.equal(items.find((i) => i.id === removed.id + 1).name, 'Asset 2', 'the asset renamed meanwhile has its old name');
    t.ok(Buffer.concat(chunks).length > 2_000_000, `a body larger than the socket buffers (${Buffer.concat(chunks).length} bytes)`);
  });

  await t.test('read scopes', async (t) => {
    const locationsOnly = (await trackd.createKey(org.id, ['locations:read'])).token;
    t.equal((await trackd.request('GET', '/api/v1/assets/export', { token: locationsOnly })).status, 403);
    t.equal((await trackd.request('GET', '/api/v1/reports/asset-locations/export', { token: locationsOnly })).status, 403);
    t.equal((await trackd.request('GET', '/api/v1/locations/export', { token: locationsOnly })).status, 200);
    const head = await trackd.http('HEAD', '/api/v1/assets/export', { token });
    t.equal(head.status, 200);
    t.equal(head.headers.get('content-type'), 'application/x-ndjson');
  });
});
