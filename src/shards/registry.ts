import type { Config } from '../config.js';
import type { ControlPlane } from '../control/controlPlane.js';
import { scanPlacement } from '../scans/placement.js';
import { ShardGenerations } from './generations.js';
import { LocalMailbox, type Mailbox } from './mailbox.js';
import { Shard } from './shard.js';
import { ShardWriter } from './writer.js';

/** How long a dropped shard's reader stays open for the requests reading it. */
const DROPPED_READER_GRACE_MS = 5_000;

/**
 * How a thread reaches the actor of shard `index`: its mailbox and its generation counters.
 * `onGone` is called if the actor stops while this thread holds the link (the shard left the node).
 */
export type ActorLink = (index: number, onGone: () => void) => Promise<{ mailbox: Mailbox; generations: ShardGenerations }>;

/** The actor runs on the calling thread (tools, in-process benchmarks); like the shard worker, this composes it. */
export function inThreadActors(dataDir: string, control: ControlPlane): ActorLink {
  return async (index) => {
    const generations = new ShardGenerations();
    const writer = await ShardWriter.open(dataDir, index, control, generations, { placement: scanPlacement });
    return { mailbox: new LocalMailbox(writer), generations };
  };
}

/**
 * Maps organizations to their shard (the mapping recorded in the control plane at org creation)
 * and opens each shard once on this thread (a reader connection plus the link to its actor);
 * concurrent first calls share the opening promise.
 */
export class ShardRegistry {
  private readonly shards = new Map<number, Shard>();
  private readonly opening = new Map<number, Promise<Shard>>();
  private readonly orgShard = new Map<number, number>();

  constructor(
    private readonly dataDir: string,
    private readonly control: ControlPlane,
    private readonly link: ActorLink = inThreadActors(dataDir, control),
    /** The memory map of this thread's reading connections (READ_MMAP_MB), in bytes. */
    private readonly readMmapBytes?: number,
  ) {}

  /** A thread's registry as trackd serves: its reading connections map READ_MMAP_MB of each shard file. */
  static fromConfig(config: Pick<Config, 'DATA_DIR' | 'READ_MMAP_MB'>, control: ControlPlane, link: ActorLink): ShardRegistry {
    return new ShardRegistry(config.DATA_DIR, control, link, config.READ_MMAP_MB * 1024 * 1024);
  }

  /** Opens shards 0..count-1 and every shard an existing org is recorded on (in cluster mode: those this node owns). */
  async openAll(count: number, isLocal: (index: number) => boolean = () => true): Promise<void> {
    await Promise.all([...shardIndexes(this.control, count)].filter(isLocal).map((i) => this.open(i)));
  }

  open(index: number): Promise<Shard> {
    const ready = this.shards.get(index);
    if (ready) return Promise.resolve(ready);
    let pending = this.opening.get(index);
    if (pending === undefined) {
      let opened: Shard | undefined;
      pending = this.link(index, () => opened !== undefined && this.drop(index, opened)).then(
        ({ mailbox, generations }) => {
          const shard = Shard.openReader(this.dataDir, index, mailbox, generations, this.readMmapBytes);
          opened = shard;
          this.shards.set(index, shard);
          this.opening.delete(index);
          return shard;
        },
        (err: unknown) => {
          // Not served here (cluster mode: another node owns it): the next request asks again.
          this.opening.delete(index);
          throw err;
        },
      );
      this.opening.set(index, pending);
    }
    return pending;
  }

  /** The shard index of an organization, or undefined when the organization does not exist. */
  shardIndexOf(orgId: number): number | undefined {
    let index = this.orgShard.get(orgId);
    if (index === undefined) {
      index = this.control.getOrg(orgId)?.shard;
      if (index !== undefined) this.orgShard.set(orgId, index);
    }
    return index;
  }

  /** The org's shard: synchronously when open, else a promise. Undefined when the org does not exist. */
  forOrg(orgId: number): Shard | Promise<Shard> | undefined {
    const index = this.shardIndexOf(orgId);
    if (index === undefined) return undefined;
    return this.shards.get(index) ?? this.open(index);
  }

  /**
   * Forgets shard `index` on this thread (its actor stopped: the shard left this node). Commands
   * already refuse (its mailbox is closed); the reader closes a little later, so that a request
   * reading it now finishes on the state it began with.
   */
  drop(index: number, which?: Shard): void {
    const shard = this.shards.get(index);
    if (shard === undefined || (which !== undefined && shard !== which)) return;
    this.shards.delete(index);
    setTimeout(() => void shard.close(), DROPPED_READER_GRACE_MS).unref();
  }

  all(): Shard[] {
    return [...this.shards.values()];
  }

  async closeAll(): Promise<void> {
    await Promise.all([...this.opening.values()]);
    await Promise.all(this.all().map((s) => s.close()));
    this.shards.clear();
  }
}

/** Shards 0..count-1 and every shard an existing org is recorded on. */
export function shardIndexes(control: ControlPlane, count: number): Set<number> {
  const indexes = new Set<number>();
  for (let i = 0; i < count; i++) indexes.add(i);
  for (const org of control.listOrgs()) indexes.add(org.shard);
  return indexes;
}
