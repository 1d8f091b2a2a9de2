/**
 * Webhook endpoints that stop: a 410 pauses at once, an event failing for the whole retry window
 * (compressed to 1 s here) pauses; paused keeps the events (resume delivers them, in order); the
 * endpoint's status and the delivery log say why.
 */
import t from 'tap';
import { eventually, startTrackd } from '../helpers/trackd.js';
import { createWebhook, deliveries, FAST_RETRIES, startReceiver, WEBHOOK_SCOPES } from '../helpers/webhooks.js';

const trackd = await startTrackd(t, { env: { ...FAST_RETRIES, WEBHOOK_RETRY_WINDOW_SECONDS: '1' } });
const org = await trackd.createOrg('Failing Hooks');
const token = (await trackd.createKey(org.id, WEBHOOK_SCOPES)).token;
let n = 0;
const newAsset = async () => (await trackd.request('POST', '/api/v1/assets', { token, body: { name: `A${++n}` } })).json.data;
const getHook = async (id: number) => (await trackd.request('GET', `/api/v1/webhooks/${id}`, { token })).json.data;
const resume = (id: number) =>
  trackd.request('PATCH', `/api/v1/webhooks/${id}`, { token, body: { status: 'active' }, contentType: 'application/merge-patch+json' });

t.test('410 Gone pauses the endpoint at that event; resuming delivers it and the rest in order', async (t) => {
  const receiver = await startReceiver(t);
  receiver.answer = () => ({ status: 410, body: 'gone' });
  const hook = await createWebhook(trackd, token, { url: receiver.url, event_types: ['asset.created'] });
  const made = [await newAsset(), await newAsset()];
  const paused = await eventually(async () => {
    const h = await getHook(hook.id);
    return h.status === 'paused' && h;
  });
  t.equal(paused.paused_reason, 'gone');
  t.equal(receiver.received.length, 1, 'one attempt, no retry after a 410');
  t.equal(paused.last_delivered_seq, hook.last_delivered_seq, 'the cursor stays before the event');
  made.push(await newAsset());
  receiver.answer = () => ({ status: 200 });
  t.equal((await resume(hook.id)).json.data.status, 'active');
  await eventually(() => receiver.received.length >= 4);
  t.same(
    receiver.received.slice(1).map((r) => r.json.data.asset.id),
    made.map((a) => a.id),
    'nothing dropped while paused',
  );
  const h = await eventually(async () => {
    const x = await getHook(hook.id);
    return x.last_delivered_seq === receiver.received[3]!.json.seq && x;
  });
  t.equal(h.paused_reason, null);
  await trackd.request('DELETE', `/api/v1/webhooks/${hook.id}`, { token });
});

t.test('an event failing past the retry window pauses the endpoint (retry_window); a manual pause holds deliveries', async (t) => {
  const receiver = await startReceiver(t);
  receiver.answer = () => ({ status: 503, body: 'x'.repeat(5000) });
  const hook = await createWebhook(trackd, token, { url: receiver.url, event_types: ['asset.created'] });
  const first = await newAsset();
  const paused = await eventually(async () => {
    const h = await getHook(hook.id);
    return h.status === 'paused' && h;
  }, 10_000);
  t.equal(paused.paused_reason, 'retry_window');
  t.ok(paused.failed_attempts >= 3, `retried (${paused.failed_attempts} attempts) before pausing`);
  const log = await deliveries(trackd, token, hook.id);
  t.ok(
    log.every((d: any) => d.status === 503 && d.response_excerpt.length === 1024),
    'the excerpt is the first 1,024 bytes',
  );
  // The window is judged when an attempt's answer comes: the last attempt began before the window's end and ended after it.
  const span = Date.parse(log[0].attempted_at) + log[0].latency_ms - Date.parse(log[log.length - 1].attempted_at);
  t.ok(span >= 999, `attempts spread over the window (${span} ms, the last one's answer included)`);
  const attemptsWhenPaused = receiver.received.length;

  receiver.answer = () => ({ status: 200 });
  await resume(hook.id);
  await eventually(() => receiver.received.length > attemptsWhenPaused);
  t.equal(receiver.received.at(-1)!.json.data.asset.id, first.id, 'resumed at the event that failed');

  const manual = await trackd.request('PATCH', `/api/v1/webhooks/${hook.id}`, {
    token,
    body: { status: 'paused' },
    contentType: 'application/merge-patch+json',
  });
  t.equal(manual.json.data.paused_reason, 'manual');
  const before = receiver.received.length;
  const held = await newAsset();
  const test = await trackd.request('POST', `/api/v1/webhooks/${hook.id}/test`, { token, body: {} });
  await eventually(() => receiver.received.length > before);
  t.equal(receiver.received.at(-1)!.json.type, 'webhook.test', 'a test event goes to a paused endpoint');
  t.equal(receiver.received.at(-1)!.headers['webhook-id'], test.json.data.message_id);
  t.equal(receiver.received.length, before + 1, 'events wait while paused');
  await resume(hook.id);
  t.ok(await eventually(() => receiver.received.at(-1)?.json.data.asset?.id === held.id), 'delivered after the resume');
  await trackd.request('DELETE', `/api/v1/webhooks/${hook.id}`, { token });
});
