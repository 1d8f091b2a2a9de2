import { assetById } from './assetById.js';
import { assetList } from './assetList.js';
import { history } from './history.js';
import { report, reportByLocation } from './report.js';
import { treeAncestors } from './treeAncestors.js';
import { fieldPlan, publish, SCAN_OPERATIONS } from '../lib/ingest.js';
import type { RequestTemplate } from '../lib/loadSpec.js';
import type { CustomScenario } from '../lib/scenario.js';
import { createPatch } from './createPatch.js';

const INGEST_MSGS_PER_S = 400;

/** 90% reads / 10% writes over HTTP while the field workload is ingested at 20,000 reads/s. */
export const mix: CustomScenario = {
  kind: 'custom',
  name: 'mix',
  title: `90% reads / 10% writes over HTTP with ingest running (${INGEST_MSGS_PER_S * 50} reads/s)`,
  needs: [...SCAN_OPERATIONS, ...assetById.needs, ...assetList.needs, ...treeAncestors.needs, ...createPatch.needs],
  unit: 'req/s',
  async run(ctx, helpers) {
    const reads: [number, string[]][] = [
      [30, assetById.paths(ctx, 500)],
      [10, assetList.paths(ctx, 200)],
      [20, report.paths(ctx, 200)],
      [10, reportByLocation.paths(ctx, 200)],
      [10, history.paths(ctx, 200)],
      [10, treeAncestors.paths(ctx, 100)],
    ];
    const requests: RequestTemplate[] = [
      ...reads.map(([weight, paths]): RequestTemplate => ({ method: 'GET', paths, weight })),
      ...createPatch.requests(ctx).map((r) => ({ ...r, weight: 5 })),
    ];
    const duration = Math.max(1, ctx.options.durationSeconds) + ctx.options.warmupSeconds;
    const ingest = publish(ctx, fieldPlan(ctx, 50, Math.round(INGEST_MSGS_PER_S * duration), 'mix'), { ratePerSecond: INGEST_MSGS_PER_S });
    // At least a second: slow pages under a loaded tiny run must still complete.
    const http = await helpers.load(requests, Math.max(1, ctx.options.durationSeconds));
    const published = await ingest;
    return {
      trackd: { rate: http.rate, p50: http.p50, p99: http.p99, max: http.max, count: http.count },
      ceiling: { name: 'fixed-body', rate: helpers.fixedRate },
      extra: { ingest_offered_reads_per_s: INGEST_MSGS_PER_S * 50, ingest_published_msgs_per_s: published.rate, non_2xx: http.notOk },
    };
  },
};
