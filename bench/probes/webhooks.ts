/**
 * Webhook deliveries per second to a local receiver (issue 15, point 3), beside a ceiling measured in the same run:
 *
 *   node dist/bench/probes/webhooks.js [--events 20000] [--endpoints 1,4] [--out bench/results/webhooks.json] [--profile DIR]
 *
 * - trackd: a `trackd serve` child (production settings, one shard, one HTTP thread). For each endpoint
 *   count E: E webhooks on `asset.created` to a receiver on 127.0.0.1, paused; a bulk import of
 *   `events` assets (one asset.created each); then all resumed at once, timed until the receiver holds
 *   events x E deliveries. Checked: each endpoint got every sequence once, in order.
 * - ceiling: the receiver's own max rate: this process POSTs the same body and headers to it, E
 *   connections each sending one request after another (as the dispatcher does per endpoint).
 * The receiver runs in a worker thread of this process (it answers 204 and records what it got).
 * Prints one JSON document and writes it to --out.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { machine, ROOT } from '../lib/processes.js';
import { startBenchNats, TrackdProcess } from '../lib/trackd.js';
import { Receiver, receiverCeiling } from '../lib/webhookReceiver.js';

const { values } = parseArgs({
  options: { events: { type: 'string' }, endpoints: { type: 'string' }, out: { type: 'string' }, profile: { type: 'string' } },
});
const EVENTS = Number(values.events ?? 20_000);
const ENDPOINTS = (values.endpoints ?? '1,4').split(',').map(Number);
const OUT = values.out ?? path.join(ROOT, 'bench', 'results', 'webhooks.json');
const BIN = path.join(ROOT, 'bin', 'trackd.js');

function cli(dataDir: string, args: string[]): any {
  const r = spawnSync(process.execPath, [BIN, ...args], { env: { ...process.env, DATA_DIR: dataDir }, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`trackd ${args.join(' ')}: ${r.stderr}`);
  return JSON.parse(r.stdout);
}

async function call(base: string, token: string, method: string, urlPath: string, body?: unknown, contentType = 'application/json') {
  const res = await fetch(`${base}${urlPath}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': contentType }) },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  if (res.status >= 300) throw new Error(`${method} ${urlPath}: ${res.status} ${text}`);
  return text === '' ? undefined : JSON.parse(text);
}

async function importAssets(base: string, token: string, round: number): Promise<void> {
  let csv = 'external_key,name\n';
  for (let i = 1; i <= EVENTS; i++) csv += `R${round}-${i},Asset ${i}\n`;
  const accepted = await call(base, token, 'POST', '/api/v1/assets/bulk?mode=create', csv, 'text/csv');
  for (;;) {
    const job = (await call(base, token, 'GET', accepted.status_url)).data;
    if (job.status === 'completed') return;
    if (job.status === 'failed') throw new Error(`import failed: ${JSON.stringify(job)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const work = fs.mkdtempSync(path.join(os.tmpdir(), 'trackd-webhooks-bench-'));
const receiver = await Receiver.start();
try {
  const dataDir = path.join(work, 'data');
  fs.mkdirSync(dataDir);
  const nats = await startBenchNats(path.join(work, 'nats'));
  const org = cli(dataDir, ['orgs', 'create', '--name', 'bench']);
  const scopes = 'assets:read,assets:write,webhooks:read,webhooks:write';
  const { token } = cli(dataDir, ['keys', 'create', '--org', String(org.id), '--name', 'bench', '--scopes', scopes, '--env', 'production']);
  const trackd = await TrackdProcess.start({
    dataDir,
    natsUrl: nats.url,
    env: { SHARDS: '1', HTTP_THREADS: '1', WEBHOOK_ALLOWED_CIDRS: '127.0.0.1/32' },
    // --profile DIR: trackd's threads under --cpu-prof, one profile each.
    nodeArgs: values.profile === undefined ? [] : ['--cpu-prof', `--cpu-prof-dir=${values.profile}`],
  });
  const runs: Record<string, unknown>[] = [];
  let sampleBody = '';
  try {
    for (const [round, endpoints] of ENDPOINTS.entries()) {
      const hooks = [];
      for (let e = 0; e < endpoints; e++) {
        const hook = (
          await call(trackd.url, token, 'POST', '/api/v1/webhooks', {
            url: `http://127.0.0.1:${receiver.port}/e${e}`,
            event_types: ['asset.created'],
          })
        ).data;
        await call(trackd.url, token, 'PATCH', `/api/v1/webhooks/${hook.id}`, { status: 'paused' }, 'application/merge-patch+json');
        hooks.push(hook);
      }
      await importAssets(trackd.url, token, round);
      await receiver.ask('reset');
      const started = performance.now();
      for (const hook of hooks)
        await call(trackd.url, token, 'PATCH', `/api/v1/webhooks/${hook.id}`, { status: 'active' }, 'application/merge-patch+json');
      const want = EVENTS * endpoints;
      await receiver.waitFor(want, 600_000);
      const seconds = (performance.now() - started) / 1000;
      await receiver.checkInOrder(EVENTS);
      const page = await call(trackd.url, token, 'GET', `/api/v1/events?after=0&limit=1`);
      sampleBody = JSON.stringify(page.data[0]);
      const ceilingRate = await receiverCeiling(receiver.port, endpoints, Math.min(EVENTS, 20_000), sampleBody);
      const rate = want / seconds;
      runs.push({
        endpoints,
        deliveries: want,
        seconds: Math.round(seconds * 100) / 100,
        deliveries_per_s: Math.round(rate),
        ceiling_receiver_per_s: Math.round(ceilingRate),
        ratio: Math.round((rate / ceilingRate) * 100) / 100,
        every_endpoint_in_order_none_lost: true,
      });
      for (const hook of hooks) await call(trackd.url, token, 'DELETE', `/api/v1/webhooks/${hook.id}`);
    }
  } finally {
    await trackd.stop();
    await nats.stop();
  }
  const result = {
    probe: 'webhooks',
    events: EVENTS,
    body_bytes: Buffer.byteLength(sampleBody),
    machine: machine(),
    load_average: os.loadavg().map((x) => Math.round(x * 10) / 10),
    runs,
  };
  const text = `${JSON.stringify(result, null, 2)}\n`;
  fs.writeFileSync(OUT, text);
  process.stdout.write(text);
} finally {
  await receiver.stop();
  fs.rmSync(work, { recursive: true, force: true });
}
