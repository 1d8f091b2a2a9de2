import { drainBacklog, fieldPlan, SCAN_OPERATIONS, sqliteInsertCeiling } from '../lib/ingest.js';
import type { CustomScenario } from '../lib/scenario.js';

const READS = 50;

/**
 * Raw mode (HISTORY_GAP_SECONDS=0: every read is a history row): a backlog of 50-read messages
 * drained by trackd, in history rows/s, against raw SQLite inserts of as many history rows.
 * trackd is restarted with its default settings afterwards.
 */
export const ingestRaw: CustomScenario = {
  kind: 'custom',
  name: 'ingest-raw',
  title: 'HISTORY_GAP_SECONDS=0, scans of 50 reads: history rows/s vs raw SQLite inserts',
  needs: SCAN_OPERATIONS,
  unit: 'reads/s',
  async run(ctx) {
    const messages = Math.max(100, Math.round(ctx.options.durationSeconds * 1_000));
    let drained: Awaited<ReturnType<typeof drainBacklog>>;
    try {
      drained = await drainBacklog(ctx, fieldPlan(ctx, READS, messages, 'raw'), { HISTORY_GAP_SECONDS: '0' });
    } finally {
      await ctx.restartTrackd();
    }
    const ceiling = await sqliteInsertCeiling(ctx, messages * READS);
    return {
      trackd: { rate: drained.rate * READS, count: drained.messages * READS },
      ceiling: { name: 'sqlite-insert', rate: ceiling.rate },
      extra: { backlog_reads: messages * READS, drain_seconds: drained.seconds },
    };
  },
};
