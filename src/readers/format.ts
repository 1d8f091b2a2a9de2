import { TextDecoder } from 'node:util';
import type { CanonicalScan } from '../scans/canonical.js';
import type { DeadLetter } from '../scans/decode.js';

/** What a reader format's adapter knows besides the payload: the subject's org and reader name. */
export interface ReaderContext {
  orgId: number;
  readerName: string;
  /** Server clock (ms), for refusing reads stamped too far in the future. */
  now: number;
}

/**
 * A fixed reader's own payload format, published on `readers.<org_id>.<format>.<reader_name>`
 * (MQTT topic `readers/<org_id>/<format>/<reader_name>`). An adapter turns one payload into
 * canonical scans, or says why it never can; everything after that is the scan pipeline's.
 */
export interface ReaderFormat {
  /** The subject's format token. */
  name: string;
  decode(data: Uint8Array, context: ReaderContext): { scans: CanonicalScan[] } | { dead: DeadLetter };
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** Parses a JSON object payload, or says why it is malformed. */
export function parseJsonObject(data: Uint8Array): { body: Record<string, unknown> } | { dead: DeadLetter } {
  let body: unknown;
  try {
    body = JSON.parse(utf8.decode(data));
  } catch (err) {
    return { dead: { reason: 'invalid_json', detail: `payload is not valid JSON: ${(err as Error).message}` } };
  }
  if (body === null || typeof body !== 'object' || Array.isArray(body))
    return { dead: { reason: 'invalid_body', detail: 'payload must be a JSON object' } };
  return { body: body as Record<string, unknown> };
}
