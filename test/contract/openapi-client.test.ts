/**
 * The typed TypeScript client (clients/typescript): generated from the document trackd serves,
 * checked in current, and driving every operation against a running trackd.
 */
import fs from 'node:fs';
import path from 'node:path';
import { createConfig, lintFromString } from '@redocly/openapi-core';
import t from 'tap';
import { CLIENT_DIR, generatedFiles, servedDocument } from '../../clients/typescript/generate.js';
import { MERGE_PATCH, trackdClient, type Asset, type ErrorEnvelope } from '../../clients/typescript/index.js';
import { publish, natsClient, scanBody } from '../helpers/scans.js';
import { ALL_SCOPES, eventually, startTrackd } from '../helpers/trackd.js';

t.test('the checked-in client is generated from the current document (npm run client)', async (t) => {
  const files = await generatedFiles();
  for (const [name, text] of Object.entries(files)) {
    t.equal(fs.readFileSync(path.join(CLIENT_DIR, name), 'utf8'), text, `${name} is current`);
  }
});

t.test('redocly lint (recommended rules) of the served document: 0 errors, explained warnings', async (t) => {
  const config = await createConfig({ extends: ['recommended'] });
  const problems = await lintFromString({ source: JSON.stringify(servedDocument()), absoluteRef: 'openapi.json', config });
  // The bulk job paths (/assets/bulk/{job_id}, TrakRF's form) have the shape of /assets/{asset_id}/history:
  // trackd's router takes the literal segment first, and an asset id is never 'bulk'.
  const explained = (p: (typeof problems)[number]) => p.ruleId === 'no-ambiguous-paths' && p.message.includes('/bulk/{job_id}');
  const found = problems.filter((p) => !explained(p)).map((p) => `${p.severity} ${p.ruleId}`);
  // trackd is proprietary (UNLICENSED): its license object has a name and no public URL to give.
  t.same(found, ['warn info-license-strict'], `problems: ${JSON.stringify(problems.map((p) => p.message))}`);
});

t.test('every operation through the typed client', async (t) => {
  const trackd = await startTrackd(t);
  const org = await trackd.createOrg('Client');
  const api = trackdClient(trackd.baseUrl, (await trackd.createKey(org.id)).token);
  const called = new Set<string>();
  const ok = <T extends { data?: unknown; error?: unknown; response: Response }>(
    what: string,
    result: T,
    status: number,
  ): NonNullable<T['data']> => {
    called.add(what);
    t.equal(result.response.status, status, `${what}: ${status}`);
    return result.data as NonNullable<T['data']>;
  };

  ok('GET /api/v1/orgs/me', await api.GET('/api/v1/orgs/me'), 200);
  const site = ok(
    'POST /api/v1/locations',
    await api.POST('/api/v1/locations', { body: { external_key: 'SITE-1', name: 'Site' } }),
    201,
  ).data;
  const dock = ok(
    'POST /api/v1/locations',
    await api.POST('/api/v1/locations', { body: { external_key: 'DOCK-1', name: 'Dock', parent_id: site.id } }),
    201,
  ).data;
  const lid = { params: { path: { location_id: dock.id } } };
  ok('GET /api/v1/locations', await api.GET('/api/v1/locations', { params: { query: { limit: 10 } } }), 200);
  ok('GET /api/v1/locations/{location_id}', await api.GET('/api/v1/locations/{location_id}', lid), 200);
  const patched = ok(
    'PATCH /api/v1/locations/{location_id}',
    await api.PATCH('/api/v1/locations/{location_id}', { ...lid, body: { description: 'north side' }, headers: MERGE_PATCH }),
    200,
  );
  t.equal(patched.data.description, 'north side', 'merge-patch applied');
  ok(
    'POST /api/v1/locations/{location_id}/rename',
    await api.POST('/api/v1/locations/{location_id}/rename', { ...lid, body: { external_key: 'DOCK-A' } }),
    200,
  );
  ok('GET /api/v1/locations/{location_id}/ancestors', await api.GET('/api/v1/locations/{location_id}/ancestors', lid), 200);
  ok(
    'GET /api/v1/locations/{location_id}/children',
    await api.GET('/api/v1/locations/{location_id}/children', { params: { path: { location_id: site.id } } }),
    200,
  );
  const descendants = ok(
    'GET /api/v1/locations/{location_id}/descendants',
    await api.GET('/api/v1/locations/{location_id}/descendants', { params: { path: { location_id: site.id } } }),
    200,
  );
  t.same(
    descendants.data.map((l) => l.id),
    [dock.id],
  );
  const ltag = ok(
    'POST /api/v1/locations/{location_id}/tags',
    await api.POST('/api/v1/locations/{location_id}/tags', { ...lid, body: { tag_type: 'barcode', value: 'LOC-BC-1' } }),
    201,
  ).data;
  ok(
    'DELETE /api/v1/locations/{location_id}/tags/{tag_id}',
    await api.DELETE('/api/v1/locations/{location_id}/tags/{tag_id}', { params: { path: { location_id: dock.id, tag_id: ltag.id } } }),
    204,
  );

  const asset: Asset = ok(
    'POST /api/v1/assets',
    await api.POST('/api/v1/assets', { body: { name: 'Pallet 1', tags: [{ tag_type: 'rfid', value: 'E2C1' }] } }),
    201,
  ).data;
  const aid = { params: { path: { asset_id: asset.id } } };
  ok('GET /api/v1/assets', await api.GET('/api/v1/assets', { params: { query: { q: 'pallet' } } }), 200);
  ok('GET /api/v1/assets/{asset_id}', await api.GET('/api/v1/assets/{asset_id}', aid), 200);
  const renamed = ok(
    'PATCH /api/v1/assets/{asset_id}',
    await api.PATCH('/api/v1/assets/{asset_id}', {
      ...aid,
      body: { name: 'Pallet One', metadata: { colour: 'blue' } },
      headers: MERGE_PATCH,
    }),
    200,
  );
  t.same([renamed.data.name, renamed.data.metadata], ['Pallet One', { colour: 'blue' }]);
  ok(
    'POST /api/v1/assets/{asset_id}/rename',
    await api.POST('/api/v1/assets/{asset_id}/rename', { ...aid, body: { external_key: 'PAL-1' } }),
    200,
  );
  const atag = ok(
    'POST /api/v1/assets/{asset_id}/tags',
    await api.POST('/api/v1/assets/{asset_id}/tags', { ...aid, body: { tag_type: 'ble', value: 'beacon-1' } }),
    201,
  ).data;
  ok(
    'DELETE /api/v1/assets/{asset_id}/tags/{tag_id}',
    await api.DELETE('/api/v1/assets/{asset_id}/tags/{tag_id}', { params: { path: { asset_id: asset.id, tag_id: atag.id } } }),
    204,
  );

  const nc = await natsClient(t, trackd.natsUrl);
  await publish(nc, `scans.${org.id}.fixed`, scanBody('DOCK-A', ['rfid:E2C1'], new Date()));
  const report = await eventually(async () => {
    const result = await api.GET('/api/v1/reports/asset-locations', { params: { query: { asset_id: [asset.id] } } });
    return result.data?.data.length === 1 ? result : undefined;
  });
  ok('GET /api/v1/reports/asset-locations', report, 200);
  t.equal(report.data!.data[0]!.location_id, dock.id, 'the scan placed the asset at the dock');
  const history = ok('GET /api/v1/assets/{asset_id}/history', await api.GET('/api/v1/assets/{asset_id}/history', aid), 200);
  t.equal(history.total_count, 1);
  const events = ok('GET /api/v1/events', await api.GET('/api/v1/events', { params: { query: { after: 0, limit: 1000 } } }), 200);
  const moved = events.data.find((e) => e.type === 'asset.moved');
  t.equal(moved?.seq, report.data!.as_of_seq, 'the move is the last event, and the report reflects it (as_of_seq)');
  const ticket = ok('POST /api/v1/events/tickets', await api.POST('/api/v1/events/tickets', { body: {} }), 201);
  t.match(ticket.data.ticket, /^\d+\./, 'a ticket names its org');
  const stream = ok(
    'GET /api/v1/events/stream',
    await api.GET('/api/v1/events/stream', { params: { query: { after: 0, type: ['asset.moved'] } }, parseAs: 'stream' }),
    200,
  );
  const reader = stream.getReader();
  let frames = '';
  while (!frames.includes('\n\n', frames.indexOf('event: asset.moved'))) frames += new TextDecoder().decode((await reader.read()).value);
  t.match(frames, `id: ${moved?.seq}\nevent: asset.moved\ndata: {`, 'the stream begins with the move');
  await reader.cancel();

  const hooks = trackdClient(trackd.baseUrl, (await trackd.createKey(org.id, [...ALL_SCOPES, 'webhooks:read', 'webhooks:write'])).token);
  const hook = ok(
    'POST /api/v1/webhooks',
    await hooks.POST('/api/v1/webhooks', { body: { url: 'https://8.8.8.8/hook', event_types: ['asset.moved'] } }),
    201,
  ).data;
  const wid = { params: { path: { webhook_id: hook.id } } };
  ok('GET /api/v1/webhooks', await hooks.GET('/api/v1/webhooks'), 200);
  ok('GET /api/v1/webhooks/{webhook_id}', await hooks.GET('/api/v1/webhooks/{webhook_id}', wid), 200);
  const paused = { ...wid, body: { status: 'paused' as const }, headers: MERGE_PATCH };
  t.equal(ok('PATCH /api/v1/webhooks/{webhook_id}', await hooks.PATCH('/api/v1/webhooks/{webhook_id}', paused), 200).data.status, 'paused');
  ok(
    'POST /api/v1/webhooks/{webhook_id}/replay',
    await hooks.POST('/api/v1/webhooks/{webhook_id}/replay', { ...wid, body: { after: 0 } }),
    200,
  );
  ok(
    'POST /api/v1/webhooks/{webhook_id}/rotate-secret',
    await hooks.POST('/api/v1/webhooks/{webhook_id}/rotate-secret', { ...wid, body: {} }),
    200,
  );
  ok('POST /api/v1/webhooks/{webhook_id}/test', await hooks.POST('/api/v1/webhooks/{webhook_id}/test', { ...wid, body: {} }), 202);
  ok('GET /api/v1/webhooks/{webhook_id}/deliveries', await hooks.GET('/api/v1/webhooks/{webhook_id}/deliveries', wid), 200);
  ok(
    'POST /api/v1/webhooks/{webhook_id}/deliveries/{delivery_id}/redeliver',
    await hooks.POST('/api/v1/webhooks/{webhook_id}/deliveries/{delivery_id}/redeliver', {
      params: { path: { webhook_id: hook.id, delivery_id: 999_999 } },
      body: {},
    }),
    404,
  );
  ok('DELETE /api/v1/webhooks/{webhook_id}', await hooks.DELETE('/api/v1/webhooks/{webhook_id}', wid), 204);

  const csv = { bodySerializer: (body: string) => body, headers: { 'Content-Type': 'text/csv' } };
  const assetJob = ok(
    'POST /api/v1/assets/bulk',
    await api.POST('/api/v1/assets/bulk', { body: 'external_key,name\nBULK-1,Bulk one\n', params: { query: { mode: 'upsert' } }, ...csv }),
    202,
  );
  const assetStatus = await eventually(async () => {
    const result = await api.GET('/api/v1/assets/bulk/{job_id}', { params: { path: { job_id: assetJob.job_id } } });
    return result.data?.data.status === 'completed' ? result : undefined;
  });
  t.equal(ok('GET /api/v1/assets/bulk/{job_id}', assetStatus, 200).data.created, 1);
  const locationJob = ok(
    'POST /api/v1/locations/bulk',
    await api.POST('/api/v1/locations/bulk', { body: 'name,parent_external_key\nBulk shelf,DOCK-A\n', ...csv }),
    202,
  );
  const locationStatus = await eventually(async () => {
    const result = await api.GET('/api/v1/locations/bulk/{job_id}', { params: { path: { job_id: locationJob.job_id } } });
    return result.data?.data.status === 'completed' ? result : undefined;
  });
  t.equal(ok('GET /api/v1/locations/bulk/{job_id}', locationStatus, 200).data.created, 1);

  const text = { parseAs: 'text' as const };
  const assetsExport = ok(
    'GET /api/v1/assets/export',
    await api.GET('/api/v1/assets/export', { params: { query: { q: 'bulk' } }, ...text }),
    200,
  );
  t.equal(JSON.parse(assetsExport.trim()).external_key, 'BULK-1', 'the export through the client');
  ok('GET /api/v1/locations/export', await api.GET('/api/v1/locations/export', text), 200);
  const reportCsv = ok(
    'GET /api/v1/reports/asset-locations/export',
    await api.GET('/api/v1/reports/asset-locations/export', { headers: { Accept: 'text/csv' }, ...text }),
    200,
  );
  t.equal(reportCsv.split('\n').filter((l) => l !== '').length, 2, 'a header and the one scanned asset');

  const invalid = await api.POST('/api/v1/assets', { body: { name: '' } });
  const error: ErrorEnvelope | undefined = invalid.error;
  t.equal(invalid.response.status, 400);
  t.equal(error?.error.type, 'validation_error', 'the error body is typed as ErrorEnvelope');
  t.equal(error?.error.fields?.[0]?.field, 'name');

  ok('DELETE /api/v1/assets/{asset_id}', await api.DELETE('/api/v1/assets/{asset_id}', aid), 204);
  ok(
    'DELETE /api/v1/locations/{location_id}',
    await api.DELETE('/api/v1/locations/{location_id}', {
      params: { path: { location_id: (await api.POST('/api/v1/locations', { body: { name: 'Spare' } })).data!.data.id } },
    }),
    204,
  );

  const documented = Object.entries(servedDocument().paths as Record<string, Record<string, unknown>>).flatMap(([p, ops]) =>
    Object.keys(ops).map((m) => `${m.toUpperCase()} ${p}`),
  );
  t.same([...called].sort(), documented.sort(), 'every documented operation was called through the client');
});
