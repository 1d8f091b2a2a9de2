import { DeliverPolicy, jetstream, jetstreamManager, type ConsumerMessages, type JsMsg } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import type { Logger } from '../log.js';
import { Accounts } from '../console/accounts.js';
import type { ControlKv, StoredOrg, StoredSession, StoredUser } from './controlKv.js';
import type { ApiKeyRow, ControlPlane } from './controlPlane.js';
import { ADMIN_OPTIONS } from '../scans/streams.js';

export interface ControlMirror {
  stop(): Promise<void>;
}

/**
 * Keeps this node's control file a mirror of the cluster's bucket: an ordered consumer from the
 * last value of every key, then each change as it is stored (a key minted on another node, a
 * revocation, a new org), applied to the file where every thread of the node reads them (a
 * revocation reaches the HTTP threads' 200 ms poll from there). Resolves once the file holds
 * everything the bucket held at the start, so a node serves no request before it knows every key.
 * The ordered consumer re-creates itself after a reconnect or a gap, from where it was.
 */
export async function startControlMirror(
  nc: NatsConnection,
  kv: ControlKv,
  control: ControlPlane,
  logger: Logger | undefined,
): Promise<ControlMirror> {
  const accounts = new Accounts(control);
  const jsm = await jetstreamManager(nc, ADMIN_OPTIONS);
  const { state } = await jsm.streams.info(kv.stream);
  const consumer = await jetstream(nc).consumers.get(kv.stream, { deliver_policy: DeliverPolicy.LastPerSubject });
  const messages: ConsumerMessages = await consumer.consume();
  let caughtUp: () => void = () => {};
  const ready = new Promise<void>((resolve) => {
    caughtUp = resolve;
  });
  if (state.messages === 0) caughtUp();
  const apply = (msg: JsMsg) => {
    const key = msg.subject.slice(kv.prefix.length);
    try {
      if (key.startsWith('org.')) control.applyOrg(msg.json<StoredOrg>());
      else if (key.startsWith('key.')) control.applyKey(msg.json<ApiKeyRow>());
      else if (key.startsWith('user.')) accounts.applyUser(msg.json<StoredUser>());
      else if (key.startsWith('session.')) accounts.applySession(msg.json<StoredSession>());
    } catch (err) {
      logger?.error({ err, key }, 'control mirror could not apply a value');
    }
    if (msg.info.pending === 0) caughtUp();
  };
  const loop = (async () => {
    for await (const msg of messages) apply(msg);
  })();
  await ready;
  return {
    async stop() {
      await messages.close();
      await loop;
    },
  };
}
