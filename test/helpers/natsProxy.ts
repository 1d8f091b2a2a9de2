import net from 'node:net';
import type { Teardown } from './trackd.js';

/**
 * A TCP proxy in front of a nats-server that can lose, on the way to the server, the messages a
 * client publishes to subjects with a given prefix: a network that loses a consumer's pull requests
 * (`$JS.API.CONSUMER.MSG.NEXT.<stream>.<consumer>`) while everything else goes through. It reads the
 * client's side of the NATS protocol (PUB and HPUB carry their payload's size); the server's side
 * passes untouched.
 */
export interface NatsProxy {
  url: string;
  /** Lose the publishes to subjects starting with `prefix` from now on; undefined: lose nothing. */
  lose(prefix: string | undefined): void;
  /** How many publishes were lost so far. */
  lost(): number;
}

export async function natsProxy(t: Teardown, target: string): Promise<NatsProxy> {
  const { hostname, port } = new URL(target);
  let losing: string | undefined;
  let lost = 0;
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(port), hostname);
    sockets.add(client).add(upstream);
    const end = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);
    upstream.pipe(client);
    let pending: Buffer = Buffer.alloc(0);
    client.on('data', (chunk: Buffer) => {
      pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
      for (;;) {
        const lineEnd = pending.indexOf('\r\n');
        if (lineEnd < 0) break;
        const words = pending.subarray(0, lineEnd).toString('latin1').split(' ');
        const op = words[0]!.toUpperCase();
        const carries = op === 'PUB' || op === 'HPUB';
        const size = carries ? lineEnd + 2 + Number(words[words.length - 1]) + 2 : lineEnd + 2;
        if (pending.length < size) break;
        if (carries && losing !== undefined && words[1]!.startsWith(losing)) lost++;
        else upstream.write(pending.subarray(0, size));
        pending = pending.subarray(size);
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(
    () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  );
  return {
    url: `nats://127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    lose: (prefix) => {
      losing = prefix;
    },
    lost: () => lost,
  };
}
