/**
 * Where trackd reads the time. Requests take one reading when they start (`RequestContext.now`),
 * shard commands carry the reading of the thread that sent them (so an actor's effects are a
 * function of its messages: the seam for replaying a journal), scan batches carry the time JetStream
 * stored their messages (never the consumer's clock).
 * Tests and replays inject another clock; everything else uses `systemClock`.
 */
export interface Clock {
  /** Epoch milliseconds. */
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };
