import t from 'tap';
import { ALL_SCOPES, eventually, startTrackd } from '../helpers/trackd.js';
import { expectError, expectRateHeaders } from '../helpers/wire.js';
import { inlineRefs } from '../helpers/openapi.js';

/** Contract audit: single rules of interface.md that no feature test pinned down. */

const fieldCodes = (res: { json: any }) => (res.json?.error?.fields ?? []).map((f: { field: string; code: string }) => [f.field, f.code]);

t.test('contract rules', async (t) => {
  const trackd = await startTrackd(t);
  const org = await trackd.createOrg('Audit rules');
  const { token } = await trackd.createKey(org.id, ALL_SCOPES);
  const root = await trackd.request('POST', '/api/v1/locations', { token, body: { external_key: 'ROOT', name: 'Root' } });
  t.equal(root.status, 201);
  const child = await trackd.request('POST', '/api/v1/locations', { token, body: { external_key: 'CHILD', name: 'Child' } });
  t.equal(child.status, 201);
  const childPath = `/api/v1/locations/${child.json.data.id}`;

  t.test(
    '7.2: numeric overflow of an int64 body field is invalid_value; in int64 but past 2147483647 is too_large with params.max',
    async (t) => {
      const cases: [string, string, string, Record<string, unknown> | undefined][] = [
        ['1e20', '1e20', 'invalid_value', undefined],
        ['-1e20', '-1e20', 'invalid_value', undefined],
        ['2^63', '9223372036854775808', 'invalid_value', undefined],
        ['1e400', '1e400', 'invalid_value', undefined],
        ['2^31', '2147483648', 'too_large', { max: 2147483647 }],
        ['0', '0', 'too_small', { min: 1 }],
        ['-1', '-1', 'too_small', { min: 1 }],
      ];
      for (const [name, number, code, params] of cases) {
        for (const [method, path, body] of [
          ['POST', '/api/v1/locations', `{"name":"N","parent_id":${number}}`],
          ['PATCH', childPath, `{"parent_id":${number}}`],
        ] as const) {
          const res = await trackd.request(method, path, { token, body });
          const label = `${method} parent_id ${name}`;
          expectError(t, res, { status: 400, type: 'validation_error', instance: path, fields: res.json?.error?.fields }, label);
          t.same(fieldCodes(res), [['parent_id', code]], `${label}: ${code}`);
          if (params !== undefined) t.same(res.json.error.fields[0].params, params, `${label}: params`);
        }
      }
      const unchanged = await trackd.request('GET', childPath, { token });
      t.equal(unchanged.json.data.parent_id, null, 'nothing changed');
    },
  );

  t.test('1.3, 9.2: the OpenAPI document flags what is extensible and documents the chosen defaults', async (t) => {
    const doc = inlineRefs((await trackd.request('GET', '/api/openapi.json')).json);
    const data = (path: string, method = 'get', status = '200') => {
      const schema = doc.paths[path][method].responses[status].content['application/json'].schema;
      return schema.properties.data.items ?? schema.properties.data;
    };
    const assetView = data('/api/v1/assets/{asset_id}');
    const locationView = data('/api/v1/locations/{location_id}');
    const reportRow = data('/api/v1/reports/asset-locations');
    t.equal(assetView.properties.tags.items.properties.tag_type['x-extensible-enum'], true, 'read-side tag_type is an extensible enum');
    t.same(assetView.properties.tags.items.properties.tag_type.enum, ['rfid', 'ble', 'barcode']);
    const envelope = doc.components.schemas.ErrorEnvelope.properties.error.properties;
    t.equal(envelope.type['x-extensible-enum'], true, 'error.type is an extensible enum');
    t.equal(envelope.fields.items.properties.code['x-extensible-enum'], true, 'fields[].code is an extensible enum');
    t.same(envelope.fields.items.required, ['field', 'code', 'message'], 'fields[] entries: field, code, message; params optional');
    t.same(
      envelope.fields.items.properties.code.enum,
      [
        'required',
        'invalid_value',
        'unknown_field',
        'invalid_context',
        'too_short',
        'too_long',
        'too_small',
        'too_large',
        'fk_not_found',
        'ambiguous_fields',
        'read_only',
      ],
      'the eleven codes of 7.2',
    );
    // Every field of the views is always present (2.2, 2.3, 2.6): required, and nullable exactly where the tables say.
    const views: [string, any, string[], string[]][] = [
      [
        'AssetView',
        assetView,
        [
          'id',
          'external_key',
          'name',
          'description',
          'is_active',
          'metadata',
          'valid_from',
          'valid_to',
          'created_at',
          'updated_at',
          'deleted_at',
          'tags',
        ],
        ['description', 'valid_to', 'deleted_at'],
      ],
      [
        'LocationView',
        locationView,
        [
          'id',
          'external_key',
          'name',
          'description',
          'parent_id',
          'parent_external_key',
          'is_active',
          'valid_from',
          'valid_to',
          'created_at',
          'updated_at',
          'deleted_at',
          'tags',
        ],
        ['description', 'parent_id', 'parent_external_key', 'valid_to', 'deleted_at'],
      ],
      [
        'AssetLocationItem',
        reportRow,
        ['asset_id', 'asset_external_key', 'location_id', 'location_external_key', 'asset_last_seen', 'asset_deleted_at'],
        ['location_id', 'location_external_key', 'asset_deleted_at'],
      ],
    ];
    for (const [name, schema, fields, nullable] of views) {
      t.same([...schema.required].sort(), [...fields].sort(), `${name}: every field required (null-check, not key-check)`);
      const flagged = Object.entries(schema.properties as Record<string, { nullable?: boolean }>)
        .filter(([, s]) => s.nullable === true)
        .map(([k]) => k);
      t.same(flagged.sort(), [...nullable].sort(), `${name}: nullable: true exactly on the nullable fields`);
    }
    t.notOk('location_id' in assetView.properties, 'the asset resource has no location field');
    t.notOk('metadata' in locationView.properties, 'locations have no metadata');
    const history = doc.paths['/api/v1/assets/{asset_id}/history'].get;
    const sort = history.parameters.find((p: { name: string }) => p.name === 'sort');
    t.equal(sort.schema.default, '-event_observed_at', 'history: the chosen default sort is documented');
    t.match(sort.description, /event_observed_at/, 'history: sort description names the allowed field');
    const me = data('/api/v1/orgs/me');
    t.same([...me.required].sort(), ['api_key_id', 'id', 'name', 'scopes'], '/orgs/me: id, name, scopes, api_key_id');
    t.equal(me.properties.api_key_id.format, 'uuid', 'api_key_id is a UUID');
    for (const [path, method] of [
      ['/api/v1/assets/{asset_id}', 'patch'],
      ['/api/v1/locations/{location_id}', 'patch'],
    ] as const) {
      t.same(
        Object.keys(doc.paths[path][method].requestBody.content),
        ['application/merge-patch+json'],
        `${method.toUpperCase()} ${path}: merge-patch only`,
      );
    }
    for (const path of ['/api/v1/assets', '/api/v1/locations', '/api/v1/assets/{asset_id}/tags', '/api/v1/assets/{asset_id}/rename']) {
      t.same(Object.keys(doc.paths[path].post.requestBody.content), ['application/json'], `POST ${path}: application/json`);
    }
    const tagRequest = doc.paths['/api/v1/assets/{asset_id}/tags'].post.requestBody.content['application/json'].schema;
    t.equal(tagRequest.discriminator.propertyName, 'tag_type', 'tag requests: discriminated by tag_type');
    t.same(
      tagRequest.oneOf.map((v: any) => v.properties.tag_type.enum[0]),
      ['rfid', 'ble', 'barcode'],
      'three variants',
    );
    t.ok(doc.paths['/api/v1/assets/{asset_id}/tags'].post.responses['201'].headers.Location, 'tag attach: Location header documented');
  });

  t.test('4.3: q is case-insensitive on the report as on the lists, beyond ASCII too', async (t) => {
    const asset = await trackd.request('POST', '/api/v1/assets', {
      token,
      body: { external_key: 'UMLAUT', name: 'Kein Ärger', description: 'Große Kiste', tags: [{ tag_type: 'barcode', value: 'Été-7' }] },
    });
    t.equal(asset.status, 201);
    await trackd.cli(['scans', 'publish', '--org', String(org.id), '--location', 'ROOT', '--tag', 'barcode:Été-7']);
    await eventually(
      async () => (await trackd.request('GET', '/api/v1/reports/asset-locations', { token })).json?.total_count === 1,
      10_000,
    );
    const cases: [string, string[]][] = [
      ['ärger', ['UMLAUT']],
      ['ÄRGER', ['UMLAUT']],
      ['KEIN ä', ['UMLAUT']],
      ['été-7', ['UMLAUT']],
      ['ÉTÉ', ['UMLAUT']],
      ['umlaut', ['UMLAUT']],
      ['große', []], // description is not searched by the report
      ['root', []], // nor are location fields
    ];
    for (const [q, expected] of cases) {
      const report = await trackd.request('GET', `/api/v1/reports/asset-locations?q=${encodeURIComponent(q)}`, { token });
      t.same(
        report.json.data.map((r: { asset_external_key: string }) => r.asset_external_key),
        expected,
        `report q=${q}`,
      );
      t.equal(report.json.total_count, expected.length, `report q=${q}: total_count`);
      if (q === 'große' || q === 'root') continue;
      const list = await trackd.request('GET', `/api/v1/assets?q=${encodeURIComponent(q)}`, { token });
      t.same(
        list.json.data.map((r: { external_key: string }) => r.external_key),
        expected,
        `asset list q=${q} agrees`,
      );
    }
  });

  t.test('8: the bare OpenAPI paths are public surface too: 301 with rate-limit headers', async (t) => {
    for (const path of ['/openapi.json', '/openapi.yaml']) {
      for (const method of ['GET', 'HEAD']) {
        const res = await trackd.request(method, path);
        t.equal(res.status, 301, `${method} ${path}`);
        expectRateHeaders(t, res, `${method} ${path}`);
      }
      const wrong = await trackd.request('POST', path);
      expectError(t, wrong, { status: 405, type: 'method_not_allowed', instance: path }, `POST ${path}`);
      expectRateHeaders(t, wrong, `POST ${path}`);
    }
  });
});
