import type { CanonicalScan } from './canonical.js';
import { decodeScanMessage, routeSubject, type DeadLetter } from './decode.js';
import { SCANS_STREAM } from './streams.js';

export type MetricLabels = Record<string, string>;

/** Where a message goes: its org (from the subject only), or why it can never apply. */
export type MessageRoute =
  | { orgId: number; orgToken: string; labels: MetricLabels }
  | { orgToken: string; dead: DeadLetter; labels: MetricLabels };

/**
 * A JetStream stream whose messages become canonical scans. The consumer in ingest.ts runs one
 * durable pull consumer per source with the same batching, ordering, ack and dead-letter rules;
 * a source only says how a subject and a body turn into scans. One message may carry several
 * scans (a reader message holds many tag reads); it is acknowledged once, after all of them commit.
 */
export interface ScanSource {
  stream: string;
  subjects: string;
  durable: string;
  /** Labels every metric of this source carries (besides the per-message labels of its route). */
  labels: MetricLabels;
  route(subject: string): MessageRoute;
  decode(subject: string, orgId: number, data: Uint8Array, now: number): { scans: CanonicalScan[] } | { dead: DeadLetter };
}

/** Stream SCANS: `scans.<org_id>.<fixed|handheld>`, one scan JSON per message. */
export const scansSource: ScanSource = {
  stream: SCANS_STREAM,
  subjects: 'scans.>',
  durable: 'trackd-scans',
  labels: {},
  route(subject) {
    return { ...routeSubject(subject), labels: {} };
  },
  decode(_subject, orgId, data, now) {
    const decoded = decodeScanMessage(orgId, data, now);
    return 'dead' in decoded ? decoded : { scans: [decoded.scan] };
  },
};
