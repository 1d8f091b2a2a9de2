import { formatTimestamp } from '../wire/timestamps.js';

/** An events row as the relay and the read side select it. */
export interface EventRow {
  pos: number;
  org_id: number;
  seq: number;
  id: string;
  type: string;
  occurred_at: number;
  data: string;
}

export const EVENT_COLUMNS = 'pos, org_id, seq, id, type, occurred_at, data';

/**
 * The event as clients get it (schema `Event` in the OpenAPI document), as JSON text: the stored
 * payload is spliced in as it is, never parsed and written again.
 */
export function envelopeJson(row: EventRow): string {
  // A poll hands the same row objects to every client of the org: the text is made once per row.
  let text = texts.get(row);
  if (text === undefined) texts.set(row, (text = envelopeText(row)));
  return text;
}

const texts = new WeakMap<EventRow, string>();

function envelopeText(row: EventRow): string {
  return `{"id":${JSON.stringify(row.id)},"seq":${row.seq},"type":${JSON.stringify(row.type)},"org_id":${row.org_id},"occurred_at":"${formatTimestamp(row.occurred_at)}","data":${row.data}}`;
}
