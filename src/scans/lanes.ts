/**
 * The batch rules of the scan consumer, as pure functions: how many queued messages go into the
 * next shard batch, and whether a lane waits to gather more before applying.
 */

export interface BatchLimits {
  /** Most scans applied in one shard transaction. */
  maxBatch: number;
  /** Most tag reads applied in one shard transaction (bounds how long one batch holds the shard). */
  maxBatchReads: number;
  /** Longest a backlog batch waits for more messages before it is applied. */
  maxGatherMs: number;
}

/** A queued message as the batch rules see it: its scans and tag reads. */
export interface Queued {
  scans: number;
  reads: number;
}

/** How many messages at the head of the queue form the next batch: within both limits, at least one. */
export function batchLength(queue: readonly Queued[], limits: BatchLimits): number {
  let scans = 0;
  let reads = 0;
  let n = 0;
  for (const next of queue) {
    if (n > 0 && (scans + next.scans > limits.maxBatch || reads + next.reads > limits.maxBatchReads)) break;
    scans += next.scans;
    reads += next.reads;
    n++;
  }
  return n;
}

/** Whether a batch is at either limit (a batch behind one in flight is sent only full: laneScheduler.ts). */
export function atLimit(batch: readonly Queued[], limits: BatchLimits): boolean {
  let scans = 0;
  let reads = 0;
  for (const b of batch) {
    scans += b.scans;
    reads += b.reads;
  }
  return scans >= limits.maxBatch || reads >= limits.maxBatchReads;
}

/** A lane's queue as the gather rule sees it. */
export interface LaneState {
  /** Messages queued now, and at the last check. */
  queued: number;
  gathered: number;
  scans: number;
  reads: number;
  /** Milliseconds since the oldest queued message arrived. */
  waitedMs: number;
}

/**
 * Whether a lane keeps gathering before it applies: only while the stream holds a backlog, messages
 * keep arriving, the batch is below both limits and the oldest message has not waited too long
 * (a commit costs about the pages it dirties, so a bigger backlog batch costs less per message; a
 * live feed never waits).
 */
export function keepGathering(lane: LaneState, backlog: boolean, stopping: boolean, limits: BatchLimits): boolean {
  return (
    backlog &&
    !stopping &&
    lane.queued > lane.gathered &&
    lane.scans < limits.maxBatch &&
    lane.reads < limits.maxBatchReads &&
    lane.waitedMs < limits.maxGatherMs
  );
}
