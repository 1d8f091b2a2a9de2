/**
 * The webhooks API's rules: validation (table), scopes, receiver addresses refused at registration
 * (no WEBHOOK_ALLOWED_CIDRS here), the bound per organization, org isolation (of endpoints and of
 * the events they carry), and every refusal in the error envelope, changing nothing.
 */
import t from 'tap';
import { eventually, startTrackd } from '../helpers/trackd.js';
import { createWebhook, startReceiver, WEBHOOK_SCOPES } from '../helpers/webhooks.js';
import { expectError } from '../helpers/wire.js';

const trackd = await startTrackd(t);
const org = await trackd.createOrg('Hooks API');
const token = (await trackd.createKey(org.id, WEBHOOK_SCOPES)).token;
const PUBLIC = 'https://8.8.8.8/hook';

t.test('validation: each bad body is 400 with its field, and nothing is created', async (t) => {
  const location = (await trackd.request('POST', '/api/v1/locations', { token, body: { name: 'L' } })).json.data;
  const cases: [string, Record<string, unknown>, string, string][] = [
    ['url missing', { event_types: ['asset.created'] }, 'url', 'required'],
    ['url not a URL', { url: 'not a url', event_types: ['asset.created'] }, 'url', 'invalid_value'],
    ['url ftp', { url: 'ftp://8.8.8.8/x', event_types: ['asset.created'] }, 'url', 'invalid_value'],
    ['url with user info', { url: 'https://u:p@8.8.8.8/x', event_types: ['asset.created'] }, 'url', 'invalid_value'],
    ['url too long', { url: `https://8.8.8.8/${'a'.repeat(2048)}`, event_types: ['asset.created'] }, 'url', 'too_long'],
    ['event_types missing', { url: PUBLIC }, 'event_types', 'required'],
    ['event_types empty', { url: PUBLIC, event_types: [] }, 'event_types', 'too_short'],
    ['unknown event type', { url: PUBLIC, event_types: ['asset.exploded'] }, 'event_types[0]', 'invalid_value'],
    ['filters unknown field', { url: PUBLIC, event_types: ['asset.created'], filters: { tag: 1 } }, 'filters.tag', 'unknown_field'],
    ['asset_ids empty', { url: PUBLIC, event_types: ['asset.created'], filters: { asset_ids: [] } }, 'filters.asset_ids', 'too_short'],
    [
      'asset_ids too many',
      { url: PUBLIC, event_types: ['asset.created'], filters: { asset_ids: Array.from({ length: 101 }, (_, i) => i + 1) } },
      'filters.asset_ids',
      'too_long',
    ],
    [
      'location_id unknown',
      { url: PUBLIC, event_types: ['location.updated'], filters: { location_id: location.id + 100000 } },
      'filters.location_id',
      'fk_not_found',
    ],
    ['after negative', { url: PUBLIC, event_types: ['asset.created'], after: -1 }, 'after', 'too_small'],
    ['after past the head', { url: PUBLIC, event_types: ['asset.created'], after: 999999 }, 'after', 'too_large'],
    ['unknown field', { url: PUBLIC, event_types: ['asset.created'], secret: 'mine' }, 'secret', 'unknown_field'],
  ];
  for (const [name, body, field, code] of cases) {
    const res = await trackd.request('POST', '/api/v1/webhooks', { token, body });
    t.equal(res.status, 400, `${name}: 400`);
    t.equal(res.json?.error?.type, 'validation_error', `${name}: validation_error`);
    t.ok(
      res.json?.error?.fields?.some((f: any) => f.field === field && f.code === code),
      `${name}: ${field} ${code} (got ${JSON.stringify(res.json?.error?.fields)})`,
    );
  }
  const list = await trackd.request('GET', '/api/v1/webhooks', { token });
  t.same(list.json.data, [], 'nothing created');
  const empty = await trackd.request('PATCH', '/api/v1/webhooks/1', { token, body: {}, contentType: 'application/merge-patch+json' });
  t.equal(empty.status, 400, 'an empty patch');
});

t.test('receiver addresses refused at registration: private, loopback, link-local, metadata, by name too', async (t) => {
  for (const url of [
    'http://127.0.0.1:9/hook',
    'http://localhost:9/hook',
    'http://10.0.0.5/hook',
    'http://192.168.1.10/hook',
    'http://169.254.169.254/latest/meta-data/',
    'http://[::1]/hook',
    'http://[fd00:ec2::254]/hook',
    'http://[::ffff:127.0.0.1]/hook',
    'http://0.0.0.0/hook',
  ]) {
    const res = await trackd.request('POST', '/api/v1/webhooks', { token, body: { url, event_types: ['asset.created'] } });
    expectError(
      t,
      res,
      {
        status: 400,
        type: 'validation_error',
        detail: /^url refused: .*(private, loopback, link-local or reserved address|does not resolve)/,
        instance: '/api/v1/webhooks',
        fields: [{ field: 'url', code: 'invalid_value', message: res.json?.error?.detail }],
      },
      url,
    );
  }
  const hook = await createWebhook(trackd, token, { url: PUBLIC, event_types: ['asset.created'] });
  const patched = await trackd.request('PATCH', `/api/v1/webhooks/${hook.id}`, {
    token,
    body: { url: 'http://127.0.0.1/x' },
    contentType: 'application/merge-patch+json',
  });
  t.equal(patched.status, 400, 'a patch to a refused address too');
  t.equal((await trackd.request('GET', `/api/v1/webhooks/${hook.id}`, { token })).json.data.url, PUBLIC, 'unchanged');
  await trackd.request('DELETE', `/api/v1/webhooks/${hook.id}`, { token });
});

t.test('scopes: webhooks:read to read, webhooks:write to change, and the read scope of each event type subscribed', async (t) => {
  const readOnly = (await trackd.createKey(org.id, ['webhooks:read', 'assets:read'])).token;
  const noTracking = (await trackd.createKey(org.id, ['webhooks:write', 'webhooks:read', 'assets:read'])).token;
  const none = (await trackd.createKey(org.id, ['assets:read'])).token;
  const hook = await createWebhook(trackd, token, { url: PUBLIC, event_types: ['asset.created'] });
  t.equal((await trackd.request('GET', '/api/v1/webhooks', { token: readOnly })).status, 200);
  expectError(t, await trackd.request('GET', '/api/v1/webhooks', { token: none }), {
    status: 403,
    type: 'forbidden',
    instance: '/api/v1/webhooks',
  });
  for (const [method, path, body] of [
    ['POST', '/api/v1/webhooks', { url: PUBLIC, event_types: ['asset.created'] }],
    ['DELETE', `/api/v1/webhooks/${hook.id}`, undefined],
    ['POST', `/api/v1/webhooks/${hook.id}/test`, {}],
    ['POST', `/api/v1/webhooks/${hook.id}/replay`, { after: 0 }],
    ['POST', `/api/v1/webhooks/${hook.id}/rotate-secret`, {}],
  ] as const) {
    const res = await trackd.request(method, path, { token: readOnly, body });
    t.equal(res.status, 403, `${method} ${path} needs webhooks:write`);
  }
  const moves = await trackd.request('POST', '/api/v1/webhooks', {
    token: noTracking,
    body: { url: PUBLIC, event_types: ['asset.moved'] },
  });
  expectError(t, moves, {
    status: 403,
    type: 'forbidden',
    detail: 'This API key lacks the required scope for asset.moved events: tracking:read',
    instance: '/api/v1/webhooks',
  });
  const tags = await trackd.request('POST', '/api/v1/webhooks', {
    token: noTracking,
    body: { url: PUBLIC, event_types: ['tag.attached'] },
  });
  t.equal(tags.status, 201, 'tag events with assets:read (those of assets only are delivered)');
  await trackd.request('DELETE', `/api/v1/webhooks/${tags.json.data.id}`, { token });
  const doc = (await trackd.request('GET', '/api/openapi.json')).json;
  t.same(doc.paths['/api/v1/webhooks'].get['x-required-scopes'], ['webhooks:read']);
  t.same(doc.paths['/api/v1/webhooks'].post['x-required-scopes'], ['webhooks:write']);
  t.ok(doc.components.schemas.Webhook && doc.components.schemas.WebhookDelivery && doc.components.schemas.Event, 'named schemas');
  await trackd.request('DELETE', `/api/v1/webhooks/${hook.id}`, { token });
});

t.test('at most 20 endpoints per organization (409), the 21st creates nothing', async (t) => {
  const made = [];
  for (let i = 0; i < 20; i++) made.push(await createWebhook(trackd, token, { url: `${PUBLIC}/${i}`, event_types: ['asset.created'] }));
  const over = await trackd.request('POST', '/api/v1/webhooks', { token, body: { url: PUBLIC, event_types: ['asset.created'] } });
  expectError(t, over, {
    status: 409,
    type: 'conflict',
    detail: 'an organization may register at most 20 webhooks; delete one first',
    instance: '/api/v1/webhooks',
  });
  t.equal((await trackd.request('GET', '/api/v1/webhooks', { token })).json.data.length, 20);
  for (const h of made) t.equal((await trackd.request('DELETE', `/api/v1/webhooks/${h.id}`, { token })).status, 204);
  t.equal((await trackd.request('DELETE', `/api/v1/webhooks/${made[0].id}`, { token })).status, 404, 'a second delete');
});

t.test('org isolation: another org neither sees nor changes an endpoint, and its events never reach it', async (t) => {
  const lenient = await startTrackd(t, {
    env: { WEBHOOK_ALLOWED_CIDRS: '127.0.0.1/32', WEBHOOK_RETRY_FIRST_MS: '20', WEBHOOK_RETRY_MAX_MS: '200' },
  });
  const mine = await lenient.createOrg('Mine');
  const theirs = await lenient.createOrg('Theirs');
  const myToken = (await lenient.createKey(mine.id, WEBHOOK_SCOPES)).token;
  const theirToken = (await lenient.createKey(theirs.id, WEBHOOK_SCOPES)).token;
  const receiver = await startReceiver(t);
  const hook = await createWebhook(lenient, myToken, { url: receiver.url, event_types: ['asset.created'] });
  for (const [method, path, body] of [
    ['GET', `/api/v1/webhooks/${hook.id}`, undefined],
    ['PATCH', `/api/v1/webhooks/${hook.id}`, { status: 'paused' }],
    ['DELETE', `/api/v1/webhooks/${hook.id}`, undefined],
    ['GET', `/api/v1/webhooks/${hook.id}/deliveries`, undefined],
    ['POST', `/api/v1/webhooks/${hook.id}/test`, {}],
    ['POST', `/api/v1/webhooks/${hook.id}/replay`, { after: 0 }],
    ['POST', `/api/v1/webhooks/${hook.id}/rotate-secret`, {}],
  ] as const) {
    const res = await lenient.request(method, path, {
      token: theirToken,
      body,
      contentType: method === 'PATCH' ? 'application/merge-patch+json' : undefined,
    });
    t.equal(res.status, 404, `${method} ${path}: 404 for another org`);
  }
  t.same((await lenient.request('GET', '/api/v1/webhooks', { token: theirToken })).json.data, []);
  await lenient.request('POST', '/api/v1/assets', { token: theirToken, body: { name: 'Theirs' } });
  const own = (await lenient.request('POST', '/api/v1/assets', { token: myToken, body: { name: 'Mine' } })).json.data;
  await eventually(() => receiver.received.length >= 1);
  await lenient.request('POST', `/api/v1/webhooks/${hook.id}/test`, { token: myToken, body: {} });
  await eventually(() => receiver.received.length >= 2);
  t.same(
    receiver.received.map((r) => [r.json.org_id, r.json.type]),
    [
      [mine.id, 'asset.created'],
      [mine.id, 'webhook.test'],
    ],
    "only its own org's events",
  );
  t.equal(receiver.received[0]!.json.data.asset.id, own.id);
  const h = (await lenient.request('GET', `/api/v1/webhooks/${hook.id}`, { token: myToken })).json.data;
  t.equal(h.status, 'active', 'untouched by the other org');
});
