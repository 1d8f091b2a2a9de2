import { createHash } from 'node:crypto';
import type { Static } from '@sinclair/typebox';
import { Cs463Payload } from '../../schemas/cs463Payload.js';
import { compileValidator } from '../wire/validation.js';
import type { CanonicalScan } from '../scans/canonical.js';
import { MAX_FUTURE_SKEW_MS } from '../scans/decode.js';
import { parseJsonObject, type ReaderFormat } from './format.js';

type Cs463Message = Static<typeof Cs463Payload>;

const validate = compileValidator(Cs463Payload);

/** The same reading (reader, EPC, antenna, instant) always gets the same event id, so a replay is a no-op. */
export function cs463EventId(readerName: string, epc: string, antennaPort: number, timeStampOfRead: number): string {
  const digest = createHash('sha256').update(`${readerName}\n${epc}\n${antennaPort}\n${timeStampOfRead}`).digest('base64url');
  return `cs463-${digest}`;
}

/** CSL CS463: each tag read is one scan of (rfid, epc) at the capture point's location. */
export const cs463: ReaderFormat = {
  name: 'cs463',
  decode(data, { orgId, now }) {
    const parsed = parseJsonObject(data);
    if ('dead' in parsed) return parsed;
    const errors = validate(parsed.body);
    if (errors.length > 0)
      return { dead: { reason: 'invalid_body', detail: errors.map((e) => `${e.field}: ${e.code}: ${e.message}`).join('; ') } };
    const payload = parsed.body as Cs463Message;
    const scans: CanonicalScan[] = [];
    for (const read of payload.tags) {
      const observedAt = Math.floor(read.timeStampOfRead / 1000);
      if (observedAt > now + MAX_FUTURE_SKEW_MS) {
        const at = new Date(observedAt).toISOString();
        return {
          dead: {
            reason: 'future_observed_at',
            detail: `timeStampOfRead of ${read.epc} (${at}) is more than ${MAX_FUTURE_SKEW_MS / 1000} s ahead of the server clock`,
          },
        };
      }
      scans.push({
        orgId,
        eventId: cs463EventId(payload.rfidReaderName, read.epc, read.antennaPort, read.timeStampOfRead),
        observedAt,
        location: { keyOrTagValue: read.capturePointName },
        reads: [{ tagType: 'rfid', value: read.epc }],
      });
    }
    return { scans };
  },
};
