import fc from 'fast-check';
import type { NatsConnection } from '@nats-io/transport-node';
import { publish } from './scans.js';
import type { Trackd } from './trackd.js';

/** One message of a generated stream, with what trackd must do with it. */
export interface PlannedScan {
  subject: string;
  data: string | Uint8Array;
  /** Nats-Msg-Id; null sends none. */
  msgId: string | null;
  /** 'apply': one history event per listed asset key; 'dead': a dead letter with this reason; 'noop': a repeat event_id. */
  expect: { kind: 'apply'; assets: string[]; observedAt: number } | { kind: 'dead'; reason: string } | { kind: 'noop' };
  label: string;
}

export interface MixWorld {
  orgA: number;
  orgB: number;
  /** A's location keys and asset tags (rfid value -> asset external_key). */
  locationsA: string[];
  tagsA: Record<string, string>;
  /** A's location ids, to aim at from B. */
  locationIdsA: number[];
  /** Base instant for observed_at; every planned scan gets its own millisecond. */
  base: number;
}

let serial = 0;
const nextId = (prefix: string) => `${prefix}-${process.pid}-${++serial}`;

/**
 * A seeded mixed stream: valid scans (several reads, some of unknown tags, huge ignored extra keys),
 * and malformed, oversized, wrongly typed, future-dated, sentinel-dated, misrouted and cross-organization
 * messages, plus repeats of already-sent event ids.
 */
export function planMix(world: MixWorld, count: number, seed: number): PlannedScan[] {
  const tags = Object.keys(world.tagsA);
  const scanOf = (observedAt: number, extra: Record<string, unknown> = {}) => ({
    event_id: nextId('evt'),
    observed_at: new Date(observedAt).toISOString(),
    location: { external_key: world.locationsA[observedAt % world.locationsA.length] },
    reads: [{ tag_type: 'rfid', value: tags[observedAt % tags.length]! }],
    ...extra,
  });
  const subjectA = `scans.${world.orgA}.fixed`;
  const category = fc.constantFrom(
    ...[
      'valid',
      'valid',
      'valid',
      'valid',
      'valid',
      'valid',
      'valid',
      'valid',
      'valid-multi',
      'valid-unknown-tag',
      'valid-huge-extra',
      'valid-handheld',
      'valid-by-id',
      'not-json',
      'truncated',
      'invalid-utf8',
      'array-body',
      'null-body',
      'number-body',
      'missing-event-id',
      'long-event-id',
      'event-id-number',
      'no-reads',
      'too-many-reads',
      'reads-wrong-type',
      'read-value-null',
      'two-location-forms',
      'no-location',
      'location-id-string',
      'sentinel-epoch',
      'sentinel-zero',
      'date-only',
      'observed-at-number',
      'future',
      'unknown-location',
      'cross-org-key',
      'cross-org-id',
      'unknown-org',
      'bad-subject-org',
      'bad-subject-source',
      'repeat-event-id',
    ],
  );
  const plan: PlannedScan[] = [];
  const validSent: { body: Record<string, unknown> }[] = [];
  const categories = fc.sample(category, { seed, numRuns: count });
  categories.forEach((cat, i) => {
    const at = world.base + i;
    const s = scanOf(at);
    const asset = world.tagsA[s.reads[0]!.value]!;
    const dead = (data: string | Uint8Array, reason: string, subject = subjectA): PlannedScan => ({
      subject,
      data,
      msgId: null,
      expect: { kind: 'dead', reason },
      label: cat,
    });
    const bad = (body: Record<string, unknown>, reason: string) => dead(JSON.stringify(body), reason);
    switch (cat) {
      case 'valid':
      case 'valid-handheld':
      case 'valid-by-id': {
        const body = cat === 'valid-by-id' ? { ...s, location: { id: world.locationIdsA[i % world.locationIdsA.length] } } : s;
        validSent.push({ body });
        plan.push({
          subject: cat === 'valid-handheld' ? `scans.${world.orgA}.handheld` : subjectA,
          data: JSON.stringify(body),
          msgId: s.event_id,
          expect: { kind: 'apply', assets: [asset], observedAt: at },
          label: cat,
        });
        break;
      }
      case 'valid-multi': {
        const reads = tags.slice(0, 3).map((value) => ({ tag_type: 'rfid', value }));
        const body = { ...s, reads: [...reads, ...reads] };
        validSent.push({ body });
        plan.push({
          subject: subjectA,
          data: JSON.stringify(body),
          msgId: s.event_id,
          expect: { kind: 'apply', assets: [...new Set(tags.slice(0, 3).map((v) => world.tagsA[v]!))], observedAt: at },
          label: cat,
        });
        break;
      }
      case 'valid-unknown-tag': {
        const body = { ...s, reads: [...s.reads, { tag_type: 'rfid', value: 'NO-SUCH-TAG' }, { tag_type: 'weird', value: '\u0000' }] };
        validSent.push({ body });
        plan.push({
          subject: subjectA,
          data: JSON.stringify(body),
          msgId: s.event_id,
          expect: { kind: 'apply', assets: [asset], observedAt: at },
          label: cat,
        });
        break;
      }
      case 'valid-huge-extra': {
        const body = { ...s, reader_id: 'r'.repeat(200_000), firmware: { nested: [1, 2, { deep: true }] } };
        validSent.push({ body });
        plan.push({
          subject: subjectA,
          data: JSON.stringify(body),
          msgId: s.event_id,
          expect: { kind: 'apply', assets: [asset], observedAt: at },
          label: cat,
        });
        break;
      }
      case 'not-json':
        plan.push(dead('this is not json', 'invalid_json'));
        break;
      case 'truncated':
        plan.push(dead(JSON.stringify(s).slice(0, 30), 'invalid_json'));
        break;
      case 'invalid-utf8':
        plan.push(dead(Buffer.from([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x3a, 0x31, 0x7d]), 'invalid_json'));
        break;
      case 'array-body':
        plan.push(dead(JSON.stringify([s]), 'invalid_body'));
        break;
      case 'null-body':
        plan.push(dead('null', 'invalid_body'));
        break;
      case 'number-body':
        plan.push(dead('1e400', 'invalid_body'));
        break;
      case 'missing-event-id': {
        const { event_id: _e, ...rest } = s;
        plan.push(bad(rest, 'invalid_body'));
        break;
      }
      case 'long-event-id':
        plan.push(bad({ ...s, event_id: 'e'.repeat(65) }, 'invalid_body'));
        break;
      case 'event-id-number':
        plan.push(bad({ ...s, event_id: 12345 }, 'invalid_body'));
        break;
      case 'no-reads':
        plan.push(bad({ ...s, reads: [] }, 'invalid_body'));
        break;
      case 'too-many-reads':
        plan.push(bad({ ...s, reads: Array.from({ length: 1001 }, () => s.reads[0]) }, 'invalid_body'));
        break;
      case 'reads-wrong-type':
        plan.push(bad({ ...s, reads: 'rfid:E1' }, 'invalid_body'));
        break;
      case 'read-value-null':
        plan.push(bad({ ...s, reads: [{ tag_type: 'rfid', value: null }] }, 'invalid_body'));
        break;
      case 'two-location-forms':
        plan.push(bad({ ...s, location: { id: 1, external_key: world.locationsA[0] } }, 'invalid_body'));
        break;
      case 'no-location': {
        const { location: _l, ...rest } = s;
        plan.push(bad(rest, 'invalid_body'));
        break;
      }
      case 'location-id-string':
        plan.push(bad({ ...s, location: { id: '1' } }, 'invalid_body'));
        break;
      case 'sentinel-epoch':
        plan.push(bad({ ...s, observed_at: '1970-01-01T00:00:00Z' }, 'invalid_observed_at'));
        break;
      case 'sentinel-zero':
        plan.push(bad({ ...s, observed_at: '0001-01-01T00:00:00+00:00' }, 'invalid_observed_at'));
        break;
      case 'date-only':
        plan.push(bad({ ...s, observed_at: '2026-11-21' }, 'invalid_observed_at'));
        break;
      case 'observed-at-number':
        plan.push(bad({ ...s, observed_at: at }, 'invalid_observed_at'));
        break;
      case 'future':
        plan.push(bad({ ...s, observed_at: new Date(Date.now() + 86_400_000).toISOString() }, 'future_observed_at'));
        break;
      case 'unknown-location':
        plan.push(bad({ ...s, location: { external_key: 'NOWHERE' } }, 'unknown_location'));
        break;
      case 'cross-org-key':
        plan.push(dead(JSON.stringify(s), 'unknown_location', `scans.${world.orgB}.fixed`));
        break;
      case 'cross-org-id':
        plan.push(dead(JSON.stringify({ ...s, location: { id: world.locationIdsA[0] } }), 'unknown_location', `scans.${world.orgB}.fixed`));
        break;
      case 'unknown-org':
        plan.push(dead(JSON.stringify(s), 'unknown_org', 'scans.987654.fixed'));
        break;
      case 'bad-subject-org':
        plan.push(dead(JSON.stringify(s), 'invalid_subject', 'scans.acme.fixed'));
        break;
      case 'bad-subject-source':
        plan.push(dead(JSON.stringify(s), 'invalid_subject', `scans.${world.orgA}.mobile`));
        break;
      case 'repeat-event-id': {
        const earlier = validSent[i % Math.max(validSent.length, 1)];
        if (earlier === undefined) plan.push(dead('{', 'invalid_json'));
        // Same event id, another Nats-Msg-Id: JetStream stores it, trackd must not apply it twice.
        else
          plan.push({
            subject: subjectA,
            data: JSON.stringify(earlier.body),
            msgId: nextId('again'),
            expect: { kind: 'noop' },
            label: cat,
          });
        break;
      }
    }
  });
  return plan;
}

/** Publishes a plan in order (stream order is publish order), `parallel` at a time. */
export async function publishPlan(nc: NatsConnection, plan: PlannedScan[], parallel = 50): Promise<void> {
  for (let i = 0; i < plan.length; i += parallel) {
    await Promise.all(plan.slice(i, i + parallel).map((p) => publish(nc, p.subject, p.data, p.msgId)));
  }
}

/** What the plan must leave behind: history events per asset key, dead letters per reason. */
export function expectedOutcome(plan: PlannedScan[]): {
  historyByAsset: Record<string, number>;
  deadByReason: Record<string, number>;
  applied: number;
} {
  const historyByAsset: Record<string, number> = {};
  const deadByReason: Record<string, number> = {};
  let applied = 0;
  for (const p of plan) {
    if (p.expect.kind === 'apply') {
      applied++;
      for (const a of p.expect.assets) historyByAsset[a] = (historyByAsset[a] ?? 0) + 1;
    } else if (p.expect.kind === 'dead') deadByReason[p.expect.reason] = (deadByReason[p.expect.reason] ?? 0) + 1;
  }
  return { historyByAsset, deadByReason, applied };
}

/** History events per asset, through the public API (-1 while the server cannot answer). */
export async function historyCounts(trackd: Trackd, token: string, assetIds: Record<string, number>): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const [key, id] of Object.entries(assetIds)) {
    try {
      const res = await trackd.request('GET', `/api/v1/assets/${id}/history?limit=1`, { token });
      out[key] = res.status === 200 ? res.json.total_count : -1;
    } catch {
      out[key] = -1;
    }
  }
  return out;
}
