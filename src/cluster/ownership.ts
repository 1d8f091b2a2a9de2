import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import { LeaseBucket, RevisionMoved } from './leaseBucket.js';
import { LeaseManager, type LeaseEvent, type LeaseProgress } from './leases.js';
import { answerPresence, probePresence } from './presence.js';
import { whileJetStreamElects } from '../scans/streams.js';

export interface OwnershipSettings {
  nodeId: string;
  /** The cluster's fixed shard count (the same on every node: checked against the bucket at start). */
  shards: number;
  leaseMs: number;
  /** Copies of the lease bucket when this node creates it. */
  replicas: number;
  /** See LeaseSettings.settleMs (default: one and a half lease periods). */
  settleMs?: number;
}

/** What changes for this node: a shard it now holds (under lease revision `epoch`), or one it no longer holds. */
export type OwnershipEvent =
  | { kind: 'acquired'; shard: number; epoch: number; from: string }
  | { kind: 'released'; shard: number; reason: 'lost' | 'released'; detail: string };

/** A node started with another shard count than the cluster's (orgs would map to other shards). */
export class ShardCountMismatch extends Error {
  override name = 'ShardCountMismatch';
}

const CLUSTER_KEY = 'cluster';

/**
 * Who owns which shard of the cluster, as this node sees the lease bucket (docs/cluster.md,
 * "Ownership by lease"): `holds(n)` for this node's own shards, `ownerOf(n)` for any shard (the
 * node named by its lease at the last read, every lease period / 3), and events when this node
 * acquires or stops holding a shard. Whoever runs shards (serve's cluster wiring) and whoever
 * routes requests to their owners (forwarding) both read this one object.
 */
export class ShardOwnership {
  private readonly listeners = new Set<(event: OwnershipEvent) => void>();
  private readonly errorListeners = new Set<(detail: string) => void>();
  private readonly manager: LeaseManager;
  private live: string[] = [];

  private constructor(
    bucket: LeaseBucket,
    readonly settings: OwnershipSettings,
    nc: NatsConnection,
    private readonly presence: Subscription,
  ) {
    const probeMs = Math.max(100, Math.min(500, Math.floor(settings.leaseMs / 10)));
    this.manager = new LeaseManager(bucket, { ...settings, probe: (node) => probePresence(nc, node, probeMs) }, (event) =>
      this.dispatch(event),
    );
  }

  /** Opens the lease bucket, checks the cluster's shard count (recording it when first), and starts ticking. */
  static async start(nc: NatsConnection, settings: OwnershipSettings): Promise<ShardOwnership> {
    const bucket = await whileJetStreamElects(() =>
      LeaseBucket.open(nc, settings.replicas, Math.max(100, Math.floor(settings.leaseMs / 3))),
    );
    await whileJetStreamElects(() => checkShardCount(bucket, settings.shards));
    // Answering presence before the first heartbeat: a node that counts as live is never probed gone.
    const ownership = new ShardOwnership(bucket, settings, nc, answerPresence(nc, settings.nodeId));
    ownership.manager.start();
    return ownership;
  }

  get nodeId(): string {
    return this.settings.nodeId;
  }

  /** Whether this node holds shard `shard`'s lease now. */
  holds(shard: number): boolean {
    return this.manager.holding().has(shard);
  }

  /** Whether the lease of shard `shard` names this node now, read from the bucket (see LeaseManager.confirm). */
  confirm(shard: number): Promise<boolean> {
    return this.manager.confirm(shard);
  }

  /** The shards this node holds, ascending. */
  held(): number[] {
    return [...this.manager.holding().keys()].sort((a, b) => a - b);
  }

  /** The node holding shard `shard`'s lease (this node's id for its own), undefined when nobody does. */
  ownerOf(shard: number): string | undefined {
    return this.manager.owners().get(shard);
  }

  /** The nodes whose heartbeat moved within the last lease period, at the last tick. */
  liveNodes(): string[] {
    return [...this.live];
  }

  /** Calls `listener` with each acquire and release of this node; returns the unsubscribe. */
  on(listener: (event: OwnershipEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Calls `listener` with each failed bucket operation (logged by the caller; leases are kept through them). */
  onError(listener: (detail: string) => void): () => void {
    this.errorListeners.add(listener);
    return () => this.errorListeners.delete(listener);
  }

  /** What each renewal of a held lease reports of its shard's input consumers (Lease.inputs). */
  reportProgress(progress: LeaseProgress): void {
    this.manager.reportProgress(progress);
  }

  /** Gives shard `shard` up at once (fenced, or shutting down): another node may claim it at its next tick. */
  release(shard: number): Promise<void> {
    return this.manager.release(shard);
  }

  /** Stops renewing and claiming; with `releaseHeld`, gives every held shard up first (a clean shutdown). */
  async stop(releaseHeld = false): Promise<void> {
    await this.manager.stop();
    if (releaseHeld) for (const shard of this.held()) await this.release(shard);
    this.presence.unsubscribe();
  }

  private dispatch(event: LeaseEvent): void {
    switch (event.kind) {
      case 'acquired':
        this.emit({ kind: 'acquired', shard: event.shard, epoch: event.epoch, from: event.from });
        break;
      case 'lost':
        this.emit({ kind: 'released', shard: event.shard, reason: 'lost', detail: event.detail });
        break;
      case 'released':
        this.emit({ kind: 'released', shard: event.shard, reason: 'released', detail: 'given up by this node' });
        break;
      case 'tick':
        this.live = event.live;
        break;
      case 'error':
        for (const listener of this.errorListeners) listener(event.detail);
        break;
    }
  }

  private emit(event: OwnershipEvent): void {
    for (const listener of this.listeners) listener(event);
  }
}

/** The shard count is the cluster's, fixed: the first node records it, every later one must match it. */
async function checkShardCount(bucket: LeaseBucket, shards: number): Promise<void> {
  for (;;) {
    const recorded = await bucket.get<{ shards: number }>(CLUSTER_KEY);
    if (recorded !== undefined) {
      if (recorded.value.shards !== shards)
        throw new ShardCountMismatch(
          `SHARDS: the cluster has ${recorded.value.shards} shards (lease bucket), this node is configured with ${shards}`,
        );
      return;
    }
    try {
      await bucket.put(CLUSTER_KEY, { shards }, 0);
      return;
    } catch (err) {
      // Another node recorded it first: read it again.
      if (!(err instanceof RevisionMoved)) throw err;
    }
  }
}
