import os from 'node:os';
import path from 'node:path';
import { EVENT_TYPES } from '../../src/events/types.js';
import { eventHead } from '../lib/eventStreams.js';
import type { CustomScenario } from '../lib/scenario.js';
import { ALL_SCOPES, trackdCli } from '../lib/trackd.js';
import { Receiver, receiverCeiling } from '../lib/webhookReceiver.js';

/** Events each endpoint is sent per second of --duration (5,000 by default). */
const EVENTS_PER_SECOND_OF_DURATION = 1_000;

/**
 * Webhook deliveries per second to a receiver on 127.0.0.1 (a worker thread of the bench process,
 * answering 204), from the log the bench already holds: `endpoints` webhooks on every event type
 * are created with `after` = the head minus N, so each is owed the last N events at once (no
 * events are added, the dataset stays as it is). Timed from the first create until the receiver
 * holds N x endpoints deliveries; each endpoint checked to have got every sequence once, in
 * order. The ceiling, in the same run: the receiver's own rate, this process POSTing the same body
 * one request after another on `endpoints` connections (as the dispatcher does per endpoint).
 * trackd is restarted with WEBHOOK_ALLOWED_CIDRS=127.0.0.1/32 for it (and restarted back after).
 */
function webhookScenario(endpoints: number): CustomScenario {
  return {
    kind: 'custom',
    name: `webhooks-${endpoints}`,
    title: `webhook deliveries/s to a local receiver, ${endpoints} endpoint${endpoints === 1 ? '' : 's'}, in order per endpoint`,
    needs: ['POST /api/v1/webhooks', 'GET /api/v1/events'],
    unit: 'msgs/s',
    async run(ctx) {
      const dataDir = path.join(ctx.workDir, 'data');
      const { token } = trackdCli(dataDir, [
        'keys',
        'create',
        '--org',
        String(ctx.dataset.orgId),
        '--name',
        `bench-webhooks-${Date.now()}`,
        '--scopes',
        `${ALL_SCOPES},webhooks:read,webhooks:write`,
        '--env',
        'production',
      ]) as { token: string };
      const receiver = await Receiver.start();
      await ctx.restartTrackd({ WEBHOOK_ALLOWED_CIDRS: '127.0.0.1/32' });
      const call = async (method: string, urlPath: string, body?: unknown) => {
        const res = await fetch(`${ctx.trackd.url}${urlPath}`, {
          method,
          headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
          body: body === undefined ? undefined : JSON.stringify(body),
        });
        const text = await res.text();
        if (res.status >= 300) throw new Error(`${method} ${urlPath}: ${res.status} ${text.slice(0, 300)}`);
        return text === '' ? undefined : JSON.parse(text);
      };
      const hooks: number[] = [];
      try {
        const head = await eventHead(ctx);
        const perEndpoint = Math.min(head, Math.max(100, Math.round(EVENTS_PER_SECOND_OF_DURATION * ctx.options.durationSeconds)));
        const after = head - perEndpoint;
        const sample = await call('GET', `/api/v1/events?after=${after}&limit=1`);
        await receiver.ask('reset');
        const started = performance.now();
        for (let e = 0; e < endpoints; e++) {
          const created = await call('POST', '/api/v1/webhooks', {
            url: `http://127.0.0.1:${receiver.port}/e${e}`,
            event_types: EVENT_TYPES,
            after,
          });
          hooks.push(created.data.id as number);
        }
        await receiver.waitFor(perEndpoint * endpoints, 600_000);
        const seconds = (performance.now() - started) / 1000;
        await receiver.checkInOrder(perEndpoint, after);
        const load = Math.round(os.loadavg()[0]! * 10) / 10;
        await receiver.ask('reset');
        const ceiling = await receiverCeiling(receiver.port, endpoints, perEndpoint, JSON.stringify(sample.data[0]));
        return {
          trackd: { rate: Math.round((perEndpoint * endpoints) / seconds), count: perEndpoint * endpoints },
          ceiling: { name: 'receiver', rate: Math.round(ceiling) },
          extra: { endpoints, events_per_endpoint: perEndpoint, seconds: Math.round(seconds * 100) / 100, load_average_1m: load },
        };
      } finally {
        for (const id of hooks) await call('DELETE', `/api/v1/webhooks/${id}`).catch(() => undefined);
        await receiver.stop();
        await ctx.restartTrackd();
      }
    },
  };
}

export const webhooks1 = webhookScenario(1);
export const webhooks4 = webhookScenario(4);
