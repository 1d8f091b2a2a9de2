/**
 * Bulk import of assets (issue 16, step 1): CSV and NDJSON, the single-create rules per row, the
 * file's own rules (duplicates), create and upsert modes, dry run, atomic, one job at a time,
 * Idempotency-Key, scopes, limits, and job ids private to their organization.
 */
import Database from 'better-sqlite3';
import path from 'node:path';
import t from 'tap';
import { postImport, runImport, settledJob } from '../helpers/bulk.js';
import { eventually, startTrackd, testClock } from '../helpers/trackd.js';

const ndjson = (rows: unknown[]) => `${rows.map((r) => JSON.stringify(r)).join('\n')}\n`;
const pairs = (errors: { row: number; field: string; error: string }[]) => errors.map((e) => [e.row, e.field, e.error]);

t.test('assets import', async (t) => {
  const clock = testClock();
  const trackd = await startTrackd(t, { clock });
  const org = await trackd.createOrg('Bulk Assets');
  const { token } = await trackd.createKey(org.id);
  const get = (url: string) => trackd.request('GET', url, { token });
  const assetByKey = async (key: string) => (await get(`/api/v1/assets?external_key=${key}&include_deleted=false`)).json.data[0];

  await t.test('CSV: 202 with the status URL; rows, tags, quoted cells; the job counts them', async (t) => {
    const csv = [
      'external_key,name,description,is_active,metadata,tags',
      'CSV-1,Forklift 1,"Line one\nline two, with a comma and ""quotes""",true,"{""k"":1}",rfid:E2001;ble:B-1',
      'CSV-2,Pallet 2,,false,,barcode:BC-2',
      ',Minted,,,,',
    ].join('\r\n');
    const res = await postImport(trackd, token, 'assets', csv);
    t.equal(res.status, 202, res.text);
    t.equal(res.json.status, 'accepted');
    t.match(res.json.job_id, /^[0-9A-Z]{26}$/);
    t.equal(res.json.status_url, `/api/v1/assets/bulk/${res.json.job_id}`);
    t.equal(res.headers.get('location'), res.json.status_url);
    const job = await settledJob(trackd, token, 'assets', res.json.job_id);
    t.match(job, {
      status: 'completed',
      kind: 'assets',
      mode: 'create',
      format: 'csv',
      total_rows: 3,
      processed_rows: 3,
      failed_rows: 0,
      created: 3,
      updated: 0,
      unchanged: 0,
      tags_created: 3,
      applied_through_row: 3,
      errors: [],
      errors_truncated: false,
    });
    t.ok(Date.parse(job.expires_at) - Date.parse(job.completed_at) === 7 * 24 * 3600 * 1000, 'kept 7 days after it finished');
    const one = await assetByKey('CSV-1');
    t.equal(one.description, 'Line one\nline two, with a comma and "quotes"');
    t.same(one.metadata, { k: 1 });
    t.same(
      one.tags.map((tag: any) => [tag.tag_type, tag.value]),
      [
        ['rfid', 'E2001'],
        ['ble', 'B-1'],
      ],
    );
    const created = (await get('/api/v1/events?after=0&limit=100')).json.data.filter((e: any) => e.type === 'asset.created');
    for (const key of ['CSV-1', 'CSV-2']) {
      const event = created.find((e: any) => e.data.asset.external_key === key);
      const stored = (await get(`/api/v1/assets/${event.data.asset.id}`)).json.data;
      t.same(event.data.asset, stored, `${key}: the asset.created event holds the asset as a read of it gives it`);
    }
    t.equal((await assetByKey('CSV-2')).is_active, false);
    t.match((await get('/api/v1/assets?q=Minted')).json.data[0].external_key, /^ASSET-\d{4}$/, 'a row without a key gets a minted one');
  });

  await t.test('NDJSON: one create body per line, tags as an array, blank lines skipped', async (t) => {
    const body = `${JSON.stringify({ external_key: 'ND-1', name: 'N 1', tags: [{ tag_type: 'rfid', value: 'ND-E1' }] })}\n\n${JSON.stringify({ external_key: 'ND-2', name: 'N 2', metadata: { a: [1] } })}`;
    const job = await runImport(trackd, token, 'assets', body, { format: 'ndjson', viaSocket: true });
    t.match(job, { status: 'completed', format: 'ndjson', total_rows: 2, created: 2, tags_created: 1, failed_rows: 0 });
    t.same((await assetByKey('ND-2')).metadata, { a: [1] });
  });

  await t.test('every row gets the fields[] codes a single create gets for the same body', async (t) => {
    const cases: Record<string, unknown>[] = [
      { external_key: 'R-1' },
      { name: null },
      { name: 5 },
      { name: '' },
      { name: 'n'.repeat(256) },
      { name: ' lead' },
      { name: 'ok', description: '' },
      { name: 'ok', is_active: 'yes' },
      { name: 'ok', metadata: [1] },
      { name: 'ok', valid_from: 'yesterday' },
      { name: 'ok', valid_from: '2026-01-02T00:00:00Z', valid_to: '2026-01-01T00:00:00Z' },
      { name: 'ok', valid_to: '0001-01-01T00:00:00Z' },
      { name: 'ok', tags: [{ tag_type: 'nfc', value: 'X' }] },
      { name: 'ok', tags: [{ tag_type: 'rfid', value: '' }] },
      { name: 'ok', tags: [{ tag_type: 'rfid' }] },
      { name: 'ok', colour: 'red' },
      { name: 'ok', location_id: 3 },
      { name: 'ok', external_key: 'bad key' },
    ];
    const job = await runImport(trackd, token, 'assets', ndjson(cases), { format: 'ndjson' });
    t.equal(job.failed_rows, cases.length, 'every row failed');
    t.equal(job.created, 0);
    for (const [i, body] of cases.entries()) {
      const single = await trackd.request('POST', '/api/v1/assets', { token, body });
      t.equal(single.status, 400, `single create of ${JSON.stringify(body)}`);
      const expected = single.json.error.fields.map((f: any) => [i + 1, f.field, f.code]);
      t.same(pairs(job.errors.filter((e: any) => e.row === i + 1)), expected, `row ${i + 1}: ${JSON.stringify(body)}`);
    }
  });

  await t.test('rows that cannot be read, and the rules of a file', async (t) => {
    await runImport(trackd, token, 'assets', 'external_key,name,tags\nHELD-1,Held,rfid:HELD-T\n');
    const csv = [
      'external_key,name,tags,metadata',
      'F-1,One,rfid:F-T1,',
      'F-1,Same key,,', // repeats row 1
      'F-3,Same tag,rfid:F-T1,', // repeats row 1's tag
      'HELD-1,Key in use,,', // a live asset holds the key (create mode)
      'F-5,Tag in use,rfid:HELD-T,', // another asset holds the tag
      'F-6,Two fields', // too few fields
      'F-7,Bad metadata,,{not json',
      'F-8,Twice the same tag,ble:X;ble:X,',
      'F-9,Fine,,',
    ].join('\n');
    const job = await runImport(trackd, token, 'assets', csv);
    t.match(job, { status: 'completed', total_rows: 9, processed_rows: 9, created: 2, failed_rows: 7 });
    t.same(pairs(job.errors), [
      [2, 'external_key', 'conflict'],
      [3, 'tags[0]', 'conflict'],
      [4, 'external_key', 'conflict'],
      [5, 'tags[0]', 'conflict'],
      [6, 'body', 'invalid_value'],
      [7, 'metadata', 'invalid_value'],
      [8, 'tags[1]', 'conflict'],
    ]);
    t.match(job.errors[0].message, /repeats row 1/);
    t.equal((await assetByKey('HELD-1')).name, 'Held', 'the held key was not touched');
    t.same(
      (await assetByKey('HELD-1')).tags.map((x: any) => x.value),
      ['HELD-T'],
      'the held tag stays on its asset',
    );

    const lines = ndjson([{ name: 'a' }]).replace('\n', '\nnot json\n[1]\n{"name":"x","name":"y"}\n');
    const bad = await runImport(trackd, token, 'assets', lines, { format: 'ndjson' });
    t.same(pairs(bad.errors), [
      [2, 'body', 'invalid_value'],
      [3, 'body', 'invalid_value'],
      [4, 'name', 'invalid_value'],
    ]);
  });

  await t.test('upsert: created, changed, or left alone with its updated_at', async (t) => {
    const first = ndjson([
      { external_key: 'U-1', name: 'One', metadata: { x: 1 }, tags: [{ tag_type: 'rfid', value: 'U-T1' }] },
      { external_key: 'U-2', name: 'Two', tags: [{ tag_type: 'rfid', value: 'U-T2' }] },
    ]);
    // The event log follows every row that changed something, and nothing else.
    const lastSeq = async () => (await get('/api/v1/events?after=9007199254740991')).json.last_seq as number;
    const eventsSince = async (seq: number) =>
      ((await get(`/api/v1/events?after=${seq}&limit=100`)).json.data as { type: string; data: any }[]).map(
        (e) => `${e.type} ${e.data.asset?.external_key ?? ''}`,
      );
    const seqBefore = await lastSeq();
    t.match(await runImport(trackd, token, 'assets', first, { format: 'ndjson', query: 'mode=upsert' }), { created: 2, unchanged: 0 });
    t.same(await eventsSince(seqBefore), ['asset.created U-1', 'asset.created U-2'], 'one asset.created per created row');
    t.equal(await lastSeq(), seqBefore + 2, "the org's head moved past the batch's events (written once per batch)");
    const before = await assetByKey('U-1');
    const seqCreated = await lastSeq();
    clock.advance(60_000);
    const same = await runImport(trackd, token, 'assets', first, { format: 'ndjson', query: 'mode=upsert' });
    t.match(same, { created: 0, updated: 0, unchanged: 2, tags_created: 0, failed_rows: 0 }, 'the same file again changes nothing');
    t.same(await assetByKey('U-1'), before, 'not even updated_at');
    t.same(await eventsSince(seqCreated), [], 'and records no event');

    const changed = ndjson([
      { external_key: 'U-1', name: 'One renamed', metadata: { x: 1 }, tags: [{ tag_type: 'rfid', value: 'U-T1' }] },
      { external_key: 'U-2', name: 'Two', tags: [{ tag_type: 'ble', value: 'U-B2' }] },
      { external_key: 'U-3', name: 'Three', tags: [{ tag_type: 'rfid', value: 'U-T1' }] },
    ]);
    const job = await runImport(trackd, token, 'assets', changed, { format: 'ndjson', query: 'mode=upsert' });
    t.match(job, { created: 0, updated: 2, unchanged: 0, tags_created: 1, failed_rows: 1 });
    t.same(
      await eventsSince(seqCreated),
      ['asset.updated U-1', 'asset.updated U-2'],
      'one asset.updated per changed row, none for the failed one',
    );
    t.same(pairs(job.errors), [[3, 'tags[0]', 'conflict']], 'a tag another asset holds is not moved: the row fails');
    const one = await assetByKey('U-1');
    t.equal(one.name, 'One renamed');
    t.ok(Date.parse(one.updated_at) > Date.parse(before.updated_at), 'a changed field advances updated_at');
    const two = await assetByKey('U-2');
    t.same(
      two.tags.map((x: any) => x.value),
      ['U-B2'],
      "the row's tags replace the asset's: the one it no longer lists is detached",
    );
    t.equal(await assetByKey('U-3'), undefined, 'the failed row created nothing');
    const steal = ndjson([{ external_key: 'U-2', name: 'Two', tags: [{ tag_type: 'rfid', value: 'U-T1' }] }]);
    const stolen = await runImport(trackd, token, 'assets', steal, { format: 'ndjson', query: 'mode=upsert' });
    t.same(pairs(stolen.errors), [[1, 'tags[0]', 'conflict']], 'an existing asset cannot take a tag another one holds');
    t.same(
      (await assetByKey('U-1')).tags.map((x: any) => x.value),
      ['U-T1'],
      'the tag stays where it was',
    );
  });

  await t.test('dry run: judged against the data, counted, nothing written', async (t) => {
    const body = 'external_key,name,tags\nDRY-1,Dry,rfid:DRY-T\nHELD-1,Held again,\n';
    const job = await runImport(trackd, token, 'assets', body, { query: 'dry_run=true' });
    t.match(job, { dry_run: true, status: 'completed', created: 1, failed_rows: 1, tags_created: 1 });
    t.same(pairs(job.errors), [[2, 'external_key', 'conflict']]);
    t.equal(await assetByKey('DRY-1'), undefined, 'no asset');
    t.equal((await get('/api/v1/assets?q=DRY')).json.total_count, 0);
  });

  await t.test('atomic: one failed row and nothing applies; all good and all apply', async (t) => {
    const bad = await runImport(trackd, token, 'assets', 'external_key,name\nAT-1,One\nAT-2,\nAT-3,Three\n', { query: 'atomic=true' });
    t.match(bad, { atomic: true, status: 'completed', processed_rows: 3, failed_rows: 1, created: 0 });
    t.equal(await assetByKey('AT-1'), undefined, 'the good rows were not applied');
    const stateful = await runImport(trackd, token, 'assets', 'external_key,name\nAT-1,One\nHELD-1,Held\n', { query: 'atomic=true' });
    t.match(stateful, { failed_rows: 1, created: 0 }, 'a row refused by the data undoes the others too');
    t.equal(await assetByKey('AT-1'), undefined);
    const good = await runImport(trackd, token, 'assets', 'external_key,name\nAT-1,One\nAT-3,Three\n', { query: 'atomic=true' });
    t.match(good, { failed_rows: 0, created: 2 });
    t.ok(await assetByKey('AT-3'));
  });

  await t.test('Idempotency-Key: the same key answers the job it started, once', async (t) => {
    const headers = { 'Idempotency-Key': 'import-2026-11-25-a' };
    const body = 'external_key,name\nIDEM-1,Once\n';
    const first = await postImport(trackd, token, 'assets', body, { headers });
    t.equal(first.status, 202);
    await settledJob(trackd, token, 'assets', first.json.job_id);
    const second = await postImport(trackd, token, 'assets', body, { headers, viaSocket: true });
    t.equal(second.status, 202);
    t.equal(second.json.job_id, first.json.job_id, 'the same job');
    t.equal((await get('/api/v1/assets?external_key=IDEM-1')).json.total_count, 1, 'one asset');
    const bad = await postImport(trackd, token, 'assets', body, { headers: { 'Idempotency-Key': 'has space' } });
    t.equal(bad.status, 400);
    t.equal(bad.json.error.fields[0].field, 'Idempotency-Key');
  });

  await t.test('the request: media type, header row, query, limit', async (t) => {
    const json = await trackd.request('POST', '/api/v1/assets/bulk', { token, body: '{"name":"x"}' });
    t.equal(json.status, 415);
    t.match(json.json.error.detail, /text\/csv, application\/x-ndjson/);
    const header = await postImport(trackd, token, 'assets', 'external_key,name,colour\nA,B,C\n');
    t.equal(header.status, 400);
    t.same(
      header.json.error.fields.map((f: any) => [f.field, f.code]),
      [['colour', 'unknown_field']],
    );
    const noName = await postImport(trackd, token, 'assets', 'external_key\nA\n');
    t.same(
      noName.json.error.fields.map((f: any) => [f.field, f.code]),
      [['name', 'required']],
    );
    const empty = await postImport(trackd, token, 'assets', '');
    t.equal(empty.status, 400, 'an empty CSV body has no header');
    const mode = await postImport(trackd, token, 'assets', 'name\nx\n', { query: 'mode=merge&dry_run=maybe' });
    t.same(
      mode.json.error.fields.map((f: any) => [f.field, f.code]),
      [
        ['mode', 'invalid_value'],
        ['dry_run', 'invalid_value'],
      ],
    );
    const tooLarge = await trackd.request('POST', '/api/v1/assets/bulk', {
      token,
      body: 'name\nx\n',
      contentType: 'text/csv',
      headers: { 'content-length': String(2 * 1024 * 1024 * 1024) },
    });
    t.equal(tooLarge.status, 413);
    const jobs = new Database(path.join(trackd.dataDir, 'shards', `shard-${(org.id - 1) % 2}.sqlite`), { readonly: true });
    t.teardown(() => jobs.close());
    t.equal(
      jobs.prepare("SELECT count(*) FROM bulk_jobs WHERE status = 'processing'").pluck().get(),
      0,
      'refused requests left no job running',
    );
  });

  await t.test('one running job per org and kind', async (t) => {
    const socket = await import('node:net');
    const conn = socket.connect(trackd.port, '127.0.0.1');
    t.teardown(() => conn.destroy());
    const head = `POST /api/v1/assets/bulk HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\nContent-Type: text/csv\r\nTransfer-Encoding: chunked\r\n\r\n`;
    const chunk = (text: string) => `${Buffer.byteLength(text).toString(16)}\r\n${text}\r\n`;
    conn.write(head + chunk('external_key,name\nRUN-1,Running\n'));
    const jobs = new Database(path.join(trackd.dataDir, 'shards', `shard-${(org.id - 1) % 2}.sqlite`), { readonly: true });
    t.teardown(() => jobs.close());
    const running = await eventually(
      () => jobs.prepare("SELECT job_id FROM bulk_jobs WHERE status = 'processing'").pluck().get() as string | undefined,
      20_000,
    );
    const second = await postImport(trackd, token, 'assets', 'external_key,name\nRUN-2,Second\n');
    t.equal(second.status, 409);
    t.match(second.json.error.detail, new RegExp(`already running .*${running}`));
    const answer = new Promise<string>((resolve) => {
      let text = '';
      conn.on('data', (d) => {
        text += d.toString();
        if (text.includes('\r\n\r\n') && text.includes('}')) resolve(text);
      });
    });
    conn.write(chunk('RUN-3,Last\n') + chunk(''));
    t.match(await answer, /^HTTP\/1.1 202/);
    const job = await settledJob(trackd, token, 'assets', running);
    t.match(job, { created: 2, total_rows: 2 });
    t.equal((await postImport(trackd, token, 'assets', 'external_key,name\nRUN-2,Second\n')).status, 202, 'free again once it finished');
  });

  await t.test('scopes and organizations', async (t) => {
    const reader = (await trackd.createKey(org.id, ['assets:read'])).token;
    const denied = await postImport(trackd, reader, 'assets', 'name\nx\n');
    t.equal(denied.status, 403);
    t.match(denied.json.error.detail, /assets:write/);
    const job = await runImport(trackd, token, 'assets', 'name\nmine\n');
    t.equal((await trackd.request('GET', `/api/v1/assets/bulk/${job.job_id}`, { token: reader })).status, 403);
    t.equal((await trackd.request('GET', `/api/v1/locations/bulk/${job.job_id}`, { token })).status, 404, 'not a location job');
    const other = await trackd.createOrg('Other');
    const otherToken = (await trackd.createKey(other.id)).token;
    const foreign = await trackd.request('GET', `/api/v1/assets/bulk/${job.job_id}`, { token: otherToken });
    t.equal(foreign.status, 404, "another org's job id is not found");
    t.equal(foreign.json.error.type, 'not_found');
    t.equal((await trackd.request('GET', '/api/v1/assets/bulk/nope', { token })).status, 404);
    const idem = { 'Idempotency-Key': 'shared-key' };
    const a = await postImport(trackd, token, 'assets', 'name\nA\n', { headers: idem });
    const b = await postImport(trackd, otherToken, 'assets', 'name\nB\n', { headers: idem });
    t.not(a.json.job_id, b.json.job_id, 'the same Idempotency-Key in two orgs starts two jobs');
    await settledJob(trackd, token, 'assets', a.json.job_id);
    await settledJob(trackd, otherToken, 'assets', b.json.job_id);
  });

  await t.test('a finished job is kept 7 days, then forgotten', async (t) => {
    const job = await runImport(trackd, token, 'assets', 'name\nkept\n');
    clock.advance(6 * 24 * 3600 * 1000);
    await runImport(trackd, token, 'assets', 'name\nlater\n');
    t.equal((await get(`/api/v1/assets/bulk/${job.job_id}`)).status, 200, 'kept after 6 days');
    clock.advance(2 * 24 * 3600 * 1000);
    await runImport(trackd, token, 'assets', 'name\nmuch later\n');
    t.equal((await get(`/api/v1/assets/bulk/${job.job_id}`)).status, 404, 'forgotten after 8');
  });
});
