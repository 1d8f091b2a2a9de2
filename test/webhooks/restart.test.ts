/**
 * Webhook deliveries are durable: the cursor lives in the shard file, so a kill -9 in the middle of
 * a backlog (successes not yet recorded, an event failing) and a restart deliver every event, at
 * least once, in order: the first arrival of each event follows the sequence with nothing missing.
 */
import t from 'tap';
import { eventually, spawnTrackd, startNats } from '../helpers/trackd.js';
import { createWebhook, FAST_RETRIES, startReceiver, WEBHOOK_SCOPES } from '../helpers/webhooks.js';

const nats = await startNats(t);
const trackd = await spawnTrackd(t, { natsUrl: nats.url, env: { ...FAST_RETRIES, WEBHOOK_RETRY_WINDOW_SECONDS: '600' } });
t.teardown(() => trackd.stop());
const org = await trackd.createOrg('Durable Hooks');
const token = (await trackd.createKey(org.id, WEBHOOK_SCOPES)).token;

t.test('kill -9 with a backlog in flight: after the restart every event arrives, in order, none lost', async (t) => {
  const receiver = await startReceiver(t);
  // The first 10 events are taken; then the receiver fails, so the dispatcher holds the 11th in retries.
  receiver.answer = () => (new Set(receiver.received.map((r) => r.json.seq)).size <= 10 ? { status: 200 } : { status: 500 });
  const hook = await createWebhook(trackd, token, { url: receiver.url, event_types: ['asset.created'] });
  const made: number[] = [];
  for (let i = 0; i < 40; i++) made.push((await trackd.request('POST', '/api/v1/assets', { token, body: { name: `D${i}` } })).json.data.id);
  await eventually(() => receiver.received.length >= 12, 20_000);
  await trackd.stop('SIGKILL');
  t.equal(trackd.process.signalCode, 'SIGKILL');
  const beforeRestart = receiver.received.length;
  receiver.answer = () => ({ status: 200 });
  await trackd.restart();
  await eventually(() => new Set(receiver.received.map((r) => r.json.data.asset.id)).size >= 40, 30_000);
  const firstArrivals: number[] = [];
  for (const r of receiver.received) if (!firstArrivals.includes(r.json.data.asset.id)) firstArrivals.push(r.json.data.asset.id);
  t.same(firstArrivals, made, 'every event, first arrivals in sequence order');
  const seqs = receiver.received.slice(beforeRestart).map((r) => r.json.seq);
  t.same(
    seqs,
    [...seqs].sort((a, b) => a - b),
    'after the restart: in order from the recorded cursor',
  );
  t.ok(seqs[0] <= receiver.received[10]!.json.seq, 'it resumed at or before the event that was failing');
  const after = await eventually(async () => {
    const h = (await trackd.request('GET', `/api/v1/webhooks/${hook.id}`, { token })).json.data;
    return h.last_delivered_seq === receiver.received.at(-1)!.json.seq && h;
  });
  t.equal(after.failed_attempts, 0);
  const log = (await trackd.request('GET', `/api/v1/webhooks/${hook.id}/deliveries?limit=200`, { token })).json.data;
  t.ok(
    log.some((d: any) => d.status === 500),
    'the failed attempts recorded before the kill are in the log',
  );

  // A graceful restart keeps the endpoint as it was (cursor, secret): the next event verifies with the same secret.
  await trackd.restart();
  const count = receiver.received.length;
  await trackd.request('POST', '/api/v1/assets', { token, body: { name: 'after' } });
  await eventually(() => receiver.received.length > count, 20_000);
  const { Webhook } = await import('standardwebhooks');
  const last = receiver.received.at(-1)!;
  t.equal((new Webhook(hook.secret).verify(last.body, last.headers as Record<string, string>) as any).data.asset.name, 'after');
  t.equal(receiver.received.length, count + 1, 'nothing sent twice after a graceful restart');
});
