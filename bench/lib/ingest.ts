import path from 'node:path';
import { connect } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import type { PublishResult, PublishSpec } from './publisher.js';
import { runJsonProcess, writeSpec } from './processes.js';
import type { ScanPlan } from './scanPlan.js';
import type { BenchContext } from './scenario.js';

/** Publishes a plan from the publisher process. */
export function publish(
  ctx: BenchContext,
  plan: ScanPlan,
  options: { ratePerSecond?: number; window?: number; probeEveryMs?: number } = {},
): Promise<PublishResult> {
  const spec: PublishSpec = {
    natsUrl: ctx.natsUrl,
    plan,
    ratePerSecond: options.ratePerSecond ?? 0,
    window: options.window ?? 2_000,
    probe: options.probeEveryMs === undefined ? undefined : { url: ctx.trackd.url, token: ctx.tokens[0]!, everyMs: options.probeEveryMs },
  };
  return runJsonProcess<PublishResult>('lib/publisher.js', [writeSpec(ctx.workDir, 'publish', spec)]);
}

/** Resolves (with the time it was first seen, performance.now()) when the asset's report row reaches `observedAt`. */
export async function waitVisible(ctx: BenchContext, asset: number, observedAt: number, timeoutMs: number): Promise<number> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const res = await ctx.request('GET', `/api/v1/reports/asset-locations?asset_id=${asset}`);
    const seen = res.json?.data?.[0] ? Date.parse(res.json.data[0].asset_last_seen as string) : 0;
    if (seen >= observedAt) return performance.now();
    if (performance.now() > deadline)
      throw new Error(
        `scan of asset ${asset} at ${new Date(observedAt).toISOString()} not visible within ${timeoutMs} ms (last seen ${seen ? new Date(seen).toISOString() : 'never'})`,
      );
    await new Promise((r) => setTimeout(r, 5));
  }
}

/**
 * Resolves once trackd holds no scan message unacked and its consumer has none left to deliver
 * (`trackd_scans_in_hand`, `trackd_scans_consumer_pending` in /metrics, two readings in a row): a
 * batch is acked after the shard answered it, which is after its commit and the work that follows
 * (the report index, the positions in memory), so the shard is idle when this resolves. Returns
 * the time waited (ms).
 */
export async function waitSettled(ctx: BenchContext, timeoutMs: number): Promise<number> {
  const started = performance.now();
  let quiet = 0;
  for (;;) {
    const text = await (await fetch(`${ctx.trackd.url}/metrics`)).text();
    const samples = [...text.matchAll(/^trackd_scans_(?:in_hand|consumer_pending)(?:\{[^}]*\})? ([\d.e+-]+)$/gm)];
    if (samples.length === 0) throw new Error('trackd exports no trackd_scans_in_hand / trackd_scans_consumer_pending');
    quiet = samples.every((m) => Number(m[1]) === 0) ? quiet + 1 : 0;
    if (quiet >= 2) return performance.now() - started;
    if (performance.now() - started > timeoutMs) throw new Error(`trackd still held scan messages after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

export const SCAN_OPERATIONS = ['GET /api/v1/reports/asset-locations', 'GET /api/v1/assets/{asset_id}/history'];

/** The field workload from where the seeded history left the assets ('revisit': every asset read once where it is). */
export function fieldPlan(
  ctx: BenchContext,
  readsPerMessage: number,
  messages: number,
  eventPrefix: string,
  mode: 'field' | 'revisit' = 'field',
): ScanPlan {
  return {
    mode,
    orgId: ctx.dataset.orgId,
    assets: ctx.dataset.assets,
    locations: ctx.dataset.scanLocations.map((l) => l.external_key),
    readsPerMessage,
    messages,
    parkedRound: ctx.dataset.parkedRound,
    positionsFile: path.join(ctx.workDir, 'field-positions.bin'),
    observedBase: 0,
    observedStepMs: 0,
    eventPrefix: `${eventPrefix}-${Date.now().toString(36)}`,
  };
}

/** Raw JetStream publish and consume of the same plan's messages (same size, client and ack mode). */
export function jetstreamCeiling(
  ctx: BenchContext,
  plan: ScanPlan,
): Promise<{ publish_rate: number; consume_rate: number; bytes_per_message: number }> {
  return runJsonProcess('ceilings/jetstream.js', [writeSpec(ctx.workDir, 'jetstream', { natsUrl: ctx.natsUrl, plan, maxMessages: 2_000 })]);
}

export function sqliteInsertCeiling(ctx: BenchContext, rows: number): Promise<{ rate: number }> {
  const spec = { rows, assets: ctx.dataset.assets.count, locations: ctx.dataset.locations.count, rowsPerTransaction: 10_000 };
  return runJsonProcess('ceilings/sqliteInsert.js', [writeSpec(ctx.workDir, 'sqlite', spec)]);
}

/**
 * Drains a backlog: publishes the plan while trackd is stopped, starts trackd (with `env`) and
 * watches trackd's durable consumer on SCANS from outside: the drain runs from the first delivery
 * of the backlog until the ack floor reaches its last message (acks follow the commit).
 */
export async function drainBacklog(
  ctx: BenchContext,
  plan: ScanPlan,
  env: Record<string, string> = {},
  during?: () => Promise<void>,
): Promise<{ rate: number; seconds: number; messages: number }> {
  const nc = await connect({ servers: ctx.natsUrl.split(','), name: 'bench-drain-watch' });
  try {
    const jsm = await jetstreamManager(nc);
    await ctx.trackd.stop();
    const before = (await jsm.streams.info('SCANS')).state.last_seq;
    const published = await publish(ctx, plan);
    const after = (await jsm.streams.info('SCANS')).state.last_seq;
    let firstDelivery: number | undefined;
    let drained: number | undefined;
    let watching = true;
    const watch = (async () => {
      while (watching && drained === undefined) {
        const consumers = await jsm.consumers
          .list('SCANS')
          .next()
          .catch(() => []);
        const info = consumers[0];
        const now = performance.now();
        if (info !== undefined) {
          if (firstDelivery === undefined && info.delivered.stream_seq > before) firstDelivery = now;
          if (info.ack_floor.stream_seq >= after) drained = now;
        }
        await new Promise((r) => setTimeout(r, 5));
      }
    })();
    try {
      await ctx.restartTrackd(env);
      // The drain is watched on the consumer only (unless `during` adds HTTP load on purpose).
      await during?.();
      const deadline = performance.now() + 10 * 60_000;
      while (drained === undefined && performance.now() < deadline) await new Promise((r) => setTimeout(r, 10));
      await waitVisible(ctx, published.last.asset, published.last.observedAt, 30_000);
    } finally {
      watching = false;
      await watch;
    }
    if (firstDelivery === undefined || drained === undefined) throw new Error('the backlog drain was not observed on the SCANS consumer');
    const seconds = Math.max(0.001, (drained - firstDelivery) / 1000);
    return { rate: Math.round((after - before) / seconds), seconds, messages: after - before };
  } finally {
    await nc.close();
  }
}

/**
 * Purges from SCANS the messages that every consumer has acked (a kept data dir's earlier runs).
 * Kept, the store grew run after run (28 GB after a day of large runs) until nats-server refused
 * publishes ("insufficient resources", 10023): its default limit is a share of the disk free when
 * it started. Sequences stay, so trackd's applied sequence holds. Returns the messages purged (0
 * without the stream or a consumer).
 */
export async function purgeAppliedScans(natsUrl: string): Promise<number> {
  const nc = await connect({ servers: natsUrl.split(','), name: 'bench-purge-applied' });
  try {
    const jsm = await jetstreamManager(nc);
    const stream = await jsm.streams.info('SCANS').catch(() => undefined);
    if (stream === undefined) return 0;
    const consumers = await jsm.consumers.list('SCANS').next();
    if (consumers.length === 0) return 0;
    const floor = Math.min(...consumers.map((c) => c.ack_floor.stream_seq));
    if (floor < stream.state.first_seq) return 0;
    return (await jsm.streams.purge('SCANS', { seq: floor + 1 })).purged;
  } finally {
    await nc.close();
  }
}
