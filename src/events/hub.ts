import type { Authenticator, Principal } from '../auth/authenticator.js';
import type { Logger } from '../log.js';
import type { Shard } from '../shards/shard.js';
import { envelopeJson, type EventRow } from './envelope.js';
import type { EventFilter } from './filters.js';
import { eventReads, visibleTo } from './read.js';

/**
 * Where a subscriber's events go (an SSE response, one subscription of a WebSocket). `event` and
 * `keepAlive` say false when the client is not keeping up (what was given is still delivered).
 */
export interface StreamSink {
  event(row: EventRow): boolean;
  keepAlive(): boolean;
  /** Runs `writes` with the connection corked: what they write leaves in one send. */
  cork(writes: () => void): void;
  /** Ends the subscription, telling the client why and the position to resume after. */
  end(reason: CloseReason, resumeAfter: number): void;
  /** Called once when the client can take more after a write said false. */
  onWritable(resume: () => void): void;
}

/** The raw side of a Server-Sent Events response (server.ts writes it to uWS). */
export interface TextSink {
  write(text: string | Uint8Array): boolean;
  cork(writes: () => void): void;
  /** Writes the last frame and closes the stream (the response ends once it is flushed). */
  end(text: string): void;
  onWritable(resume: () => void): void;
}

/** Why the server ends a stream (the `reason` of its last frame, `event: close`). */
export type CloseReason = 'slow_consumer' | 'unauthorized' | 'cursor_expired' | 'shutdown';

export interface HubOptions {
  /** How often each thread looks for new events of the orgs it streams (while it streams to few clients). */
  pollMs: number;
  /** Up to this many streams on a thread it polls every `pollMs`; beyond, less often in proportion, up to `busyPollMs`. */
  fewStreams: number;
  busyPollMs: number;
  /** A client that has not taken its frames for this long is closed (slow_consumer). */
  slowMs: number;
  /** A client more than this many events behind the head is closed (slow_consumer). */
  maxLag: number;
  heartbeatMs: number;
  /** A WebSocket with this many bytes unsent counts as not keeping up (its subscriptions wait for the drain). */
  socketHighWaterBytes: number;
}

export const DEFAULT_HUB_OPTIONS: HubOptions = {
  pollMs: 20,
  fewStreams: 64,
  busyPollMs: 100,
  slowMs: 10_000,
  maxLag: 10_000,
  heartbeatMs: 5_000,
  socketHighWaterBytes: 1024 * 1024,
};

interface Subscriber {
  orgId: number;
  shard: Shard;
  principal: Principal;
  filter: EventFilter;
  /** The last sequence this client has been given (or skipped past). */
  cursor: number;
  sink: StreamSink;
  /** Since when the client has not taken what it was given (undefined: keeping up). */
  blockedSince: number | undefined;
  closed: boolean;
}

const BATCH = 500;
/** Most reads of BATCH rows per organization and poll (a backlog of more waits for the next poll). */
const READS_PER_POLL = 10;
/** A shard's wait for commits is renewed this often (and ends within it once the thread no longer streams from it). */
const WATCH_TIMEOUT_MS = 1_000;

/**
 * The time to the next poll. A poll that finds events costs a send (a syscall, at the connection's
 * uncork) per client it writes to, so a thread's sends grow with its streams times its polls: past
 * `fewStreams` streams the poll is spaced in proportion (a thread sends at most about
 * fewStreams / pollMs times a second), up to `busyPollMs`, and a client's events of that span leave
 * in one send. Latency is traded for the HTTP threads' time only on threads with many streams.
 */
export function pollInterval(streams: number, o: Pick<HubOptions, 'pollMs' | 'fewStreams' | 'busyPollMs'>): number {
  if (streams <= o.fewStreams) return o.pollMs;
  return Math.max(o.pollMs, Math.min(o.busyPollMs, Math.round((o.pollMs * streams) / o.fewStreams)));
}

/** One frame of a Server-Sent Events stream: `id` is the org sequence, so a reconnect's Last-Event-ID resumes exactly. */
export const sseFrame = (row: EventRow) => `id: ${row.seq}\nevent: ${row.type}\ndata: ${envelopeJson(row)}\n\n`;

/**
 * The frame as bytes, made once per row for every stream of the poll that gets it (a poll hands the
 * same row objects to all the org's streams): each write then copies bytes instead of encoding text.
 */
export function sseFrameBytes(row: EventRow): Uint8Array {
  let bytes = sseFrames.get(row);
  if (bytes === undefined) sseFrames.set(row, (bytes = Buffer.from(sseFrame(row))));
  return bytes;
}

const sseFrames = new WeakMap<EventRow, Uint8Array>();
const closeFrame = (reason: CloseReason, cursor: number) => `event: close\ndata: {"reason":"${reason}","resume_after":${cursor}}\n\n`;

/**
 * The debug line of a poll that fed streams (`bench/lib/eventStages.ts` joins it with the scan
 * batches' lines): when the rows were written, when the last commit with events before the read
 * ran (the shard's clock in shared memory), and each event time (occurred_at, ms) with its count.
 */
export function streamedTrace(logger: Logger): (orgId: number, rows: readonly EventRow[], at: number, committedAt: number) => void {
  return (orgId, rows, at, committedAt) => {
    const counts = new Map<number, number>();
    for (const row of rows) counts.set(row.occurred_at, (counts.get(row.occurred_at) ?? 0) + 1);
    logger.debug({ org: orgId, written_at: at, committed_at: committedAt, occurred: [...counts] }, 'events streamed');
  };
}

/** A Server-Sent Events response as a subscriber's sink. */
export function sseSink(raw: TextSink): StreamSink {
  return {
    event: (row) => raw.write(sseFrameBytes(row)),
    keepAlive: () => raw.write(': keep-alive\n\n'),
    cork: (writes) => raw.cork(writes),
    end: (reason, resumeAfter) => raw.end(closeFrame(reason, resumeAfter)),
    onWritable: (resume) => raw.onWritable(resume),
  };
}

/**
 * The streams of one HTTP thread. The log in SQLite is every client's buffer: each subscriber is a
 * cursor, so a client that stops reading costs no memory here; it is simply not written to until
 * uWS says it drained, and closed (slow_consumer) once it is too far behind or blocked too long,
 * to resume from its last id. One read per organization and poll serves all its subscribers.
 */
export class EventHub {
  private readonly subscribers = new Set<Subscriber>();
  private timer: NodeJS.Timeout | undefined;
  private lastHeartbeat = Date.now();
  /** Streams per shard, and the shards whose commits this thread waits on (one wait each while it streams from them). */
  private readonly streamsOf = new Map<Shard, number>();
  private readonly watched = new Set<Shard>();
  private waking = false;

  constructor(
    private readonly authenticator: Authenticator,
    private readonly options: HubOptions = DEFAULT_HUB_OPTIONS,
    /** Told each stream the server ends, with why (the metrics count them). */
    private readonly onClosed: (reason: CloseReason) => void = () => {},
    /** Told each poll's rows once they were handed to the org's streams (LOG_LEVEL=debug: where an event's latency goes). */
    private readonly onFed?: (orgId: number, rows: readonly EventRow[], at: number, committedAt: number) => void,
  ) {}

  /** Starts streaming to `sink` after `cursor`; returns the function that detaches it (client gone). */
  add(shard: Shard, principal: Principal, filter: EventFilter, cursor: number, sink: StreamSink): () => void {
    const sub: Subscriber = { orgId: principal.orgId, shard, principal, filter, cursor, sink, blockedSince: undefined, closed: false };
    this.subscribers.add(sub);
    this.streamsOf.set(shard, (this.streamsOf.get(shard) ?? 0) + 1);
    this.watch(shard);
    this.tick();
    this.schedule();
    return () => this.detach(sub);
  }

  /**
   * Waits for the shard's commits that append events (a counter in shared memory the shard's
   * thread notifies after each, `ShardGenerations.eventsCommitted`) and polls at once when one
   * lands, instead of at the next poll: while the thread holds few streams their events leave
   * as soon as they are committed. Ends when the thread no longer streams from the shard.
   */
  private watch(shard: Shard): void {
    if (this.watched.has(shard)) return;
    this.watched.add(shard);
    void (async () => {
      for (;;) {
        if ((this.streamsOf.get(shard) ?? 0) === 0) {
          this.watched.delete(shard);
          return;
        }
        const seen = shard.generations.eventsGeneration();
        await shard.generations.eventsAfter(seen, WATCH_TIMEOUT_MS);
        if (shard.generations.eventsGeneration() !== seen) this.wake();
      }
    })();
  }

  /**
   * A poll now (once per turn of the event loop, however many shards committed), then the timer
   * again from it. Not with many streams: there the spaced poll is what keeps a client's events
   * of a span in one send (pollInterval).
   */
  private wake(): void {
    if (this.waking || this.subscribers.size === 0 || this.subscribers.size > this.options.fewStreams) return;
    this.waking = true;
    setImmediate(() => {
      this.waking = false;
      if (this.subscribers.size === 0) return;
      if (this.timer !== undefined) clearTimeout(this.timer);
      this.timer = undefined;
      this.tick();
      this.schedule();
    });
  }

  /** Open streams on this thread. */
  size(): number {
    return this.subscribers.size;
  }

  /** The next poll, while there are streams (one timer at a time). */
  private schedule(): void {
    if (this.timer !== undefined || this.subscribers.size === 0) return;
    this.timer = setTimeout(
      () => {
        this.timer = undefined;
        this.tick();
        this.schedule();
      },
      pollInterval(this.subscribers.size, this.options),
    );
  }

  private detach(sub: Subscriber): void {
    sub.closed = true;
    if (!this.subscribers.delete(sub)) return;
    const left = (this.streamsOf.get(sub.shard) ?? 1) - 1;
    if (left === 0) this.streamsOf.delete(sub.shard);
    else this.streamsOf.set(sub.shard, left);
    if (this.subscribers.size === 0 && this.timer !== undefined) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
  }

  close(sub: Subscriber, reason: CloseReason): void {
    if (sub.closed) return;
    this.detach(sub);
    this.onClosed(reason);
    sub.sink.end(reason, sub.cursor);
  }

  closeAll(reason: CloseReason): void {
    for (const sub of [...this.subscribers]) this.close(sub, reason);
  }

  private tick(): void {
    const now = Date.now();
    const heartbeat = now - this.lastHeartbeat >= this.options.heartbeatMs;
    if (heartbeat) this.lastHeartbeat = now;
    const byOrg = new Map<number, Subscriber[]>();
    for (const sub of this.subscribers) {
      if (!this.authenticator.valid(sub.principal, now)) {
        this.close(sub, 'unauthorized');
        continue;
      }
      let list = byOrg.get(sub.orgId);
      if (list === undefined) byOrg.set(sub.orgId, (list = []));
      list.push(sub);
    }
    for (const [orgId, subs] of byOrg) {
      try {
        this.feed(orgId, subs, now, heartbeat);
      } catch {
        // A read that failed (storage trouble) is tried again at the next poll.
      }
    }
  }

  private feed(orgId: number, subs: Subscriber[], now: number, heartbeat: boolean): void {
    const shard = subs[0]!.shard;
    const committedAt = this.onFed === undefined ? 0 : shard.generations.lastEventsAt();
    const s = eventReads(shard);
    const head = (s.head.get(orgId) as number | undefined) ?? 0;
    let from = Number.POSITIVE_INFINITY;
    for (const sub of subs) {
      if (sub.blockedSince !== undefined) {
        if (now - sub.blockedSince > this.options.slowMs || head - sub.cursor > this.options.maxLag) this.close(sub, 'slow_consumer');
        continue;
      }
      if (head - sub.cursor > this.options.maxLag) {
        this.close(sub, 'slow_consumer');
        continue;
      }
      if (sub.cursor < head) from = Math.min(from, sub.cursor);
      else if (heartbeat) this.write(sub, undefined, now);
    }
    if (from === Number.POSITIVE_INFINITY) return;
    const oldest = (s.oldest.get(orgId) as number | null) ?? head + 1;
    for (let read = 1; ; read++) {
      let rows = s.after.all(orgId, from, BATCH) as EventRow[];
      for (const sub of subs) {
        if (sub.closed || sub.blockedSince !== undefined || sub.cursor >= head) continue;
        if (sub.cursor + 1 < oldest) {
          this.close(sub, 'cursor_expired');
          continue;
        }
        if (rows.length > 0 && rows[0]!.seq > sub.cursor + 1) rows = s.after.all(orgId, sub.cursor, BATCH) as EventRow[];
        // One send per client and read, however many events it takes: with many clients the sends
        // (a syscall each) are what the HTTP threads spend their time on.
        const batch = rows;
        sub.sink.cork(() => this.deliver(sub, batch, now));
      }
      if (this.onFed !== undefined && rows.length > 0) this.onFed(orgId, rows, Date.now(), committedAt);
      // A full read: there is more (one scan batch can commit thousands of events at once), read on
      // now rather than at the next poll, from the least advanced client still taking them.
      if (rows.length < BATCH || read === READS_PER_POLL) return;
      from = Number.POSITIVE_INFINITY;
      for (const sub of subs) if (!sub.closed && sub.blockedSince === undefined && sub.cursor < head) from = Math.min(from, sub.cursor);
      if (from === Number.POSITIVE_INFINITY) return;
    }
  }

  /** Hands `rows` after the subscriber's cursor over, in order, until its client stops taking them. */
  private deliver(sub: Subscriber, rows: readonly EventRow[], now: number): void {
    for (const row of rows) {
      if (row.seq <= sub.cursor) continue;
      sub.cursor = row.seq;
      if (!visibleTo(sub.principal.scopes, row) || !sub.filter.matches(row)) continue;
      if (!this.write(sub, row, now)) break;
    }
  }

  /** Writes an event (or a keep-alive); false (and the client marked blocked until it drains) when uWS holds it back. */
  private write(sub: Subscriber, row: EventRow | undefined, now: number): boolean {
    if (row === undefined ? sub.sink.keepAlive() : sub.sink.event(row)) return true;
    sub.blockedSince = now;
    sub.sink.onWritable(() => {
      sub.blockedSince = undefined;
    });
    return false;
  }
}
