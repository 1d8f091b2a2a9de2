import { headers, type NatsConnection } from '@nats-io/transport-node';
import { jetstream } from '@nats-io/jetstream';

export interface SustainedPublisher {
  /** Distinct scans JetStream acknowledged (each stored once; retries share the Nats-Msg-Id). */
  acked(): number;
  /** Publish attempts that failed and were retried (broker down, timeouts). */
  retries(): number;
  /** Expected history events per asset key (HISTORY_GAP_SECONDS=0: one per scan). */
  perAsset(): Record<string, number>;
  /** Stops after the message in flight; resolves when every started scan was acknowledged. */
  stop(): Promise<void>;
}

/**
 * Publishes scans at a steady rate until stopped, each with its own event id and observed_at, each
 * reading one of `assets` (tag value -> asset key) in turn. A failed publish is retried with the same
 * Nats-Msg-Id until acknowledged, so an outage neither loses nor doubles a scan.
 */
export function sustainedPublisher(
  nc: NatsConnection,
  subject: string,
  location: string,
  assets: Record<string, string>,
  options: { perTick: number; tickMs: number; base: number; prefix: string },
): SustainedPublisher {
  const js = jetstream(nc, { timeout: 2000 });
  const tags = Object.keys(assets);
  const perAsset: Record<string, number> = {};
  let acked = 0;
  let retries = 0;
  let next = 0;
  let running = true;
  const publishOne = async (i: number) => {
    const tag = tags[i % tags.length];
    const eventId = `${options.prefix}-${i}`;
    const body = JSON.stringify({
      event_id: eventId,
      observed_at: new Date(options.base + i).toISOString(),
      location: { external_key: location },
      reads: [{ tag_type: 'rfid', value: tag }],
    });
    for (;;) {
      try {
        const h = headers();
        h.set('Nats-Msg-Id', eventId);
        await js.publish(subject, body, { headers: h });
        acked++;
        perAsset[assets[tag]] = (perAsset[assets[tag]] ?? 0) + 1;
        return;
      } catch {
        retries++;
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  };
  const loop = (async () => {
    while (running) {
      const started = Date.now();
      const batch: Promise<void>[] = [];
      for (let k = 0; k < options.perTick; k++) batch.push(publishOne(next++));
      await Promise.all(batch);
      const rest = options.tickMs - (Date.now() - started);
      if (rest > 0) await new Promise((r) => setTimeout(r, rest));
    }
  })();
  return {
    acked: () => acked,
    retries: () => retries,
    perAsset: () => ({ ...perAsset }),
    async stop() {
      running = false;
      await loop;
    },
  };
}

