/** Reading trackd's event log: pages over HTTP, and the EVENTS stream as JetStream holds it. */
import { DeliverPolicy, jetstream, jetstreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import type { Trackd } from './trackd.js';

export interface EventView {
  id: string;
  seq: number;
  type: string;
  org_id: number;
  occurred_at: string;
  data: any;
}

/** Every event the key sees after `after`, paging GET /api/v1/events to the end. */
export async function allEvents(trackd: Trackd, token: string, after = 0, limit = 1000): Promise<EventView[]> {
  const out: EventView[] = [];
  for (;;) {
    const res = await trackd.request('GET', `/api/v1/events?after=${after}&limit=${limit}`, { token });
    if (res.status !== 200) throw new Error(`events after ${after}: ${res.status} ${res.text}`);
    out.push(...(res.json.data as EventView[]));
    if (res.json.next_after === res.json.last_seq || res.json.next_after === after) return out;
    after = res.json.next_after;
  }
}

export interface StreamedEvent {
  streamSeq: number;
  subject: string;
  msgId: string | undefined;
  orgSeq: number;
  event: EventView;
  /** The message's data as it is stored. */
  text: string;
}

/** Every message of the EVENTS stream (of one org's subjects when given), in stream order. */
export async function streamEvents(nc: NatsConnection, orgId?: number): Promise<StreamedEvent[]> {
  const jsm = await jetstreamManager(nc);
  const info = await jsm.streams.info('EVENTS').catch(() => undefined);
  if (info === undefined || info.state.messages === 0) return [];
  const filter = orgId === undefined ? 'events.>' : `events.${orgId}.>`;
  const consumer = await jetstream(nc).consumers.get('EVENTS', { filter_subjects: filter, deliver_policy: DeliverPolicy.All });
  const out: StreamedEvent[] = [];
  const pending = (await consumer.info()).num_pending;
  if (pending === 0) return out;
  const messages = await consumer.consume();
  for await (const msg of messages) {
    out.push({
      streamSeq: msg.seq,
      subject: msg.subject,
      msgId: msg.headers?.get('Nats-Msg-Id'),
      orgSeq: Number(msg.headers?.get('Trackd-Seq')),
      event: msg.json<EventView>(),
      text: msg.string(),
    });
    if (msg.info.pending === 0) break;
  }
  await messages.close();
  return out;
}
