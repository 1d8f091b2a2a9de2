import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { RequestTemplate } from '../lib/loadSpec.js';
import { StageLog } from '../lib/eventStages.js';
import { checkComplete, EVENT_OPERATIONS, eventHead, openEventClients } from '../lib/eventStreams.js';
import { fieldPlan, publish, SCAN_OPERATIONS, waitVisible } from '../lib/ingest.js';
import { openLoopFigure } from '../lib/measure.js';
import type { CustomScenario } from '../lib/scenario.js';
import { assetById } from './assetById.js';
import { history } from './history.js';

/** The field workload's pace while latency is measured: 400 messages of 50 reads, 20,000 reads/s. */
const LATENCY_MSGS_PER_S = 400;
/** The pace while 1,000 clients listen: 20 messages of 50 reads per second (about 50 moves/s, each to every client). */
const FANOUT_MSGS_PER_S = 20;
const READS = 50;
/** Reads a second offered (open loop) while 1,000 clients stream: the R of "reads at rate R keep p99 <= 50 ms". */
export const FANOUT_READ_RATE = 250;

const loadAverage = () => Math.round(os.loadavg()[0]! * 10) / 10;

/**
 * Scan published to event received, over one transport: one client streams the org's events from
 * the head while the field workload is published at 20,000 reads/s (paced, for --duration). Each
 * move's latency is its arrival minus its `occurred_at` (the JetStream time of the scan message that
 * made it, on this machine's clock). Beside it, in the same run and under the same load, the
 * publisher's publish-to-visible probes (the report polled every 20 ms): the event cannot be
 * earlier than the commit that the report shows. The client must get every event, once, in order.
 * Before the measured window, the bench's warm-up (`--warmup`, as for the HTTP scenarios): the same
 * workload for that long, its events checked and their latency reported apart (`warmup_p99_ms`).
 */
function latencyScenario(transport: 'sse' | 'ws'): CustomScenario {
  const NAME = `events-${transport}-latency`;
  return {
    kind: 'custom',
    name: NAME,
    title: `scan published to event received over ${transport === 'sse' ? 'Server-Sent Events' : 'the WebSocket'}, field workload at ${LATENCY_MSGS_PER_S * READS} reads/s`,
    needs: [...SCAN_OPERATIONS, ...EVENT_OPERATIONS],
    unit: 'reads/s',
    async run(ctx) {
      // --stages: trackd again at LOG_LEVEL=debug, its batch and poll lines collected (eventStages.ts).
      const stageLog = ctx.options.stages ? new StageLog() : undefined;
      if (stageLog !== undefined) {
        await ctx.restartTrackd({ LOG_LEVEL: 'debug' });
        ctx.trackd.child.stdout!.on('data', (d: Buffer) => stageLog.take(d.toString()));
      }
      const after = await eventHead(ctx);
      const clients = await openEventClients(ctx, {
        sse: transport === 'sse' ? 1 : 0,
        ws: transport === 'ws' ? 1 : 0,
        latencyClients: 1,
        after,
        arrivals: stageLog !== undefined,
      });
      try {
        // The bench's warm-up, as the HTTP scenarios have theirs: the same workload at the same pace
        // with the client streaming, its events received and checked but not in the figures (summarized apart).
        let measureAfter = after;
        const warmupMessages = Math.round(LATENCY_MSGS_PER_S * ctx.options.warmupSeconds);
        if (warmupMessages > 0) {
          const warm = await publish(ctx, fieldPlan(ctx, READS, warmupMessages, `events-${transport}-warmup`), {
            ratePerSecond: LATENCY_MSGS_PER_S,
          });
          await waitVisible(ctx, warm.last.asset, warm.last.observedAt, 60_000);
          measureAfter = await eventHead(ctx);
        }
        const messages = Math.max(20, Math.round(LATENCY_MSGS_PER_S * ctx.options.durationSeconds));
        const published = await publish(ctx, fieldPlan(ctx, READS, messages, `events-${transport}`), {
          ratePerSecond: LATENCY_MSGS_PER_S,
          probeEveryMs: 20,
        });
        await waitVisible(ctx, published.last.asset, published.last.observedAt, 60_000);
        const load = loadAverage();
        const got = await clients.finish(await eventHead(ctx), measureAfter);
        checkComplete(NAME, got);
        const visible = published.probes;
        if (stageLog !== undefined)
          fs.writeFileSync(
            path.join(ctx.workDir, `stages-${NAME}.jsonl`),
            `${[...stageLog.lines, ...(got.arrivals ?? []).map((a) => JSON.stringify({ arrival: a }))].join('\n')}\n`,
          );
        return {
          trackd: {
            rate: Math.round((messages * READS) / published.seconds),
            p50: got.latency.p50,
            p99: got.latency.p99,
            max: got.latency.max,
            count: got.latency.count,
          },
          extra: {
            offered_reads_per_s: LATENCY_MSGS_PER_S * READS,
            publisher_max_behind_ms: published.max_behind_ms,
            events: got.expected_per_client,
            measured_events: got.latency.count,
            warmup_s: ctx.options.warmupSeconds,
            warmup_p99_ms: got.warmup_latency?.p99 ?? NaN,
            warmup_max_ms: got.warmup_latency?.max ?? NaN,
            visible_p50_ms: visible?.p50 ?? NaN,
            visible_p99_ms: visible?.p99 ?? NaN,
            p99_over_visible_p99: visible === undefined ? NaN : Math.round((got.latency.p99 / visible.p99) * 100) / 100,
            publish_ack_p50_ms: published.ack.p50,
            publish_ack_p99_ms: published.ack.p99,
            load_average_1m: load,
            ...stageLog?.stages(got.arrivals ?? []),
          },
        };
      } finally {
        await clients.stop();
        if (stageLog !== undefined) await ctx.restartTrackd();
      }
    },
  };
}

export const eventsSseLatency = latencyScenario('sse');
export const eventsWsLatency = latencyScenario('ws');

/**
 * 1,000 stream clients on one org (500 Server-Sent Events, 500 WebSocket; 20 in the tiny run), all
 * from the same position, while the field workload makes about 50 moves/s and asset-by-id and
 * history reads are offered: every client must get every event once, in order. The figure is the
 * reads offered **at a fixed rate** (`FANOUT_READ_RATE`, 250/s, open loop: bench/lib/openLoop.ts, latency
 * from each request's due time) with the clients open, so that its p99 is what trackd adds at that
 * rate rather than the machine's saturation (a closed loop of 64 connections has p99 about 64 / rate
 * once the 2 cores are saturated, whatever the server does). In the same run, first: the same reads
 * at the same rate with the same ingest and no stream client (`alone_open_*`), and the closed-loop
 * figures as before (full speed, 64 connections: `closed_*`, `alone_*`); the delivery latency on 10
 * of the clients.
 */
const NAME = 'events-fanout-1000';
export const eventsFanout: CustomScenario = {
  kind: 'custom',
  name: NAME,
  title: `1,000 stream clients (500 SSE, 500 WebSocket) get every event; asset-by-id and history reads offered at ${FANOUT_READ_RATE}/s meanwhile`,
  needs: [...SCAN_OPERATIONS, ...EVENT_OPERATIONS, ...assetById.needs],
  unit: 'req/s',
  async run(ctx, helpers) {
    const half = ctx.options.size === 'tiny' ? 10 : 500;
    const duration = Math.max(1, ctx.options.durationSeconds);
    const reads = (): RequestTemplate[] => [
      { method: 'GET', paths: assetById.paths(ctx, 2_000), weight: 1 },
      { method: 'GET', paths: history.paths(ctx, 2_000), weight: 1 },
    ];
    const withIngest = async <F>(prefix: string, measure: () => Promise<F>): Promise<F> => {
      const ingest = publish(ctx, fieldPlan(ctx, READS, Math.round(FANOUT_MSGS_PER_S * (duration + ctx.options.warmupSeconds)), prefix), {
        ratePerSecond: FANOUT_MSGS_PER_S,
      });
      const figure = await measure();
      const published = await ingest;
      await waitVisible(ctx, published.last.asset, published.last.observedAt, 60_000);
      return figure;
    };
    const closed = () => helpers.load(reads(), duration);
    const open = () => openLoopFigure(ctx, reads(), FANOUT_READ_RATE, duration);
    const alone = await withIngest('fanout-alone', closed);
    const aloneOpen = await withIngest('fanout-alone-open', open);
    const after = await eventHead(ctx);
    const clients = await openEventClients(ctx, { sse: half, ws: half, latencyClients: 5, after });
    try {
      const figure = await withIngest('fanout-open', open);
      const closedFigure = await withIngest('fanout', closed);
      const load = loadAverage();
      const got = await clients.finish(await eventHead(ctx));
      checkComplete(NAME, got);
      return {
        trackd: { rate: figure.rate, p50: figure.p50, p99: figure.p99, max: figure.max, count: figure.count },
        ceiling: { name: 'fixed-body', rate: helpers.fixedRate },
        extra: {
          offered_reads_per_s: FANOUT_READ_RATE,
          clients: got.clients,
          sse_clients: got.sse,
          ws_clients: got.ws,
          events_per_client: got.expected_per_client,
          deliveries: got.expected_per_client * got.clients,
          delivery_p50_ms: got.latency.p50,
          delivery_p99_ms: got.latency.p99,
          clients_process_busy_cores: got.busy_cores,
          ingest_offered_reads_per_s: FANOUT_MSGS_PER_S * READS,
          non_2xx: figure.notOk + closedFigure.notOk,
          alone_open_rate: aloneOpen.rate,
          alone_open_p50_ms: aloneOpen.p50 ?? NaN,
          alone_open_p99_ms: aloneOpen.p99 ?? NaN,
          alone_open_sent_p99_ms: aloneOpen.sentP99,
          alone_open_generator_behind_ms: aloneOpen.maxBehindMs,
          open_sent_p99_ms: figure.sentP99,
          open_generator_behind_ms: figure.maxBehindMs,
          closed_rate: closedFigure.rate,
          closed_p50_ms: closedFigure.p50 ?? NaN,
          closed_p99_ms: closedFigure.p99 ?? NaN,
          alone_rate: alone.rate,
          alone_p50_ms: alone.p50 ?? NaN,
          alone_p99_ms: alone.p99 ?? NaN,
          rate_over_alone: Math.round((closedFigure.rate / alone.rate) * 100) / 100,
          load_average_1m: load,
        },
      };
    } finally {
      await clients.stop();
    }
  },
};
