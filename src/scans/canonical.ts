/**
 * The canonical scan: what every scan source (the SCANS JSON messages, later the CS463 reader
 * adapter on stream READERS) is turned into before it reaches a shard. The apply pipeline
 * (`applyScanBatch` in apply.ts) only ever sees this shape.
 */
/** `keyOrTagValue`: the live location with that external_key, else the one carrying a tag (any type) with that value (a reader's capture point). */
export type LocationRef = { id: number } | { externalKey: string } | { tagType: string; value: string } | { keyOrTagValue: string };

export interface TagRead {
  tagType: string;
  value: string;
}

export interface CanonicalScan {
  orgId: number;
  /** 1..64 chars, unique per org; a repeat is a no-op. */
  eventId: string;
  /** Milliseconds since the epoch (sub-millisecond input truncated). */
  observedAt: number;
  location: LocationRef;
  reads: TagRead[];
}

/** A scan in hand with where it came from: the stream and its sequence (0 when not from a stream). */
export interface SourcedScan {
  scan: CanonicalScan;
  stream: string;
  seq: number;
}

export function describeLocation(ref: LocationRef): string {
  if ('id' in ref) return `location id ${ref.id}`;
  if ('externalKey' in ref) return `location external_key ${JSON.stringify(ref.externalKey)}`;
  if ('keyOrTagValue' in ref) return `capture point ${JSON.stringify(ref.keyOrTagValue)} (location external_key or location tag value)`;
  return `location tag ${ref.tagType}:${JSON.stringify(ref.value)}`;
}
