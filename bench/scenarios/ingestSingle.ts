import { drainBacklog, fieldPlan, jetstreamCeiling, SCAN_OPERATIONS } from '../lib/ingest.js';
import type { CustomScenario } from '../lib/scenario.js';

/**
 * One read per message, draining a backlog published while trackd was stopped, against raw
 * JetStream consume of the same messages with the same client and ack mode.
 */
export const ingestSingle: CustomScenario = {
  kind: 'custom',
  name: 'ingest-single',
  title: 'scans of 1 read, draining a published backlog: messages/s vs raw JetStream consume',
  needs: SCAN_OPERATIONS,
  unit: 'msgs/s',
  async run(ctx) {
    const messages = Math.max(1_000, Math.round(ctx.options.durationSeconds * 10_000));
    const drained = await drainBacklog(ctx, fieldPlan(ctx, 1, messages, 'single'));
    const ceiling = await jetstreamCeiling(ctx, fieldPlan(ctx, 1, messages, 'ceiling'));
    return {
      trackd: { rate: drained.rate, count: drained.messages },
      ceiling: { name: 'jetstream-consume', rate: ceiling.consume_rate },
      extra: {
        backlog_messages: messages,
        drain_seconds: drained.seconds,
        raw_publish_msgs_per_s: ceiling.publish_rate,
        bytes_per_message: ceiling.bytes_per_message,
      },
    };
  },
};
