import { TextDecoder } from 'node:util';
import { compileValidator } from '../wire/validation.js';
import { parseTimestamp } from '../wire/timestamps.js';
import type { CanonicalScan, LocationRef } from './canonical.js';
import { ScanMessage } from '../../schemas/scanMessage.js';

/** Why a message went to `scans_dead.<org_id>` (header Trackd-Dead-Reason). */
export type DeadReason =
  | 'invalid_subject'
  | 'unknown_org'
  | 'invalid_json'
  | 'invalid_body'
  | 'invalid_observed_at'
  | 'future_observed_at'
  | 'unknown_location'
  | 'unknown_reader_format';

export interface DeadLetter {
  reason: DeadReason;
  detail: string;
}

/**
 * How far in the future an observed_at may lie before the scan is refused: readers and handhelds
 * have drifting clocks, but a scan more than this ahead would pin the asset's current location
 * until the wall clock caught up with it.
 */
export const MAX_FUTURE_SKEW_MS = 5 * 60_000;

const utf8 = new TextDecoder('utf-8', { fatal: true });
const validate = compileValidator(ScanMessage);

export type SubjectRoute = { orgId: number; orgToken: string } | { orgToken: string; dead: DeadLetter };

/** `scans.<org_id>.<fixed|handheld>`: the org comes from the subject only. */
export function routeSubject(subject: string): SubjectRoute {
  const tokens = subject.split('.');
  const orgToken = tokens[1] ?? 'unknown';
  if (
    tokens.length !== 3 ||
    (tokens[2] !== 'fixed' && tokens[2] !== 'handheld') ||
    !/^[1-9]\d{0,9}$/.test(orgToken) ||
    Number(orgToken) > 2147483647
  ) {
    return { orgToken, dead: { reason: 'invalid_subject', detail: `subject ${subject} is not scans.<org_id>.<fixed|handheld>` } };
  }
  return { orgId: Number(orgToken), orgToken };
}

function toLocationRef(location: ScanMessage['location']): LocationRef {
  if ('id' in location) return { id: location.id };
  if ('external_key' in location) return { externalKey: location.external_key };
  return { tagType: location.tag_type, value: location.value };
}

/** Decodes and validates a message body into a canonical scan, or says why it can never apply. */
export function decodeScanMessage(orgId: number, data: Uint8Array, now: number): { scan: CanonicalScan } | { dead: DeadLetter } {
  let body: unknown;
  try {
    body = JSON.parse(utf8.decode(data));
  } catch (err) {
    return { dead: { reason: 'invalid_json', detail: `body is not valid JSON: ${(err as Error).message}` } };
  }
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    return { dead: { reason: 'invalid_body', detail: 'body must be a JSON object' } };
  }
  const errors = validate(body);
  if (errors.length > 0) {
    const onlyObservedAt = errors.every((e) => e.field === 'observed_at');
    return {
      dead: {
        reason: onlyObservedAt ? 'invalid_observed_at' : 'invalid_body',
        detail: errors.map((e) => `${e.field}: ${e.code}: ${e.message}`).join('; '),
      },
    };
  }
  const message = body as ScanMessage;
  const observedAt = (parseTimestamp(message.observed_at) as { ms: number }).ms;
  if (observedAt > now + MAX_FUTURE_SKEW_MS) {
    return {
      dead: {
        reason: 'future_observed_at',
        detail: `observed_at ${message.observed_at} is more than ${MAX_FUTURE_SKEW_MS / 1000} s ahead of the server clock`,
      },
    };
  }
  return {
    scan: {
      orgId,
      eventId: message.event_id,
      observedAt,
      location: toLocationRef(message.location),
      reads: message.reads.map((r) => ({ tagType: r.tag_type, value: r.value })),
    },
  };
}
