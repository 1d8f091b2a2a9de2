/**
 * End-to-end drain probe: a backlog of scans published to SCANS while trackd is paused (SIGSTOP),
 * then the time from SIGCONT until /metrics shows every message applied; beside it, the raw
 * JetStream ceiling: the same backlog consumed and acked one by one with the same client.
 *
 *   node dist/bench/probes/scanDrain.js [--messages 20000] [--reads 1] [--assets 20000]
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { connect, headers } from '@nats-io/transport-node';
import { AckPolicy, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { ControlPlane } from '../../src/control/controlPlane.js';
import { startNatsServer } from '../../src/nats/embedded.js';
import { loadMasterData } from '../dataset/masterData.js';
import { rfidValue, SIZES } from '../dataset/sizes.js';

const { values } = parseArgs({ options: { messages: { type: 'string' }, reads: { type: 'string' }, assets: { type: 'string' } } });
const MESSAGES = Number(values.messages ?? 20_000);
const READS = Number(values.reads ?? 1);
const ASSETS = Number(values.assets ?? 20_000);
const BIN = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../../../bin/trackd.js');

const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'trackd-drain-'));
const nats = await startNatsServer({ storeDir: path.join(dataDir, 'nats-ext') });
const control = await ControlPlane.open(dataDir);
const org = await control.createOrg('drain', 1);
control.close();
const info = await loadMasterData(dataDir, org.id, 'small', { ...SIZES.small, assets: ASSETS });

const child = spawn(process.execPath, [BIN, 'serve'], {
  env: { ...process.env, PORT: '0', DATA_DIR: dataDir, NATS_URL: nats.url, SHARDS: '1', LOG_LEVEL: 'info', TRACKD_ENV: 'production' },
  stdio: ['ignore', 'pipe', 'inherit'],
});
const port = await new Promise<number>((resolve) => {
  let buf = '';
  child.stdout!.on('data', (d: Buffer) => {
    buf += d.toString();
    const m = /"port":(\d+)[^\n]*"msg":"listening"/.exec(buf);
    if (m) resolve(Number(m[1]));
  });
});
const metric = async (name: string) => {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return line === undefined ? 0 : Number(line.split(' ')[1]);
};
// Let the consumer start, then pause trackd while the backlog is published.
await new Promise((r) => setTimeout(r, 1000));
child.kill('SIGSTOP');

const nc = await connect({ servers: nats.url });
const js = jetstream(nc);
const t0 = Date.now() - 86_400_000;
const publishStarted = performance.now();
for (let i = 0; i < MESSAGES; i += 500) {
  const chunk: Promise<unknown>[] = [];
  for (let j = i; j < Math.min(MESSAGES, i + 500); j++) {
    const reads = Array.from({ length: READS }, (_, r) => ({
      tag_type: 'rfid',
      value: rfidValue(info.assets.first + ((j * READS + r) % ASSETS)),
    }));
    const loc = info.scanLocations[j % info.scanLocations.length]!.external_key;
    const body = JSON.stringify({
      event_id: `drain-${j}`,
      observed_at: new Date(t0 + j).toISOString(),
      location: { external_key: loc },
      reads,
    });
    const h = headers();
    h.set('Nats-Msg-Id', `drain-${j}`);
    chunk.push(js.publish(`scans.${org.id}.fixed`, body, { headers: h }));
  }
  await Promise.all(chunk);
}
const publishSeconds = (performance.now() - publishStarted) / 1000;

// Ceiling: the same backlog, consumed and acked one by one by a bare consumer.
const jsm = await jetstreamManager(nc);
await jsm.consumers.add('SCANS', { durable_name: 'ceiling', ack_policy: AckPolicy.Explicit });
const ceilingStarted = performance.now();
const messages = await (await js.consumers.get('SCANS', 'ceiling')).consume({ max_messages: 2000 });
let seen = 0;
for await (const m of messages) {
  m.ack();
  if (++seen >= MESSAGES) break;
}
const ceilingSeconds = (performance.now() - ceilingStarted) / 1000;

child.kill('SIGCONT');
const drainStarted = performance.now();
while ((await metric('trackd_scans_applied_total')) < MESSAGES) await new Promise((r) => setTimeout(r, 20));
const drainSeconds = (performance.now() - drainStarted) / 1000;

const result = {
  messages: MESSAGES,
  reads_per_message: READS,
  assets: ASSETS,
  publish_msgs_per_s: Math.round(MESSAGES / publishSeconds),
  raw_consume_ack_msgs_per_s: Math.round(MESSAGES / ceilingSeconds),
  trackd_drain_msgs_per_s: Math.round(MESSAGES / drainSeconds),
  trackd_drain_reads_per_s: Math.round((MESSAGES * READS) / drainSeconds),
  ratio_to_raw_consume: Number((ceilingSeconds / drainSeconds).toFixed(2)),
  load_average: os.loadavg().map((l) => Number(l.toFixed(1))),
};
process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
child.kill('SIGTERM');
await new Promise((r) => child.once('exit', r));
await nc.close();
await nats.stop();
fs.rmSync(dataDir, { recursive: true, force: true });
