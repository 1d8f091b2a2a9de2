import { performance } from 'node:perf_hooks';
import type { NatsConnection } from '@nats-io/transport-node';
import type { Logger } from '../log.js';
import { startScanIngest, type ScanIngest } from '../scans/ingest.js';
import type { ScanSource } from '../scans/source.js';
import { connectNats } from '../scans/streams.js';
import type { Services } from '../services.js';
import type { ShardActors } from '../shards/actors.js';
import type { JournalEvent } from '../shards/journaled.js';
import { ownerCommand } from '../shards/ownership.js';
import { ShardOwnership, type OwnershipEvent } from './ownership.js';
import { rendezvous } from './placement.js';
import type { OwnershipTable } from './ownershipTable.js';
import { ShardStandbys } from './standby.js';

export interface ClusterNodeSettings {
  nodeId: string;
  shards: number;
  leaseMs: number;
  replicas: number;
  natsUrl: string;
  /** Standbys (CLUSTER_STANDBYS): this node follows the journal of each shard it is the standby of, into its own file. */
  standbys?: { dataDir: string; pollMs: number };
  /**
   * Rebalancing (CLUSTER_REBALANCE_SECONDS; 0 or absent: off, leases stay where they are): a live
   * node that has been live this long and wins a shard served here, by rendezvous among the live
   * nodes, is handed it; one shard per period from this node.
   */
  rebalanceMs?: number;
}

/**
 * A node of a trackd cluster (CLUSTER_NODE_ID; docs/cluster.md, "Cluster mode"): it runs a shard's
 * actor and scan consumers only while it holds the shard's lease.
 *
 * - **Acquired** (lease revision = epoch): the actor starts (restoring the latest snapshot when the
 *   node has no file for the shard, then applying the journal's tail), appends the `shard.owner`
 *   entry `{node, epoch}` (which fences the previous owner: its next append expects an entry that
 *   is no longer the last), then the shard is served here: HTTP threads may link to it and its own
 *   durable consumer per input stream (`trackd-scans-s<n>`) applies its messages.
 * - **Lost** (a renewal refused: another node took it) or **fenced** (an append refused): the
 *   consumers stop (a batch in hand is neither committed, since the journal refuses it, nor acked),
 *   no thread may link to the shard, the actor stops (every thread's link to it closes, requests
 *   answer 503), and a fenced shard's lease is released so that its owner-to-be need not wait.
 *
 * Transitions of one shard run one after the other; different shards move independently.
 */
export class ClusterNode {
  private readonly transitions = new Map<number, Promise<void>>();
  private readonly ingests = new Map<number, ScanIngest>();
  private readonly consumersReady = new Map<number, boolean>();
  private readonly serving = new Set<number>();
  private stopping = false;
  private readonly standbys: ShardStandbys | undefined;
  private standbyTimer: NodeJS.Timeout | undefined;
  private standbyUpdate: Promise<void> = Promise.resolve();
  private rebalanceTimer: NodeJS.Timeout | undefined;
  /** Since when each live node has been live without a break, as this node saw it (rebalancing). */
  private readonly liveSince = new Map<string, number>();
  private lastHandOver = 0;

  private constructor(
    private readonly settings: ClusterNodeSettings,
    private readonly nc: NatsConnection,
    readonly ownership: ShardOwnership,
    private readonly services: Services,
    private readonly actors: ShardActors,
    private readonly sources: ScanSource[],
    /** Every thread's view of the shards served here (forwarding reads it): set once served, cleared before a shard is let go. */
    private readonly table: OwnershipTable,
  ) {
    const standbys = settings.standbys;
    if (standbys !== undefined)
      this.standbys = new ShardStandbys(
        { natsUrl: settings.natsUrl, replicas: settings.replicas, shards: settings.shards, ...standbys },
        ownership,
        services.logger,
      );
  }

  static async start(
    settings: ClusterNodeSettings,
    services: Services,
    actors: ShardActors,
    sources: ScanSource[],
    table: OwnershipTable,
  ): Promise<ClusterNode> {
    actors.admitOnly();
    const nc = await connectNats(settings.natsUrl, `trackd-node-${settings.nodeId}`, { reconnect: true });
    try {
      const ownership = await ShardOwnership.start(nc, settings);
      const node = new ClusterNode(settings, nc, ownership, services, actors, sources, table);
      node.updateReadiness();
      ownership.on((event) => node.onOwnership(event));
      ownership.reportProgress((shard) => node.ingests.get(shard)?.settledThrough());
      ownership.onError((detail) => services.logger.warn({ detail }, 'cluster lease bucket operation failed'));
      node.collectMetrics();
      node.followStandbys();
      node.rebalanceEvery();
      services.logger.info({ node: settings.nodeId, shards: settings.shards, lease_ms: settings.leaseMs }, 'cluster node started');
      return node;
    } catch (err) {
      await nc.close();
      throw err;
    }
  }

  /** The shards served here now (actor started, owner entry appended, consumers running), ascending. */
  servingShards(): number[] {
    return [...this.serving].sort((a, b) => a - b);
  }

  /** A journal event of one of this node's shard actors: a fenced shard is given up. */
  onJournalEvent(shard: number, event: JournalEvent): void {
    if (event.kind === 'fenced') this.queue(shard, () => this.giveUp(shard, `fenced: ${event.detail}`, true));
  }

  private get logger(): Logger {
    return this.services.logger;
  }

  private onOwnership(event: OwnershipEvent): void {
    if (this.stopping) return;
    if (event.kind === 'acquired') this.queue(event.shard, () => this.takeUp(event.shard, event.epoch, event.from));
    else if (event.reason === 'lost') this.queue(event.shard, () => this.giveUp(event.shard, event.detail, false));
  }

  private queue(shard: number, step: () => Promise<void>): void {
    const next = (this.transitions.get(shard) ?? Promise.resolve())
      .then(step)
      .catch((err: unknown) => this.logger.error({ shard, err: (err as Error).message }, 'cluster shard transition failed'));
    this.transitions.set(shard, next);
  }

  private async takeUp(shard: number, epoch: number, from: string): Promise<void> {
    if (this.stopping || !this.ownership.holds(shard)) return;
    const started = performance.now();
    this.logger.info({ shard, epoch, from: from || null }, 'cluster shard lease acquired: starting its actor');
    // A standby's file is the one the actor opens: its follower lets go of it first.
    await this.standbys?.stop(shard);
    this.actors.admit(shard);
    try {
      const opened = await this.services.shards.open(shard);
      await opened.send(ownerCommand, { node: this.settings.nodeId, epoch });
    } catch (err) {
      this.logger.error({ shard, epoch, err: (err as Error).message }, 'cluster shard could not start here; its lease is released');
      await this.stopShard(shard);
      await this.ownership.release(shard);
      return;
    }
    if (this.stopping || !this.ownership.holds(shard)) {
      // Lost while starting: the 'lost' step queued behind this one stops it again.
      return;
    }
    this.serving.add(shard);
    this.table.set(shard, true);
    this.consumersReady.set(shard, false);
    this.updateReadiness();
    const ingest = await startScanIngest(this.services, this.nc, this.sources, {
      shard: { index: shard, count: this.settings.shards, owned: () => this.ownership.confirm(shard) },
      onReadiness: (ready) => {
        if (!this.ingests.has(shard) && !ready) return;
        this.consumersReady.set(shard, ready);
        this.updateReadiness();
      },
    });
    this.ingests.set(shard, ingest);
    this.logger.info(
      { shard, epoch, from: from || null, ms: Math.round(performance.now() - started) },
      'cluster shard acquired: restored, owner entry appended, consuming',
    );
  }

  private async giveUp(shard: number, why: string, release: boolean): Promise<void> {
    const served = this.serving.has(shard);
    await this.stopShard(shard);
    if (release) await this.ownership.release(shard);
    if (served || release) this.logger.warn({ shard, why }, 'cluster shard given up: actor and consumers stopped');
  }

  /** Stops the shard's consumers, then its actor (which closes every thread's link to it). */
  private async stopShard(shard: number): Promise<void> {
    this.table.set(shard, false);
    this.serving.delete(shard);
    const ingest = this.ingests.get(shard);
    this.ingests.delete(shard);
    this.consumersReady.delete(shard);
    await ingest?.stop().catch((err) => this.logger.warn({ shard, err: (err as Error).message }, 'a shard consumer did not stop cleanly'));
    await this.actors.close(shard);
    this.updateReadiness();
  }

  /** Every lease period / 3, hands a shard to its rendezvous winner when rebalancing is on (rebalance). */
  private rebalanceEvery(): void {
    const period = this.settings.rebalanceMs ?? 0;
    if (period <= 0) return;
    const every = Math.max(50, Math.floor(this.settings.leaseMs / 3));
    const tick = () => {
      this.rebalance(Date.now(), period);
      if (!this.stopping) this.rebalanceTimer = setTimeout(tick, every);
    };
    this.rebalanceTimer = setTimeout(tick, every);
  }

  /**
   * Leases are sticky, so a node that joins (or comes back after a failover) would otherwise serve
   * nothing until another node fails. Once it has been live for a whole period, each node hands it
   * the shards it wins among the live nodes, one per period: the shard's consumers and actor stop,
   * then its lease is released naming this node, so the winner claims it at its next read (it is
   * also the shard's standby, so it starts from a file that is already caught up). A node seen to
   * drop out starts its period again, which keeps a flapping node from pulling shards to and fro.
   */
  private rebalance(now: number, period: number): void {
    if (this.stopping) return;
    const live = this.ownership.liveNodes();
    for (const node of this.liveSince.keys()) if (!live.includes(node)) this.liveSince.delete(node);
    for (const node of live) if (!this.liveSince.has(node)) this.liveSince.set(node, now);
    if (!live.includes(this.settings.nodeId) || now - this.lastHandOver < period) return;
    for (const shard of this.servingShards()) {
      const winner = rendezvous(shard, live);
      if (winner === undefined || winner === this.settings.nodeId || now - this.liveSince.get(winner)! < period) continue;
      this.lastHandOver = now;
      this.logger.info({ shard, to: winner }, 'cluster shard handed over: its rendezvous winner among the live nodes has joined');
      this.queue(shard, () => this.giveUp(shard, `handed over to ${winner}`, true));
      return;
    }
  }

  /** Every lease period / 3, the standbys follow what the last lease reads say. */
  private followStandbys(): void {
    if (this.standbys === undefined) return;
    const every = Math.max(50, Math.floor(this.settings.leaseMs / 3));
    const tick = () => {
      this.standbyUpdate = this.standbyUpdate
        .then(() => (this.stopping ? undefined : this.standbys!.update()))
        .catch((err: unknown) => this.logger.warn({ err: (err as Error).message }, 'cluster standby update failed'));
      if (!this.stopping) this.standbyTimer = setTimeout(tick, every);
    };
    this.standbyTimer = setTimeout(tick, every);
  }

  private updateReadiness(): void {
    this.services.readiness.consumer = [...this.consumersReady.values()].every(Boolean);
  }

  private collectMetrics(): void {
    const { metrics } = this.services;
    metrics.onCollect(() => {
      for (let shard = 0; shard < this.settings.shards; shard++)
        metrics.set(
          'trackd_cluster_shard_served',
          'Whether this node serves the shard now (cluster mode: its lease held, actor and consumers running)',
          { shard: String(shard), node: this.settings.nodeId },
          this.serving.has(shard) ? 1 : 0,
        );
      const following = new Set(this.standbys?.following() ?? []);
      for (let shard = 0; shard < this.settings.shards; shard++)
        metrics.set(
          'trackd_cluster_shard_standby',
          "Whether this node is the shard's standby now (cluster mode: it follows the shard's journal into its own file)",
          { shard: String(shard), node: this.settings.nodeId },
          following.has(shard) ? 1 : 0,
        );
    });
  }

  /**
   * A clean stop: no more claims, every served shard's consumers and actor stopped, then its lease
   * released so that another node takes it at its next tick instead of after a lease period.
   */
  async stop(): Promise<void> {
    this.stopping = true;
    clearTimeout(this.standbyTimer);
    clearTimeout(this.rebalanceTimer);
    await this.standbyUpdate;
    await this.standbys?.stopAll();
    await this.ownership.stop();
    await Promise.all(this.transitions.values());
    const held = this.ownership.held();
    await Promise.all(held.map((shard) => this.stopShard(shard)));
    for (const shard of held) await this.ownership.release(shard);
    await this.nc.drain().catch(() => this.nc.close());
  }
}
