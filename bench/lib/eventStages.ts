/**
 * Where a scan's time goes on its way to an event stream (`npm run bench -- --stages`, the
 * events-*-latency scenarios): trackd runs at LOG_LEVEL=debug, which adds one line per scan batch
 * ('scan batch applied': the batch's time, when its last message was taken from the consumer, when
 * the shard was asked) and one per stream poll that wrote events ('events streamed': when, the
 * shard's last commit with events before the poll's read, and the event times it wrote). Joined on the event time (a batch's events carry
 * its time as occurred_at) with the client's arrivals, each event's latency splits into stages, all
 * on this machine's wall clock (nats-server's timestamps included):
 *
 *   delivery  stored in JetStream -> taken from the pull consumer by trackd's main thread
 *   lane      taken -> its batch sent to the shard (waiting for the batch before, or gathering)
 *   shard     sent -> committed (mailbox, apply, commit: the batch's own commit, read by the consumer
 *             from the shard's shared memory when the answer came; lines without it fall back to
 *             the commit time the poll saw, which can be an earlier batch's)
 *   poll      committed -> written to the stream by the HTTP thread's poll
 *
 * Beside the chain (not part of the total): `answer`, committed -> the batch's answer back on the
 * main thread (the report index update after the commit, the mailbox's reply), which the lane's next
 * batch waits for; and per batch line, its messages and its time on the shard (sent -> answered).
 *   socket    written -> received by the client (kernel, the client's event loop)
 */
import { summarize, type LatencySummary } from './loadSpec.js';

export const STAGES = ['delivery', 'lane', 'shard', 'poll', 'socket', 'total'] as const;
export type Stage = (typeof STAGES)[number];

interface Batch {
  accepted: number;
  started: number;
  /** The batch's commit (0: not in the line, or older than its start: the batch made no events). */
  committed: number;
  answered: number;
}

interface Written {
  written: number;
  committed: number;
}

/** Collects trackd's debug lines (stdout, pino JSON) as they come. */
export class StageLog {
  private readonly batches = new Map<number, Batch>();
  private readonly written = new Map<number, Written>();
  /** Per batch line: messages, and ms from sent to answered. */
  private readonly batchMessages: number[] = [];
  private readonly batchMs: number[] = [];
  private rest = '';
  /** The matched lines as they came (the scenario keeps them beside its result). */
  readonly lines: string[] = [];

  take(chunk: string): void {
    const text = this.rest + chunk;
    const lines = text.split('\n');
    this.rest = lines.pop()!;
    for (const line of lines) this.line(line);
  }

  private line(line: string): void {
    if (!line.includes('"scan batch applied"') && !line.includes('"events streamed"')) return;
    this.lines.push(line);
    const entry = JSON.parse(line) as Record<string, any>;
    if (entry.msg === 'scan batch applied' && typeof entry.now === 'number') {
      // Two batches with the same time (ms): the later one's stages.
      const committed = typeof entry.committed_at === 'number' && entry.committed_at >= entry.started_at ? entry.committed_at : 0;
      this.batches.set(entry.now, { accepted: entry.accepted_at, started: entry.started_at, committed, answered: entry.applied_at });
      this.batchMessages.push(entry.seqs.length);
      this.batchMs.push(entry.applied_at - entry.started_at);
    } else if (entry.msg === 'events streamed') {
      for (const [occurred] of entry.occurred as [number, number][])
        if (!this.written.has(occurred)) this.written.set(occurred, { written: entry.written_at, committed: entry.committed_at });
    }
  }

  /**
   * Per-stage p50 and p99 over the events the client received (`arrivals`: event time, arrival,
   * events), each event counted, as the scenario's extra figures (`stage_<name>_p50_ms`, ...).
   */
  stages(arrivals: readonly [number, number, number][]): Record<string, number> {
    const samples = Object.fromEntries(STAGES.map((s) => [s, [] as number[]])) as Record<Stage, number[]>;
    const answer: number[] = [];
    let unmatched = 0;
    for (const [occurred, arrived, events] of arrivals) {
      const batch = this.batches.get(occurred);
      const written = this.written.get(occurred);
      if (batch === undefined || written === undefined) {
        unmatched += events;
        continue;
      }
      const stage: Record<Stage, number> = {
        delivery: batch.accepted - occurred,
        lane: batch.started - batch.accepted,
        shard: (batch.committed || written.committed) - batch.started,
        poll: written.written - (batch.committed || written.committed),
        socket: arrived - written.written,
        total: arrived - occurred,
      };
      for (const s of STAGES) for (let i = 0; i < events; i++) samples[s].push(stage[s]);
      if (batch.committed > 0) for (let i = 0; i < events; i++) answer.push(batch.answered - batch.committed);
    }
    const figures: Record<string, number> = { stage_events: samples.total.length, stage_unmatched_events: unmatched };
    for (const s of STAGES) {
      const summary: LatencySummary = summarize(Float64Array.from(samples[s]), samples[s].length);
      figures[`stage_${s}_p50_ms`] = summary.p50;
      figures[`stage_${s}_p99_ms`] = summary.p99;
    }
    const percentiles = (name: string, values: number[]) => {
      const summary = summarize(Float64Array.from(values), values.length);
      figures[`${name}_p50`] = summary.p50;
      figures[`${name}_p99`] = summary.p99;
    };
    percentiles('stage_answer_ms', answer);
    figures.batches = this.batchMs.length;
    percentiles('batch_messages', this.batchMessages);
    percentiles('batch_ms', this.batchMs);
    return figures;
  }
}
