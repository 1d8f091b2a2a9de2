import type { ScanOutcome } from './apply.js';
import type { MetricLabels } from './source.js';

/** Per-label-set counts of one settled batch, written to the metrics once. */
export interface Tally {
  labels: MetricLabels;
  applied: number;
  redelivered: number;
  duplicate: number;
  reads: number;
  unknownTags: number;
  locationTags: number;
}

/** A message of a committed batch as the settle rules see it: how many scans it had, its metric labels. */
export interface Settled {
  items: readonly unknown[];
  labels: MetricLabels;
  labelKey: string;
}

export interface Settlement<M> {
  /** Messages to ack now. */
  ack: M[];
  /** Of those, the redeliveries: messages the shard had applied already, acked without effect. */
  redelivered: M[];
  /** Of those, the messages whose event ids had all been applied already (re-publishes), acked without effect. */
  duplicates: M[];
  /** Messages to copy to the dead-letter stream (then ack), with the details of every scan that could not apply. */
  dead: { message: M; detail: string }[];
  tallies: Tally[];
}

/**
 * What a committed batch means for its messages, from the shard's outcomes (one per scan, in
 * order): a message whose first scan was already applied is a redelivery as a whole; a message
 * with scans that can never apply is dead-lettered once, with every reason, after the rest of it
 * applied; any other message is acked.
 */
export function settleOutcomes<M extends Settled>(batch: readonly M[], outcomes: readonly ScanOutcome[]): Settlement<M> {
  const tallies = new Map<string, Tally>();
  const ack: M[] = [];
  const redelivered: M[] = [];
  const duplicates: M[] = [];
  const dead: { message: M; detail: string }[] = [];
  let at = 0;
  for (const message of batch) {
    const own = outcomes.slice(at, at + message.items.length);
    at += message.items.length;
    let tally = tallies.get(message.labelKey);
    if (tally === undefined)
      tallies.set(
        message.labelKey,
        (tally = { labels: message.labels, applied: 0, redelivered: 0, duplicate: 0, reads: 0, unknownTags: 0, locationTags: 0 }),
      );
    if (own[0]?.kind === 'redelivered') {
      tally.redelivered++;
      ack.push(message);
      redelivered.push(message);
      continue;
    }
    const deadDetails: string[] = [];
    let applied = false;
    for (const o of own) {
      if (o.kind === 'applied') {
        applied = true;
        tally.reads += o.readsApplied;
        tally.unknownTags += o.unknownTags;
        tally.locationTags += o.locationTags;
      } else if (o.kind === 'dead' && !deadDetails.includes(o.detail)) deadDetails.push(o.detail);
    }
    if (applied) tally.applied++;
    else if (deadDetails.length === 0) {
      tally.duplicate++;
      duplicates.push(message);
    }
    if (deadDetails.length > 0) dead.push({ message, detail: deadDetails.join('; ') });
    else ack.push(message);
  }
  return { ack, redelivered, duplicates, dead, tallies: [...tallies.values()] };
}
