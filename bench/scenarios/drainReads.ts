import { drainBacklog, fieldPlan, SCAN_OPERATIONS } from '../lib/ingest.js';
import type { Figure, CustomScenario } from '../lib/scenario.js';
import { assetById } from './assetById.js';
import { history } from './history.js';

/**
 * Reads while a backlog drains: one-read scans published while trackd was stopped (200,000 per
 * second of --duration: 1,000,000 by default), trackd started, and asset-by-id and history reads
 * offered from the first moment of the drain. The drain lasts longer than the load, so every read
 * measured ran beside it; the drain rate is the whole drain's.
 */
export const drainReads: CustomScenario = {
  kind: 'custom',
  name: 'drain-reads',
  title: 'asset by id and history reads while a backlog of 1-read scans drains',
  needs: [...SCAN_OPERATIONS, ...assetById.needs],
  unit: 'req/s',
  async run(ctx, helpers) {
    const messages = Math.max(2_000, Math.round(ctx.options.durationSeconds * 200_000));
    let reads: (Figure & { notOk: number }) | undefined;
    const requests = [
      { method: 'GET' as const, paths: assetById.paths(ctx, 2_000), weight: 1 },
      { method: 'GET' as const, paths: history.paths(ctx, 2_000), weight: 1 },
    ];
    const drained = await drainBacklog(ctx, fieldPlan(ctx, 1, messages, 'drain-reads'), {}, async () => {
      reads = await helpers.load(requests, Math.max(1, ctx.options.durationSeconds));
    });
    return {
      trackd: { rate: reads!.rate, p50: reads!.p50, p99: reads!.p99, max: reads!.max, count: reads!.count },
      ceiling: { name: 'fixed-body', rate: helpers.fixedRate },
      extra: { backlog_messages: messages, drain_msgs_per_s: drained.rate, drain_seconds: drained.seconds, non_2xx: reads!.notOk },
    };
  },
};
