import { connect, type NatsConnection } from '@nats-io/transport-node';
import type { Services } from '../services.js';

export interface ScanIngest {
  stop(): Promise<void>;
}

/** Connects to NATS and consumes scans. (Placeholder: connects and reports readiness only.) */
export async function startScanIngest(services: Services, natsUrl: string): Promise<ScanIngest> {
  const nc: NatsConnection = await connect({ servers: natsUrl.split(','), name: 'trackd-ingest', maxReconnectAttempts: -1 });
  services.readiness.consumer = true;
  void (async () => {
    for await (const s of nc.status()) {
      if (s.type === 'disconnect') services.readiness.consumer = false;
      if (s.type === 'reconnect') services.readiness.consumer = true;
    }
  })();
  return {
    async stop() {
      services.readiness.consumer = false;
      await nc.drain();
    },
  };
}
