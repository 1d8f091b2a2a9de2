import { readersSource } from '../readers/source.js';
import type { CanonicalScan, SourcedScan } from './canonical.js';
import { scansSource, type ScanSource } from './source.js';

/** Every stream trackd turns into scans: what serve consumes, and what a journal replay reads back. */
export const scanSources: ScanSource[] = [scansSource, readersSource];

export const sourceOfStream = (stream: string): ScanSource | undefined => scanSources.find((s) => s.stream === stream);

/**
 * A message's scans as one batch holds them: only the first carries the stream sequence (the
 * shard's applied-sequence check); the others of the same message commit in the same transaction
 * and are guarded by their event ids.
 */
export const sourcedItems = (scans: CanonicalScan[], stream: string, seq: number): SourcedScan[] =>
  scans.map((scan, i) => ({ scan, stream, seq: i === 0 ? seq : 0 }));
