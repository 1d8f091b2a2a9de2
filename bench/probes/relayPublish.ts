/**
 * What the event relay's publishing costs its thread, per event, before and after
 * src/events/ackedPublish.ts, in one process against one nats-server, in alternating blocks:
 *
 *   node dist/bench/probes/relayPublish.js [--blocks 6] [--events 20000] [--out bench/results/relay-publish.json]
 *
 * - `js.publish`: what the relay did before: batches of 256 events, one `js.publish` each (msgID
 *   and the Trackd-Seq header), awaited together.
 * - `acked`: what it does now: the same batches through AckedPublisher.publishAll.
 * Each block publishes `events` new events (ids never seen, so the stream stores each) of the size
 * of an `asset.created` envelope to a file stream like EVENTS. Per block: events/s (wall) and the
 * thread's busy microseconds per event (event-loop utilization's active time: what the shard
 * thread could not spend on anything else). Medians per path, and their ratio.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { headers } from '@nats-io/transport-node';
import { AckedPublisher, type StreamMessage } from '../../src/events/ackedPublish.js';
import { ensureEventsStream, eventSubject, SEQ_HEADER } from '../../src/events/relay.js';
import { connectNats } from '../../src/scans/streams.js';
import { machine, ROOT } from '../lib/processes.js';
import { startBenchNats } from '../lib/trackd.js';

const { values } = parseArgs({ options: { blocks: { type: 'string' }, events: { type: 'string' }, out: { type: 'string' } } });
const BLOCKS = Number(values.blocks ?? 6);
const EVENTS = Number(values.events ?? 20_000);
const OUT = values.out ?? path.join(ROOT, 'bench', 'results', 'relay-publish.json');
const BATCH = 256;

/** An asset.created envelope's size (about 480 bytes), its id and sequence unique. */
function envelope(seq: number, id: string): string {
  const data = `{"id":${seq},"external_key":"BULK-${seq}","name":"Asset ${seq}","description":null,"is_active":true,"valid_from":"2026-11-26T02:00:00.000Z","valid_to":null,"created_at":"2026-11-26T02:00:00.000Z","updated_at":"2026-11-26T02:00:00.000Z","deleted_at":null,"tags":[{"id":${seq},"tag_type":"rfid","value":"E2${String(seq).padStart(22, '0')}"}],"metadata":{}}`;
  return `{"id":"${id}","seq":${seq},"type":"asset.created","org_id":1,"occurred_at":"2026-11-26T02:00:00.000Z","data":${data}}`;
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 === 1 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

const work = fs.mkdtempSync(path.join(os.tmpdir(), 'trackd-relay-publish-'));
const nats = await startBenchNats(path.join(work, 'nats'));
try {
  const nc = await connectNats(nats.url, 'relay-publish-probe', { reconnect: false, noAsyncTraces: true });
  await ensureEventsStream(await jetstreamManager(nc), 3_600_000);
  const js = jetstream(nc);
  const publisher = new AckedPublisher(nc);
  let seq = 0;
  const paths = {
    'js.publish': async (events: { subject: string; data: string; id: string; seq: number }[]) => {
      const acks: Promise<unknown>[] = [];
      for (const e of events) {
        const h = headers();
        h.set(SEQ_HEADER, String(e.seq));
        acks.push(js.publish(e.subject, e.data, { msgID: e.id, headers: h }));
      }
      await Promise.all(acks);
    },
    acked: async (events: { subject: string; data: string; id: string; seq: number }[]) => {
      const messages: StreamMessage[] = [];
      for (const e of events) {
        const h = headers();
        h.set('Nats-Msg-Id', e.id);
        h.set(SEQ_HEADER, String(e.seq));
        messages.push({ subject: e.subject, data: e.data, headers: h });
      }
      await publisher.publishAll(messages);
    },
  };
  const blocks: { path: string; events_per_s: number; busy_us_per_event: number }[] = [];
  for (let b = 0; b < BLOCKS * 2; b++) {
    const name = b % 2 === 0 ? 'js.publish' : 'acked';
    const before = performance.eventLoopUtilization();
    const started = performance.now();
    for (let from = 0; from < EVENTS; from += BATCH) {
      const events = Array.from({ length: Math.min(BATCH, EVENTS - from) }, () => {
        seq++;
        const id = `evt-${process.pid}-${seq}`;
        return { subject: eventSubject(1, 'asset.created'), data: envelope(seq, id), id, seq };
      });
      await paths[name](events);
    }
    const seconds = (performance.now() - started) / 1000;
    const elu = performance.eventLoopUtilization(before);
    blocks.push({
      path: name,
      events_per_s: Math.round(EVENTS / seconds),
      busy_us_per_event: Math.round((elu.active * 1000 * 100) / EVENTS) / 100,
    });
    process.stderr.write(`${JSON.stringify(blocks.at(-1))}\n`);
  }
  publisher.close();
  await nc.close();
  const of = (name: string) => blocks.filter((b) => b.path === name);
  const summary = Object.fromEntries(
    ['js.publish', 'acked'].map((name) => [
      name,
      { events_per_s: median(of(name).map((b) => b.events_per_s)), busy_us_per_event: median(of(name).map((b) => b.busy_us_per_event)) },
    ]),
  );
  const result = {
    probe: 'relay-publish',
    blocks_per_path: BLOCKS,
    events_per_block: EVENTS,
    batch: BATCH,
    machine: machine(),
    load_average: os.loadavg().map((x) => Math.round(x * 10) / 10),
    medians: summary,
    acked_vs_js_publish: {
      busy_per_event: Math.round((summary.acked!.busy_us_per_event / summary['js.publish']!.busy_us_per_event) * 100) / 100,
      events_per_s: Math.round((summary.acked!.events_per_s / summary['js.publish']!.events_per_s) * 100) / 100,
    },
    blocks,
  };
  fs.writeFileSync(OUT, `${JSON.stringify(result, null, 2)}\n`);
  process.stdout.write(`${JSON.stringify(result.medians)} ${JSON.stringify(result.acked_vs_js_publish)}\n`);
} finally {
  await nats.stop();
  fs.rmSync(work, { recursive: true, force: true });
}
