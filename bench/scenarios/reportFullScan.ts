import { summarize } from '../lib/loadSpec.js';
import type { CustomScenario } from '../lib/scenario.js';

const LIMIT = 200;

/**
 * One integrator paging through the whole report, default sort, `limit=200`, offset paging as the
 * interface defines it (issue 13: at most 60 s for 1,000,000 assets). Nothing writes meanwhile, so
 * every asset must come exactly once and the order must never go up: a page that breaks either
 * fails the run instead of reporting a rate.
 */
export const reportFullScan: CustomScenario = {
  kind: 'custom',
  name: 'report-full-scan',
  title: 'GET /api/v1/reports/asset-locations?limit=200, one client paging through the whole report',
  needs: ['GET /api/v1/reports/asset-locations'],
  unit: 'req/s',
  async run(ctx, helpers) {
    const seen = new Set<number>();
    const latencies: number[] = [];
    let previous = Number.POSITIVE_INFINITY;
    let total = Number.NaN;
    const started = performance.now();
    for (let offset = 0; ; offset += LIMIT) {
      const asked = performance.now();
      const res = await ctx.request('GET', `/api/v1/reports/asset-locations?limit=${LIMIT}&offset=${offset}`);
      latencies.push(performance.now() - asked);
      if (res.status !== 200) throw new Error(`report-full-scan: offset ${offset} answered ${res.status}`);
      total = res.json.total_count;
      for (const item of res.json.data as { asset_id: number; asset_last_seen: string }[]) {
        const lastSeen = Date.parse(item.asset_last_seen);
        if (seen.has(item.asset_id)) throw new Error(`report-full-scan: asset ${item.asset_id} came twice`);
        if (lastSeen > previous) throw new Error(`report-full-scan: order went up at offset ${offset}`);
        seen.add(item.asset_id);
        previous = lastSeen;
      }
      if (res.json.data.length < LIMIT) break;
    }
    const seconds = (performance.now() - started) / 1000;
    if (seen.size !== total) throw new Error(`report-full-scan: ${seen.size} assets seen, total_count ${total}`);
    const { p50, p99, max } = summarize(Float64Array.from(latencies), latencies.length);
    return {
      trackd: { rate: latencies.length / seconds, p50, p99, max, count: latencies.length },
      ceiling: { name: 'fixed-body', rate: helpers.fixedRate },
      extra: { seconds, assets: seen.size, pages: latencies.length },
    };
  },
};
