import fs from 'node:fs';
import path from 'node:path';
import type { Logger } from '../log.js';
import { catchUp } from '../shards/catchUp.js';
import { ShardJournal, type JournalSettings } from '../shards/journal.js';
import { reconcile, type JournalEvent } from '../shards/journaled.js';
import { openReplayWriter } from '../shards/replay.js';
import { type ShardWriter, shardFile } from '../shards/writer.js';
import { rendezvous } from './placement.js';

/** What a standby needs to know of shard ownership (ShardOwnership). */
export interface OwnershipView {
  readonly nodeId: string;
  holds(shard: number): boolean;
  ownerOf(shard: number): string | undefined;
  liveNodes(): string[];
}

/**
 * The shard's standby: the node that would win its lease if its owner were lost, which is the
 * rendezvous winner among the live nodes other than the owner (the claim runs the same rendezvous
 * over the live nodes once the owner's heartbeat has stopped). Undefined when nobody holds it.
 */
export function standbyOf(shard: number, ownership: OwnershipView): string | undefined {
  const owner = ownership.ownerOf(shard);
  if (owner === undefined) return undefined;
  return rendezvous(
    shard,
    ownership.liveNodes().filter((node) => node !== owner),
  );
}

/**
 * Standbys (docs/cluster.md, step 4): this node keeps its own file of every shard it is the standby
 * of at the journal's end (the latest snapshot restored when it has no file, then each new entry
 * applied, polled every `pollMs`), so that taking the shard over starts from a file one poll behind
 * instead of a snapshot download and the whole tail. The file is the one the shard's actor opens
 * here: a follower is stopped, its writer closed, before this node's actor starts on it.
 */
export class ShardStandbys {
  private readonly followers = new Map<number, Follower>();

  constructor(
    private readonly settings: JournalSettings & { dataDir: string; shards: number; pollMs: number },
    private readonly ownership: OwnershipView,
    private readonly logger: Logger,
  ) {}

  /** The shards followed here now, ascending. */
  following(): number[] {
    return [...this.followers.keys()].sort((a, b) => a - b);
  }

  /** The position a followed shard's file is at (0 before its first catch-up). */
  position(shard: number): number | undefined {
    return this.followers.get(shard)?.position;
  }

  /** Starts following the shards this node is the standby of now, and stops the others. */
  async update(): Promise<void> {
    const me = this.ownership.nodeId;
    for (let shard = 0; shard < this.settings.shards; shard++) {
      const wanted = !this.ownership.holds(shard) && standbyOf(shard, this.ownership) === me;
      if (wanted && !this.followers.has(shard)) {
        this.followers.set(shard, new Follower(this.settings, shard, this.logger));
        this.logger.info({ shard, owner: this.ownership.ownerOf(shard) }, 'cluster standby: following the shard');
      } else if (!wanted && this.followers.has(shard)) await this.stop(shard);
    }
  }

  /** Stops following `shard` (this node takes it over, or is no longer its standby); its file is closed when this resolves. */
  async stop(shard: number): Promise<void> {
    const follower = this.followers.get(shard);
    if (follower === undefined) return;
    this.followers.delete(shard);
    await follower.stop();
  }

  async stopAll(): Promise<void> {
    await Promise.all([...this.followers.keys()].map((shard) => this.stop(shard)));
  }
}

class Follower {
  private writer: ShardWriter | undefined;
  private journal: ShardJournal | undefined;
  private stopping = false;
  /** Aborts a catch-up in progress (a snapshot download, a replay) when the follower stops. */
  private readonly abort = new AbortController();
  private wake: (() => void) | undefined;
  private readonly loop: Promise<void>;
  position = 0;

  constructor(
    private readonly settings: JournalSettings & { dataDir: string; pollMs: number },
    private readonly shard: number,
    private readonly logger: Logger,
  ) {
    this.loop = this.run();
  }

  private async run(): Promise<void> {
    const file = path.resolve(shardFile(this.settings.dataDir, this.shard));
    fs.mkdirSync(path.dirname(file), { recursive: true });
    const report = (event: JournalEvent) => {
      if (event.kind === 'restored' || event.kind === 'set aside' || event.kind === 'rebased')
        this.logger.info({ shard: this.shard, ...event }, `cluster standby: shard ${event.kind}`);
    };
    while (!this.stopping) {
      try {
        this.journal ??= await ShardJournal.open(this.settings, this.shard);
        if (this.writer === undefined) {
          const journal = this.journal;
          const started = await catchUp(this.settings, journal, file, () => openReplayWriter(file, this.shard), report, this.abort.signal);
          this.writer = started.writer;
          this.position = started.position;
        } else this.position = (await reconcile(this.writer, this.journal, report, this.abort.signal)).position;
      } catch (err) {
        if (this.stopping) break;
        this.logger.warn({ shard: this.shard, err: (err as Error).message }, 'cluster standby: catching up failed; retrying');
        this.closeWriter();
      }
      if (!this.stopping)
        await new Promise<void>((resolve) => {
          this.wake = resolve;
          setTimeout(resolve, this.settings.pollMs);
        });
    }
    this.closeWriter();
    await this.journal?.close().catch(() => undefined);
  }

  private closeWriter(): void {
    try {
      this.writer?.close();
    } catch {
      // A writer that cannot close cleanly is dropped; the next catch-up opens the file again.
    }
    this.writer = undefined;
  }

  async stop(): Promise<void> {
    this.stopping = true;
    this.abort.abort();
    this.wake?.();
    await this.loop;
  }
}
