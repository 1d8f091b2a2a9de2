import { headers, type NatsConnection } from '@nats-io/transport-node';
import { jetstream } from '@nats-io/jetstream';
import { seed } from './masterdata.js';
import { eventually, spawnTrackd, startTrackd, type Teardown } from './trackd.js';

export interface SustainedPublisher {
  /** Distinct scans JetStream acknowledged (each stored once; retries share the Nats-Msg-Id). */
  acked(): number;
  /** Publish attempts that failed and were retried (broker down, timeouts). */
  retries(): number;
  /** Expected history events per asset key (HISTORY_GAP_SECONDS=0: one per scan). */
  perAsset(): Record<string, number>;
  /** Resolves once `n` more scans have been acknowledged than when called: the run went on under load. */
  progressed(n: number): Promise<void>;
  /** Resolves once `n` more publishes have failed and been retried than when called: publishers saw an outage. */
  retried(n: number): Promise<void>;
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
    const tag = tags[i % tags.length]!;
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
        const asset = assets[tag]!;
        perAsset[asset] = (perAsset[asset] ?? 0) + 1;
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
    progressed(n) {
      const target = acked + n;
      return eventually(() => acked >= target, 60_000, 10).then(() => undefined);
    },
    retried(n) {
      const target = retries + n;
      return eventually(() => retries >= target, 60_000, 10).then(() => undefined);
    },
    async stop() {
      running = false;
      await loop;
    },
  };
}

export const ASSETS = { 'EPC-1': 'PALLET-1', 'EPC-2': 'PALLET-2', 'EPC-3': 'PALLET-3', 'EPC-4': 'PALLET-4' };

/** A trackd (every scan a history row) with one org, one location and the four tagged ASSETS. */
export async function setupFaultOrg(t: Teardown, natsUrl: string, options: { childProcess?: boolean } = {}) {
  const start = options.childProcess ? spawnTrackd : startTrackd;
  const trackd = await start(t, { natsUrl, env: { HISTORY_GAP_SECONDS: '0', SHARDS: '2' } });
  const org = await trackd.createOrg('Faults');
  const token = (await trackd.createKey(org.id)).token;
  const ids = await seed(trackd, token, {
    locations: [{ external_key: 'DOCK-1' }],
    assets: Object.entries(ASSETS).map(([tag, key]) => ({ external_key: key, tags: [`rfid:${tag}`] })),
  });
  return { trackd, org, token, ids };
}

export const sum = (o: Record<string, number>) => Object.values(o).reduce((a, b) => a + b, 0);
