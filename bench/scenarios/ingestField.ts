import { fieldPlan, jetstreamCeiling, publish, SCAN_OPERATIONS, waitSettled, waitVisible } from '../lib/ingest.js';
import type { CustomScenario } from '../lib/scenario.js';

const READS = 50;
/**
 * The paced phase publishes this many times `--duration` (20 s at the default 5 s: about 900 probes,
 * so that the p99 is not the third-worst of 230).
 */
const PACED_PER_DURATION = 4;

/**
 * The field workload: messages of 50 reads, 95% re-reads of parked tags at their location, 5% moves,
 * default visit gap. First every parked asset is read once where it is (not measured as the
 * field's rate: the seeded history is two days old, so each of these reads opens a visit; at
 * 1,000,000 assets the burst alone would otherwise read mostly assets not yet read since the seed,
 * and measure new visits, where the field re-reads tags read seconds before). Throughput: once the
 * shard is idle, a burst published as fast as the stream acks, from the first publish until its
 * last message is visible.
 * Latency: the same workload paced evenly at half that rate (as a reader network offers it), or at
 * `--field-rate` reads/s (a rate fixed across the runs of an A/B), with publish-to-visible probes
 * every 20 ms.
 */
export const ingestField: CustomScenario = {
  kind: 'custom',
  name: 'ingest-field',
  title: 'scans of 50 reads (95% re-reads, 5% moves): reads/s end to end; publish-to-visible latency at half that rate',
  needs: SCAN_OPERATIONS,
  unit: 'reads/s',
  async run(ctx) {
    const messages = Math.max(200, Math.round(ctx.options.durationSeconds * 2_000));
    const warmStarted = performance.now();
    const revisit = await publish(ctx, fieldPlan(ctx, READS, 0, 'field-revisit', 'revisit'));
    const warmVisible = await waitVisible(ctx, revisit.last.asset, revisit.last.observedAt, 30 * 60_000);
    const revisitRate = Math.round(ctx.dataset.assets.count / ((warmVisible - warmStarted) / 1000));
    // The burst starts from an idle shard: the revisit's last batch is visible once committed, and
    // the shard may still be updating its report index (at 1,000,000 assets up to about a second,
    // which the burst's first batch waited for).
    const settleBeforeMs = await waitSettled(ctx, 10 * 60_000);
    const burst = fieldPlan(ctx, READS, messages, 'field');
    const spawnedAt = Date.now();
    const published = await publish(ctx, burst);
    const visible = await waitVisible(ctx, published.last.asset, published.last.observedAt, 10 * 60_000);
    const visibleAt = Date.now() - (performance.now() - visible);
    // From the first publish (the publisher's clock, the same machine's): its process start and
    // connection, 120-250 ms, are the load generator's, not the field's.
    const rate = Math.round((messages * READS) / ((visibleAt - published.started_at) / 1000));
    // The latency phase starts from an idle shard: visible means committed, and the shard may still
    // be updating the burst's last batch in memory (the report index) with more of it unacked.
    const settleMs = await waitSettled(ctx, 10 * 60_000);

    const offered = ctx.options.fieldRate ?? rate / 2;
    const pacedRate = Math.max(10, Math.round(offered / READS));
    const paced = fieldPlan(
      ctx,
      READS,
      Math.max(20, Math.round(pacedRate * (ctx.options.fieldSeconds ?? PACED_PER_DURATION * ctx.options.durationSeconds))),
      'field-paced',
    );
    const latency = await publish(ctx, paced, { ratePerSecond: pacedRate, probeEveryMs: 20 });
    const ceiling = await jetstreamCeiling(ctx, fieldPlan(ctx, READS, messages, 'ceiling'));
    return {
      trackd: { rate, p50: latency.probes?.p50, p99: latency.probes?.p99, max: latency.probes?.max, count: messages * READS },
      ceiling: { name: 'jetstream-consume', rate: ceiling.consume_rate * READS },
      extra: {
        revisit_reads_per_s: revisitRate,
        settle_before_burst_ms: Math.round(settleBeforeMs),
        // The rate as measured before 2026-11-28: from before the publisher process started.
        rate_from_publisher_start: Math.round((messages * READS) / ((visibleAt - spawnedAt) / 1000)),
        publisher_start_ms: published.started_at - spawnedAt,
        publish_rate_msgs: published.rate,
        latency_offered_reads_per_s: pacedRate * READS,
        // From the burst's last message visible to the shard idle (every burst message acked), before the latency phase.
        settle_after_burst_ms: Math.round(settleMs),
        latency_probes: latency.probes?.count ?? 0,
        // How much of a probe's latency the report request that saw it can be (its round trip).
        latency_poll_p99_ms: latency.polls?.p99 ?? Number.NaN,
        latency_poll_max_ms: latency.polls?.max ?? Number.NaN,
        latency_publisher_max_behind_ms: latency.max_behind_ms,
        raw_consume_msgs_per_s: ceiling.consume_rate,
        bytes_per_message: ceiling.bytes_per_message,
      },
    };
  },
};
