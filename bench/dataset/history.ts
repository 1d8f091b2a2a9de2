/**
 * History through the real ingest path: scans published to JetStream and applied by trackd, so the
 * history, positions and visit rows are exactly the ones trackd writes. Every read is a move (in
 * round r asset a is read at location (a + r) % L), so each read adds one history row.
 */
import { publish, waitVisible } from '../lib/ingest.js';
import { movesMessages, type ScanPlan } from '../lib/scanPlan.js';
import type { BenchContext } from '../lib/scenario.js';
import type { DatasetSize } from './sizes.js';

const READS_PER_MESSAGE = 50;
const HOUR = 3_600_000;

/** The round the seeded assets are parked at afterwards (the field workload starts from there). */
export function seededRounds(size: DatasetSize): number {
  return Math.max(1, Math.round(size.historyRows / size.assets));
}

/** `window`: publishes in flight (the publisher's default 2,000; fewer on a loaded machine, whose broker then acks late). */
export async function seedHistory(ctx: BenchContext, size: DatasetSize, window?: number): Promise<void> {
  const started = performance.now();
  const rounds = seededRounds(size);
  const locations = ctx.dataset.scanLocations.map((l) => l.external_key);
  const messages = movesMessages(size.assets, locations.length, READS_PER_MESSAGE, rounds);
  const stepMs = Math.max(1, Math.floor((rounds * HOUR) / messages));
  const plan: ScanPlan = {
    mode: 'moves',
    orgId: ctx.dataset.orgId,
    assets: ctx.dataset.assets,
    locations,
    readsPerMessage: READS_PER_MESSAGE,
    messages,
    parkedRound: 0,
    observedBase: Date.now() - 2 * 24 * HOUR - messages * stepMs,
    observedStepMs: stepMs,
    eventPrefix: 'seed',
  };
  const result = await publish(ctx, plan, { window });
  await waitVisible(ctx, result.last.asset, result.last.observedAt, 30 * 60_000);
  ctx.dataset.historyRows = size.assets * rounds;
  ctx.dataset.scannedAssets = size.assets;
  ctx.dataset.parkedRound = rounds;
  ctx.dataset.seconds.history = Math.round(performance.now() - started) / 1000;
}
