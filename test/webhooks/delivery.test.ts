/**
 * Webhook deliveries (issue 15, point 3): Standard Webhooks headers verified with the
 * `standardwebhooks` package, in order, retried with backoff, Retry-After, redeliver, replay, test
 * events, secret rotation, filters, and a receiver down for a while.
 */
import t from 'tap';
import { Webhook } from 'standardwebhooks';
import { eventually, startTrackd } from '../helpers/trackd.js';
import { createWebhook, deliveries, FAST_RETRIES, startReceiver, WEBHOOK_SCOPES } from '../helpers/webhooks.js';

const trackd = await startTrackd(t, { env: { ...FAST_RETRIES, WEBHOOK_RETRY_WINDOW_SECONDS: '600' } });
const org = await trackd.createOrg('Hooks Org');
const token = (await trackd.createKey(org.id, WEBHOOK_SCOPES)).token;

const post = async (path: string, body: unknown) => {
  const res = await trackd.request('POST', path, { token, body });
  if (res.status !== 201 && res.status !== 200) throw new Error(`${path}: ${res.status} ${res.text}`);
  return res.json.data;
};
let assets = 0;
const newAsset = () => post('/api/v1/assets', { name: `Asset ${++assets}` });

t.test('deliveries carry Standard Webhooks headers that standardwebhooks verifies, in sequence order', async (t) => {
  const receiver = await startReceiver(t);
  const hook = await createWebhook(trackd, token, { url: receiver.url, event_types: ['asset.created', 'asset.updated'] });
  t.match(hook.secret, /^whsec_[A-Za-z0-9+/]{43}=$/);
  t.equal(hook.status, 'active');
  const created = [];
  for (let i = 0; i < 5; i++) created.push(await newAsset());
  await eventually(() => receiver.received.length >= 5);
  const verifier = new Webhook(hook.secret);
  const seqs = [];
  for (const r of receiver.received) {
    const payload = verifier.verify(r.body, r.headers as Record<string, string>) as any;
    t.equal(r.headers['webhook-id'], payload.id, 'webhook-id is the event id');
    const ts = Number(r.headers['webhook-timestamp']);
    t.ok(Math.abs(ts * 1000 - Date.now()) < 60_000, 'webhook-timestamp is the attempt time (seconds)');
    t.equal(r.headers['content-type'], 'application/json');
    seqs.push(payload.seq);
  }
  t.same(
    receiver.received.map((r) => r.json.data.asset.id),
    created.map((a) => a.id),
    'in commit order',
  );
  t.same(
    seqs,
    [...seqs].sort((a, b) => a - b),
  );
  const tampered = receiver.received[0]!;
  t.throws(
    () => verifier.verify(tampered.body.replace('Asset', 'Xsset'), tampered.headers as Record<string, string>),
    'a changed body fails',
  );
  t.throws(() =>
    new Webhook(`whsec_${Buffer.alloc(32, 7).toString('base64')}`).verify(tampered.body, tampered.headers as Record<string, string>),
  );
  const log = await eventually(async () => {
    const l = await deliveries(trackd, token, hook.id);
    return l.length >= 5 && l;
  });
  t.same(
    log.map((d: any) => [d.kind, d.status, d.attempt, d.response_excerpt]),
    Array(5).fill(['event', 200, 1, 'ok']),
  );
  t.equal((await trackd.request('DELETE', `/api/v1/webhooks/${hook.id}`, { token })).status, 204);
});

t.test(
  'a failing receiver: the same event retried with backoff until a 2xx, the next one only after it; Retry-After honoured',
  async (t) => {
    const receiver = await startReceiver(t);
    let failures = 2;
    receiver.answer = () => (failures-- > 0 ? { status: 500, body: 'down for maintenance' } : { status: 204 });
    const hook = await createWebhook(trackd, token, { url: receiver.url, event_types: ['asset.created'] });
    const first = await newAsset();
    const second = await newAsset();
    await eventually(() => receiver.received.length >= 4);
    t.same(
      receiver.received.map((r) => r.json.data.asset.id),
      [first.id, first.id, first.id, second.id],
      'the first event three times (two 500s, then 204), the second after it',
    );
    t.equal(new Set(receiver.received.slice(0, 3).map((r) => r.headers['webhook-id'])).size, 1, 'a retry keeps its webhook-id');
    const log = (
      await eventually(async () => {
        const l = await deliveries(trackd, token, hook.id);
        return l.length >= 4 && l;
      })
    ).reverse();
    t.same(
      log.map((d: any) => [d.event_seq === log[0].event_seq, d.attempt, d.status, d.response_excerpt]),
      [
        [true, 1, 500, 'down for maintenance'],
        [true, 2, 500, 'down for maintenance'],
        [true, 3, 204, null],
        [false, 1, 204, null],
      ],
    );
    t.ok(log.every((d: any) => Number.isInteger(d.latency_ms) && d.latency_ms >= 0));

    // Retry-After: 1 second asked, far above the compressed backoff (20 ms).
    receiver.received.length = 0;
    let asked = false;
    receiver.answer = () => {
      if (asked) return { status: 200 };
      asked = true;
      return { status: 429, headers: { 'Retry-After': '1' } };
    };
    await newAsset();
    await eventually(() => receiver.received.length >= 2);
    const waited = receiver.received[1]!.at - receiver.received[0]!.at;
    t.ok(waited >= 950, `the retry waited for Retry-After (${waited} ms)`);
    const hookNow = await eventually(async () => {
      const h = (await trackd.request('GET', `/api/v1/webhooks/${hook.id}`, { token })).json.data;
      return h.last_delivered_seq === receiver.received[1]!.json.seq && h;
    });
    t.equal(hookNow.failed_attempts, 0, 'the count is reset by the success');
    t.equal(hookNow.failing_since, null);
    await trackd.request('DELETE', `/api/v1/webhooks/${hook.id}`, { token });
  },
);

t.test('redeliver one, replay from a sequence, a test event', async (t) => {
  const receiver = await startReceiver(t);
  const hook = await createWebhook(trackd, token, { url: receiver.url, event_types: ['asset.created'] });
  const made = [await newAsset(), await newAsset(), await newAsset()];
  await eventually(() => receiver.received.length >= 3);
  const log = await eventually(async () => {
    const l = await deliveries(trackd, token, hook.id);
    return l.length >= 3 && l;
  });
  const second = log.find((d: any) => d.message_id === receiver.received[1]!.headers['webhook-id']);
  const again = await trackd.request('POST', `/api/v1/webhooks/${hook.id}/deliveries/${second.id}/redeliver`, { token, body: {} });
  t.equal(again.status, 202);
  t.equal(again.json.data.message_id, second.message_id);
  await eventually(() => receiver.received.length >= 4);
  t.equal(receiver.received[3]!.headers['webhook-id'], second.message_id, 'the same message again');
  t.equal(receiver.received[3]!.json.data.asset.id, made[1]!.id);
  new Webhook(hook.secret).verify(receiver.received[3]!.body, receiver.received[3]!.headers as Record<string, string>);
  const redelivered = await eventually(async () => (await deliveries(trackd, token, hook.id)).find((d: any) => d.kind === 'redelivery'));
  t.equal(redelivered.status, 200);

  const missing = await trackd.request('POST', `/api/v1/webhooks/${hook.id}/deliveries/999999/redeliver`, { token, body: {} });
  t.equal(missing.status, 404);

  // Replay from the first event's sequence minus one: all three again, in order.
  const replay = await trackd.request('POST', `/api/v1/webhooks/${hook.id}/replay`, {
    token,
    body: { after: receiver.received[0]!.json.seq - 1 },
  });
  t.equal(replay.status, 200);
  t.equal(replay.json.data.last_delivered_seq, receiver.received[0]!.json.seq - 1);
  await eventually(() => receiver.received.length >= 7);
  t.same(
    receiver.received.slice(4).map((r) => r.json.data.asset.id),
    made.map((a) => a.id),
    'replayed in order',
  );
  const ahead = await trackd.request('POST', `/api/v1/webhooks/${hook.id}/replay`, { token, body: { after: 1_000_000 } });
  t.equal(ahead.status, 400, 'a replay past the head is refused');

  const test = await trackd.request('POST', `/api/v1/webhooks/${hook.id}/test`, { token, body: {} });
  t.equal(test.status, 202);
  await eventually(() => receiver.received.length >= 8);
  const ping = receiver.received[7]!;
  const payload = new Webhook(hook.secret).verify(ping.body, ping.headers as Record<string, string>) as any;
  t.equal(payload.type, 'webhook.test');
  t.same(payload.data, { webhook_id: hook.id });
  t.equal(ping.headers['webhook-id'], test.json.data.message_id);
  await trackd.request('DELETE', `/api/v1/webhooks/${hook.id}`, { token });
});

t.test('secret rotation: both secrets sign during the overlap, the new one alone after', async (t) => {
  const receiver = await startReceiver(t);
  const hook = await createWebhook(trackd, token, { url: receiver.url, event_types: ['asset.created'] });
  const rotated = await trackd.request('POST', `/api/v1/webhooks/${hook.id}/rotate-secret`, { token, body: {} });
  t.equal(rotated.status, 200);
  const fresh = rotated.json.data.secret;
  t.not(fresh, hook.secret);
  await newAsset();
  await eventually(() => receiver.received.length >= 1);
  const during = receiver.received[0]!;
  t.equal(String(during.headers['webhook-signature']).split(' ').length, 2, 'two signatures');
  t.doesNotThrow(() => new Webhook(fresh).verify(during.body, during.headers as Record<string, string>), 'the new secret verifies');
  t.doesNotThrow(() => new Webhook(hook.secret).verify(during.body, during.headers as Record<string, string>), 'the previous one too');

  const dropped = await trackd.request('POST', `/api/v1/webhooks/${hook.id}/rotate-secret`, {
    token,
    body: { previous_valid_for_seconds: 0 },
  });
  const newest = dropped.json.data.secret;
  await newAsset();
  await eventually(() => receiver.received.length >= 2);
  const after = receiver.received[1]!;
  t.equal(String(after.headers['webhook-signature']).split(' ').length, 1, 'one signature');
  new Webhook(newest).verify(after.body, after.headers as Record<string, string>);
  t.throws(() => new Webhook(fresh).verify(after.body, after.headers as Record<string, string>), 'the previous secret no longer verifies');
  await trackd.request('DELETE', `/api/v1/webhooks/${hook.id}`, { token });
});

t.test('filters: asset ids, a location subtree; types', async (t) => {
  const receiver = await startReceiver(t);
  const site = await post('/api/v1/locations', { name: 'Site' });
  const room = await post('/api/v1/locations', { name: 'Room', parent_id: site.id });
  const elsewhere = await post('/api/v1/locations', { name: 'Elsewhere' });
  const watched = await newAsset();
  const other = await newAsset();
  const byAsset = await createWebhook(trackd, token, {
    url: `${receiver.url}?asset`,
    event_types: ['asset.updated', 'tag.attached'],
    filters: { asset_ids: [watched.id] },
  });
  const bySite = await createWebhook(trackd, token, {
    url: `${receiver.url}?site`,
    event_types: ['location.updated', 'tag.attached'],
    filters: { location_id: site.id },
  });
  for (const a of [other, watched])
    await trackd.request('PATCH', `/api/v1/assets/${a.id}`, {
      token,
      body: { name: `${a.name}!` },
      contentType: 'application/merge-patch+json',
    });
  await post(`/api/v1/assets/${watched.id}/tags`, { tag_type: 'rfid', value: `W${watched.id}` });
  for (const l of [elsewhere, room, site])
    await trackd.request('PATCH', `/api/v1/locations/${l.id}`, {
      token,
      body: { name: `${l.name}!` },
      contentType: 'application/merge-patch+json',
    });
  await post(`/api/v1/locations/${room.id}/tags`, { tag_type: 'rfid', value: `R${room.id}` });
  await eventually(() => receiver.received.length >= 5);
  const verifiesWith = (hook: any) => (r: any) => {
    try {
      new Webhook(hook.secret).verify(r.body, r.headers);
      return true;
    } catch {
      return false;
    }
  };
  const mine = (hook: any) =>
    receiver.received
      .filter(verifiesWith(hook))
      .map((r) => [r.json.type, r.json.data.asset?.id ?? r.json.data.location?.id ?? r.json.data.owner_id]);
  t.same(mine(byAsset), [
    ['asset.updated', watched.id],
    ['tag.attached', watched.id],
  ]);
  t.same(mine(bySite), [
    ['location.updated', room.id],
    ['location.updated', site.id],
    ['tag.attached', room.id],
  ]);
  t.equal(receiver.received.length, 5, 'nothing else');
  for (const h of [byAsset, bySite]) await trackd.request('DELETE', `/api/v1/webhooks/${h.id}`, { token });
});

t.test('a receiver down for a while: every event delivered once it is back, in order, none lost', async (t) => {
  const receiver = await startReceiver(t);
  const hook = await createWebhook(trackd, token, { url: receiver.url, event_types: ['asset.created'] });
  await receiver.stop();
  const made = [];
  for (let i = 0; i < 30; i++) made.push(await newAsset());
  const failing = await eventually(async () => {
    const l = await deliveries(trackd, token, hook.id);
    return l.length >= 3 && l;
  });
  t.ok(
    failing.every((d: any) => d.status === null && /connection error/.test(d.error)),
    'attempts fail while it is down',
  );
  t.ok(
    failing.every((d: any) => d.event_seq === failing[0].event_seq),
    'always the first event',
  );
  await receiver.start();
  await eventually(() => receiver.received.length >= 30, 10_000);
  t.same(
    receiver.received.map((r) => r.json.data.asset.id),
    made.map((a) => a.id),
    'all 30, in order, once each',
  );
  await trackd.request('DELETE', `/api/v1/webhooks/${hook.id}`, { token });
});
