import { NoRespondersError, RequestError, type NatsConnection, type Subscription } from '@nats-io/transport-node';

/**
 * A node's presence on the NATS cluster: each node answers on `trackd.node.<id>.presence` for as
 * long as its connection lives. A request there that no subscriber can take is answered "no
 * responders" by the server at once, which tells a node whose connection is gone (killed, crashed,
 * cut off from every server) from one that is slow or paused: the paused one's subscription still
 * takes the request, which then times out. docs/cluster.md, "Ownership by lease".
 */
export type Presence = 'present' | 'absent' | 'unknown';

const presenceSubject = (node: string) => `trackd.node.${node}.presence`;

/** A request that no subscriber could take (the server answered 503 at once). */
export function isNoResponders(err: unknown): boolean {
  return err instanceof NoRespondersError || (err instanceof RequestError && err.isNoResponders());
}

/** Answers this node's presence requests until unsubscribed. */
export function answerPresence(nc: NatsConnection, node: string): Subscription {
  return nc.subscribe(presenceSubject(node), {
    callback: (_err, msg) => {
      msg?.respond();
    },
  });
}

/** Asks whether `node`'s connection is on the cluster: present (it answered), absent (no responders), unknown (no answer in time, or the broker away). */
export async function probePresence(nc: NatsConnection, node: string, timeoutMs: number): Promise<Presence> {
  try {
    await nc.request(presenceSubject(node), undefined, { timeout: timeoutMs });
    return 'present';
  } catch (err) {
    return isNoResponders(err) ? 'absent' : 'unknown';
  }
}
