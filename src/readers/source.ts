import type { MessageRoute, ScanSource } from '../scans/source.js';
import { READER_FORMATS } from './registry.js';

export const READERS_STREAM = 'READERS';

const ORG_TOKEN = /^[1-9]\d{0,9}$/;

function parseSubject(subject: string): { orgToken: string; format: string; readerName: string } | undefined {
  const tokens = subject.split('.');
  const [prefix, orgToken, format, readerName] = tokens;
  if (tokens.length !== 4 || prefix !== 'readers' || orgToken === undefined || format === undefined || readerName === undefined)
    return undefined;
  return { orgToken, format, readerName };
}

/**
 * Stream READERS (`readers.>`): fixed readers' own payloads, straight from nats-server's MQTT
 * listener (topic `readers/<org_id>/<format>/<reader_name>`). The format token picks the adapter.
 */
export const readersSource: ScanSource = {
  stream: READERS_STREAM,
  subjects: 'readers.>',
  durable: 'trackd-readers',
  labels: { stream: READERS_STREAM },
  route(subject): MessageRoute {
    const parsed = parseSubject(subject);
    const orgToken = subject.split('.')[1] ?? 'unknown';
    if (parsed === undefined || !ORG_TOKEN.test(parsed.orgToken) || Number(parsed.orgToken) > 2147483647) {
      return {
        orgToken,
        labels: {},
        dead: { reason: 'invalid_subject', detail: `subject ${subject} is not readers.<org_id>.<format>.<reader_name>` },
      };
    }
    const labels = { format: parsed.format, reader: parsed.readerName };
    if (!READER_FORMATS.has(parsed.format)) {
      const known = [...READER_FORMATS.keys()].join(', ');
      return {
        orgToken,
        labels,
        dead: { reason: 'unknown_reader_format', detail: `reader format ${JSON.stringify(parsed.format)} is not one of: ${known}` },
      };
    }
    return { orgId: Number(parsed.orgToken), orgToken, labels };
  },
  decode(subject, orgId, data, now) {
    const parsed = parseSubject(subject)!;
    return READER_FORMATS.get(parsed.format)!.decode(data, { orgId, readerName: parsed.readerName, now });
  },
};
