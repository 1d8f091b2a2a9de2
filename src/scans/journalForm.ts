import type { JournalCodec } from '../shards/commands.js';
import type { StreamInputs } from '../shards/journalEntry.js';
import type { ApplyOptions } from './apply.js';
import type { SourcedScan } from './canonical.js';
import { sourceOfStream, sourcedItems } from './sources.js';

/**
 * A scan batch as its journal holds it: which messages of which stream it applied, not their
 * scans. The sequences are ascending; `runs` lists them from `first` as alternating lengths of
 * consecutive sequences taken and skipped (`[3, 2, 1]`: first..first+2, then first+5), since a
 * shard's messages are a subset of the stream's (other shards' orgs, dead letters). `scans` counts
 * the scans they decode to (a reader message decodes to several), checked on the way back.
 */
export interface ScanBatchRef {
  stream: string;
  first: number;
  last: number;
  runs: number[];
  scans: number;
  options: ApplyOptions;
}

interface ApplyArgs {
  items: SourcedScan[];
  options: ApplyOptions;
}

/** The message sequences of a batch (each message's first scan carries it), or undefined when not all of it came from one stream. */
function messageSeqs(items: SourcedScan[]): { stream: string; seqs: number[] } | undefined {
  const stream = items[0]?.stream;
  if (stream === undefined || items[0]!.seq <= 0 || sourceOfStream(stream) === undefined) return undefined;
  const seqs: number[] = [];
  for (const item of items) {
    if (item.stream !== stream) return undefined;
    if (item.seq === 0) continue;
    if (item.seq <= (seqs.at(-1) ?? 0)) return undefined;
    seqs.push(item.seq);
  }
  return { stream, seqs };
}

export function runsOf(seqs: number[]): number[] {
  const runs: number[] = [];
  let taken = 0;
  for (let i = 0; i < seqs.length; i++) {
    taken++;
    const next = seqs[i + 1];
    if (next !== undefined && next !== seqs[i]! + 1) {
      runs.push(taken, next - seqs[i]! - 1);
      taken = 0;
    }
  }
  if (taken > 0) runs.push(taken);
  return runs;
}

export function seqsOf(first: number, runs: number[]): number[] {
  const seqs: number[] = [];
  let seq = first;
  for (let i = 0; i < runs.length; i++) {
    if (i % 2 === 1) {
      seq += runs[i]!;
      continue;
    }
    for (let k = 0; k < runs[i]!; k++) seqs.push(seq++);
  }
  return seqs;
}

/**
 * scans.apply's journal form. A batch whose scans did not all come from one input stream (tools,
 * benchmarks) is journaled in full instead (encode answers undefined).
 */
export const scanBatchJournal: JournalCodec<ApplyArgs> = {
  encode({ items, options }): ScanBatchRef | undefined {
    const messages = messageSeqs(items);
    if (messages === undefined) return undefined;
    const { stream, seqs } = messages;
    return { stream, first: seqs[0]!, last: seqs.at(-1)!, runs: runsOf(seqs), scans: items.length, options };
  },

  async decode(encoded, inputs: StreamInputs): Promise<ApplyArgs> {
    const ref = encoded as ScanBatchRef;
    const source = sourceOfStream(ref.stream);
    if (source === undefined) throw new Error(`journal: scan batch from unknown stream ${ref.stream}`);
    const seqs = seqsOf(ref.first, ref.runs);
    if (seqs.at(-1) !== ref.last) throw new Error(`journal: scan batch runs end at ${seqs.at(-1)}, not at ${ref.last}`);
    const items: SourcedScan[] = [];
    for (const message of await inputs.messages(ref.stream, seqs)) {
      const route = source.route(message.subject);
      const decoded = 'dead' in route ? route : source.decode(message.subject, route.orgId, message.data, message.at);
      if ('dead' in decoded)
        throw new Error(`journal: ${ref.stream} message ${message.seq} was applied but now decodes as dead (${decoded.dead.reason})`);
      items.push(...sourcedItems(decoded.scans, ref.stream, message.seq));
    }
    if (items.length !== ref.scans) throw new Error(`journal: scan batch decodes to ${items.length} scans, not ${ref.scans}`);
    return { items, options: ref.options };
  },
};
