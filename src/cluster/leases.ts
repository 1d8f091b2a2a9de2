import { type LeaseBucket, RevisionMoved } from './leaseBucket.js';
import type { Presence } from './presence.js';
import { rendezvous } from './placement.js';

/** A shard lease's value: who holds it (empty: released, free to claim at once). */
export interface Lease {
  node: string;
  /** Who released it (a released lease): the other live nodes are its candidates, so it moves. */
  released_by?: string;
  /**
   * Written with each renewal: per input stream, what the holder's consumer of the shard has
   * settled (ScanIngest.settledThrough). A claim writes none, so a new holder's figures are never
   * taken from its predecessor. The retention purge reads them (src/shards/retention.ts).
   */
  inputs?: Record<string, number | null>;
}

/** What a holder reports with each renewal of a shard's lease (undefined: nothing yet). */
export type LeaseProgress = (shard: number) => Record<string, number | null> | undefined;

export type LeaseEvent =
  | { kind: 'acquired'; shard: number; epoch: number; from: string }
  | { kind: 'lost'; shard: number; detail: string }
  | { kind: 'released'; shard: number }
  | { kind: 'tick'; held: number[]; live: string[]; renewed: boolean }
  | { kind: 'error'; detail: string };

export interface LeaseSettings {
  nodeId: string;
  shards: number;
  /** The lease period: a lease that has not moved for this long may be taken over. */
  leaseMs: number;
  /**
   * How long a starting node watches the heartbeats before it claims a free shard (default: one
   * and a half lease periods), so that nodes started together all count as live and split the free
   * shards by rendezvous instead of the first one taking every shard (leases are sticky after that).
   * One period was too short for two nodes spawned together on a loaded 2-core machine (lease 5 s).
   */
  settleMs?: number;
  /**
   * Asks whether a node's connection is on the NATS cluster (src/cluster/presence.ts). With it, a
   * holder whose renewals stopped and whose connection has been gone for `absentMs` (every probe in
   * that time "no responders") loses its shards without waiting out the lease period.
   */
  probe?: (node: string) => Promise<Presence>;
  /** How long a holder's connection must have been seen gone before its shards are taken (default 3 s). */
  absentMs?: number;
}

/** Longest time between two reads of the leases (a tenth of the lease period when shorter; renewals go every third). */
const OBSERVE_MAX_MS = 1000;

const shardKey = (shard: number) => `shard.${shard}`;
const nodeKey = (node: string) => `node.${node}`;

/** Probes of a gone connection needed, besides absentMs, before a holder counts as gone. */
const ABSENT_PROBES = 2;

/** What this node saw of a key: its revision, and since when (this node's clock) it has not moved. */
interface Seen {
  revision: number;
  since: number;
  node: string;
  releasedBy?: string;
}

/**
 * This node's side of shard ownership (docs/cluster.md, step 3). Every lease period / 3 it
 *
 * 1. writes its heartbeat (`node.<id>`, over its own last revision);
 * 2. renews each lease it holds (`shard.<n>` over the revision it holds). A renew refused because
 *    the key moved means another node took the shard: the lease is lost and the shard must be
 *    released. A renew that times out is *not* a loss (a stream leader election on 2.9 takes 4 to 9
 *    s): the holder keeps trying, and loses only when an update is refused;
 * 3. reads every lease and heartbeat, noting since when each revision has not moved (this and the
 *    next step every lease period / 10, at most every second);
 * 4. claims a shard when it is free (never leased, or released) or its lease has not moved for a
 *    whole period while this node's own operations on the bucket all succeeded since then
 *    (bucketFailedAt), and this node wins
 *    the shard's rendezvous among the live nodes (heartbeat moved within a period). The claim
 *    updates the key over the revision it saw; the new revision is the fencing epoch. A holder
 *    whose NATS connection every probe found gone for absentMs (probeHolders) counts as stale at
 *    once: a killed node's shards need not wait out its lease period.
 *
 * Sticky: a holder that keeps renewing keeps its shards, whoever joins. A node that restarts and
 * finds a lease naming itself takes it back at once.
 */
export class LeaseManager {
  private readonly held = new Map<number, number>();
  private readonly seenShards = new Map<number, Seen>();
  private readonly seenNodes = new Map<string, Seen>();
  private heartbeat = 0;
  /**
   * When an operation of this node on the bucket last failed other than by a moved revision (a
   * heartbeat, a renewal, a read, a claim; 0: never): no claim relies on a period that holds one.
   * Heartbeats alone are too few: one every lease period / 3 can fall on both sides of a short
   * election, while this node's claims and reads in between time out (seen in the 3-node test: a
   * resumed node took two leases from a live holder whose renewals were failing in that election).
   */
  private bucketFailedAt = 0;
  private lastHeartbeatAt = 0;
  private lastBeatTriedAt = 0;
  private timer: NodeJS.Timeout | undefined;
  private ticking: Promise<void> | undefined;
  private readonly startedAt = Date.now();
  private progress: LeaseProgress = () => undefined;
  /** Other holders whose connection every probe since `since` found gone. */
  private readonly absent = new Map<string, { since: number; probes: number }>();

  constructor(
    private readonly bucket: LeaseBucket,
    private readonly settings: LeaseSettings,
    private readonly onEvent: (event: LeaseEvent) => void,
  ) {}

  start(): void {
    // Leases are read more often than they are renewed: a contender notes since when a lease has not
    // moved to within one read, so a dead holder's shards move about a lease period after its last
    // renewal (reads every lease / 3 added up to two more thirds: 16.5 s with a 10 s lease).
    const every = Math.max(50, Math.min(OBSERVE_MAX_MS, Math.floor(this.settings.leaseMs / 10)));
    const run = () => {
      this.ticking = this.tick().catch((err) => this.onEvent({ kind: 'error', detail: (err as Error).message }));
      void this.ticking.finally(() => {
        if (this.timer !== undefined) this.timer = setTimeout(run, every);
      });
    };
    this.timer = setTimeout(run, 0);
  }

  /**
   * The holder of each shard as this node last read the bucket: itself for the shards it holds,
   * the named node for the others (a released or never-leased shard is absent).
   */
  owners(): Map<number, string> {
    const owners = new Map<number, string>();
    for (const [shard, seen] of this.seenShards) if (seen.node !== '') owners.set(shard, seen.node);
    for (const shard of this.held.keys()) owners.set(shard, this.settings.nodeId);
    return owners;
  }

  /** The shards this node holds now, with their epochs. */
  holding(): Map<number, number> {
    return new Map(this.held);
  }

  /**
   * Whether the bucket's lease of `shard` names this node now: a read of the key, not of what this
   * node last saw (a node resumed after a pause still believes in leases taken from it meanwhile).
   */
  async confirm(shard: number): Promise<boolean> {
    if (!this.held.has(shard)) return false;
    return (await this.bucket.get<Lease>(shardKey(shard)))?.value.node === this.settings.nodeId;
  }

  /** What each renewal of a held lease carries from now on (see Lease.inputs). */
  reportProgress(progress: LeaseProgress): void {
    this.progress = progress;
  }

  /** Gives a shard up (fenced, or shutting down): its lease is marked free so another node claims it at once. */
  async release(shard: number): Promise<void> {
    const revision = this.held.get(shard);
    if (revision === undefined) return;
    this.held.delete(shard);
    try {
      await this.bucket.put(shardKey(shard), { node: '', released_by: this.settings.nodeId } satisfies Lease, revision);
    } catch {
      // Taken already, or the broker is away: the lease then expires by not moving.
    }
    this.onEvent({ kind: 'released', shard });
  }

  async stop(): Promise<void> {
    const timer = this.timer;
    this.timer = undefined;
    clearTimeout(timer);
    await this.ticking;
  }

  private renewEvery(): number {
    return Math.max(50, Math.floor(this.settings.leaseMs / 3));
  }

  private async tick(): Promise<void> {
    const now = Date.now();
    const renewing = now - this.lastBeatTriedAt >= this.renewEvery();
    if (renewing) {
      this.lastBeatTriedAt = now;
      await this.beat(now);
      await this.renew();
    }
    try {
      await this.observe(now);
    } catch (err) {
      this.bucketFailedAt = Date.now();
      throw err;
    }
    await this.probeHolders(now);
    await this.claim(now);
    this.onEvent({ kind: 'tick', held: [...this.held.keys()].sort((a, b) => a - b), live: this.liveNodes(now), renewed: renewing });
  }

  private async beat(now: number): Promise<void> {
    const key = nodeKey(this.settings.nodeId);
    try {
      if (this.heartbeat === 0) this.heartbeat = (await this.bucket.get(key))?.revision ?? 0;
      this.heartbeat = await this.bucket.put(key, { node: this.settings.nodeId, at: new Date(now).toISOString() }, this.heartbeat);
      this.lastHeartbeatAt = now;
    } catch (err) {
      this.bucketFailedAt = Date.now();
      if (err instanceof RevisionMoved) this.heartbeat = 0;
      this.onEvent({ kind: 'error', detail: `heartbeat: ${(err as Error).message}` });
    }
  }

  private async renew(): Promise<void> {
    for (const [shard, revision] of this.held) {
      try {
        const inputs = this.progress(shard);
        const lease: Lease = inputs === undefined ? { node: this.settings.nodeId } : { node: this.settings.nodeId, inputs };
        const next = await this.bucket.put(shardKey(shard), lease, revision);
        if (this.held.has(shard)) this.held.set(shard, next);
      } catch (err) {
        if (err instanceof RevisionMoved) {
          // A renew that timed out may have been stored after all: a lease still naming this node is still its own.
          const now = await this.bucket.get<Lease>(shardKey(shard)).catch(() => undefined);
          if (now?.value.node === this.settings.nodeId) this.held.set(shard, now.revision);
          else {
            this.held.delete(shard);
            this.onEvent({ kind: 'lost', shard, detail: `${now?.value.node || 'nobody'} holds its lease now` });
          }
        }
        // Anything else (a timeout, the broker away): keep the lease and try again next tick.
        else this.bucketFailedAt = Date.now();
      }
    }
  }

  /**
   * Probes the other nodes that hold leases, at every read: a holder whose connection stays gone for
   * absentMs is dead, and waiting out its lease period would only delay the takeover. A paused
   * holder's subscription still takes the probe, which times out (unknown) and clears what was seen,
   * so a pause still waits for the lease period. A wrong guess is safe: the new owner's journal
   * entry fences the old one.
   */
  private async probeHolders(now: number): Promise<void> {
    const probe = this.settings.probe;
    if (probe === undefined) return;
    const holders = new Set<string>();
    for (const seen of this.seenShards.values()) if (seen.node !== '' && seen.node !== this.settings.nodeId) holders.add(seen.node);
    for (const node of this.absent.keys()) if (!holders.has(node)) this.absent.delete(node);
    await Promise.all(
      [...holders].map(async (node) => {
        const presence = await probe(node).catch((): Presence => 'unknown');
        const before = this.absent.get(node);
        if (presence === 'absent') this.absent.set(node, { since: before?.since ?? now, probes: (before?.probes ?? 0) + 1 });
        else this.absent.delete(node);
      }),
    );
  }

  /** Whether `node`'s connection has been seen gone by every probe for absentMs (at least ABSENT_PROBES of them). */
  private gone(node: string, now: number): boolean {
    const absent = this.absent.get(node);
    return absent !== undefined && absent.probes >= ABSENT_PROBES && now - absent.since >= (this.settings.absentMs ?? 3000);
  }

  private async observe(now: number): Promise<void> {
    const note = (seen: Map<string | number, Seen>, key: string | number, revision: number, node: string, releasedBy?: string) => {
      const before = seen.get(key);
      if (before === undefined || before.revision !== revision) seen.set(key, { revision, since: now, node, releasedBy });
    };
    for (let shard = 0; shard < this.settings.shards; shard++) {
      if (this.held.has(shard)) continue;
      const lease = await this.bucket.get<Lease>(shardKey(shard));
      if (lease === undefined) this.seenShards.delete(shard);
      else note(this.seenShards as Map<string | number, Seen>, shard, lease.revision, lease.value.node, lease.value.released_by);
    }
    for (const key of await this.bucket.keys('node.')) {
      const beat = await this.bucket.get<{ node: string }>(key);
      if (beat !== undefined) note(this.seenNodes as Map<string | number, Seen>, beat.value.node, beat.revision, beat.value.node);
    }
  }

  /** Nodes whose heartbeat moved within the last period (this one included while its own beats succeed). */
  private liveNodes(now: number): string[] {
    const live = new Set<string>();
    for (const [node, seen] of this.seenNodes) if (now - seen.since < this.settings.leaseMs && !this.gone(node, now)) live.add(node);
    if (this.healthy(now)) live.add(this.settings.nodeId);
    else live.delete(this.settings.nodeId);
    return [...live].sort();
  }

  private healthy(now: number): boolean {
    return now - this.lastHeartbeatAt < this.settings.leaseMs / 2;
  }

  private async claim(now: number): Promise<void> {
    if (!this.healthy(now)) return;
    const live = this.liveNodes(now);
    for (let shard = 0; shard < this.settings.shards; shard++) {
      if (this.held.has(shard)) continue;
      const seen = this.seenShards.get(shard);
      const mine = seen?.node === this.settings.nodeId && seen.since >= this.startedAt;
      const free =
        (seen === undefined || seen.node === '') && now - this.startedAt >= (this.settings.settleMs ?? this.settings.leaseMs * 1.5);
      // Quiet for a whole period in which this node's own bucket operations all succeeded: counted from
      // the lease's last move or this node's last failed operation, whichever came later (counting only
      // from the move would never count a holder that died before one of this node's failures).
      const quietSince = seen === undefined ? now : Math.max(seen.since, this.bucketFailedAt);
      const stale =
        seen !== undefined &&
        (now - quietSince >= this.settings.leaseMs || (this.gone(seen.node, now) && seen.since <= this.absent.get(seen.node)!.since));
      if (!mine && !free && !stale) continue;
      // A stale holder is not a candidate: its heartbeat may still move (a node whose lease renewals fail).
      // Nor is the node that released a shard, while another is live: it gave the shard up (fenced, stopping).
      let candidates = live.filter((node) => (mine || free ? node !== seen?.releasedBy : node !== seen?.node));
      if (free && candidates.length === 0) candidates = live;
      if (!mine && rendezvous(shard, candidates) !== this.settings.nodeId) continue;
      try {
        const epoch = await this.bucket.put(shardKey(shard), { node: this.settings.nodeId } satisfies Lease, seen?.revision ?? 0);
        this.held.set(shard, epoch);
        this.seenShards.delete(shard);
        this.onEvent({ kind: 'acquired', shard, epoch, from: seen?.node ?? '' });
      } catch (err) {
        if (!(err instanceof RevisionMoved)) {
          this.bucketFailedAt = Date.now();
          this.onEvent({ kind: 'error', detail: `claim of shard ${shard}: ${(err as Error).message}` });
        }
      }
    }
  }
}
