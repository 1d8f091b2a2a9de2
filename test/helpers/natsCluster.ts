import fs from 'node:fs';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { freePort, startNatsServer, type NatsServerProcess } from '../../src/nats/embedded.js';
import { eventually, tempDir, type Teardown } from './trackd.js';

export interface NatsCluster {
  servers: (NatsServerProcess & { name: string })[];
  /** Every server's URL, comma-separated (NATS_URL of a node that must survive one server's loss). */
  url: string;
}

/**
 * `size` nats-servers on loopback, clustered by routes, JetStream on each with its own store; resolves
 * once JetStream has a meta leader (a stream can be created). Stopped (SIGTERM) and removed at teardown.
 */
export async function startNatsCluster(t: Teardown, size = 3): Promise<NatsCluster> {
  const routePorts = await Promise.all(Array.from({ length: size }, () => freePort()));
  const dirs = routePorts.map(() => tempDir('trackd-natsc-'));
  const servers = await Promise.all(
    routePorts.map(async (routePort, i) => {
      const name = `n${i + 1}`;
      const routes = routePorts.filter((_, j) => j !== i).map((p) => `"nats-route://127.0.0.1:${p}"`);
      const server = await startNatsServer({
        storeDir: dirs[i]!,
        serverName: name,
        extraConfig: [`cluster { name: "trackd-test", listen: "127.0.0.1:${routePort}", routes: [${routes.join(', ')}] }`],
      });
      return Object.assign(server, { name });
    }),
  );
  t.teardown(async () => {
    await Promise.all(servers.map((s) => s.stop()));
    for (const dir of dirs) fs.rmSync(dir, { recursive: true, force: true });
  });
  const url = servers.map((s) => s.url).join(',');
  const nc = await connect({ servers: url.split(',') });
  try {
    await eventually(
      async () => {
        await (await jetstreamManager(nc)).getAccountInfo();
        return true;
      },
      60_000,
      200,
    );
  } finally {
    await nc.close();
  }
  return { servers, url };
}
