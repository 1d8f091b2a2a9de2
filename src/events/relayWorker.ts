/**
 * The thread of one shard's event relay (relay.ts), started by the shard's thread (relayThread.ts):
 * the relay reads the log on a read-only connection and keeps its position in a file of its own,
 * so nothing of it needs the writer; on a thread of its own its reads, envelopes and publishes no
 * longer take the shard thread's time (about 2.2 s of 24.7 s busy per 100,000 imported rows,
 * bench/results/import-profile-100k.json). Prunes are still the shard's commands: asked for here,
 * run there.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { EventRelay, type RelaySettings } from './relay.js';
import { nameThread, runAsBackgroundThread } from '../runtime/threadPriority.js';
import { tracePauses } from '../runtime/pauseTrace.js';
import { ShardGenerations } from '../shards/generations.js';

export interface RelayWorkerData {
  dataDir: string;
  index: number;
  settings: RelaySettings;
  /** The shard's ShardGenerations: its counter of commits that appended events is what the relay follows. */
  generations: SharedArrayBuffer;
}

/** Shard thread -> relay thread. */
export type ToRelayWorker = { type: 'stop' } | { type: 'pruned'; id: number };

/**
 * After a commit with events, how long the relay lets further commits join the batch it publishes:
 * under field ingest the shard commits every few milliseconds, a dozen events each, and each batch
 * has a cost of its own (the query, the write, the round trip of acks, the position saved).
 */
const GATHER_MS = 20;
/** With no commit noticed, the relay looks at the log anyway this often (a wake that could be missed costs at most this). */
const FOLLOW_TIMEOUT_MS = 1_000;

/** Relay thread -> shard thread. */
export type FromRelayWorker = { type: 'prune'; id: number; before: number; throughPos: number } | { type: 'stopped' };

const data = workerData as RelayWorkerData;
tracePauses(`relay-${data.index}`);
nameThread(`relay-${data.index}`);
runAsBackgroundThread();
const parent = parentPort!;
const pruning = new Map<number, () => void>();
let pruneIds = 0;
let relay: EventRelay | undefined;
let stopping = false;

const prune = (before: number, throughPos: number) =>
  new Promise<void>((resolve) => {
    const id = ++pruneIds;
    pruning.set(id, resolve);
    parent.postMessage({ type: 'prune', id, before, throughPos } satisfies FromRelayWorker);
  });

/** The broker may still be starting: retried until it answers or the shard stops. */
async function start(): Promise<void> {
  for (let delay = 100; relay === undefined && !stopping; delay = Math.min(delay * 2, 2_000)) {
    try {
      relay = await EventRelay.start(data.dataDir, data.index, data.settings, prune);
    } catch {
      await new Promise((r) => setTimeout(r, delay));
    }
  }
}

/** Publishes after each commit that appended events, gathered GATHER_MS, until the relay stops. */
async function follow(): Promise<void> {
  await starting;
  const generations = new ShardGenerations(data.generations);
  while (relay !== undefined && !stopping) {
    const seen = generations.eventsGeneration();
    relay.wake();
    await generations.eventsAfter(seen, FOLLOW_TIMEOUT_MS);
    if (generations.eventsGeneration() !== seen) await new Promise((resolve) => setTimeout(resolve, GATHER_MS));
  }
}

const starting = start();
void follow();

parent.on('message', async (message: ToRelayWorker) => {
  if (message.type === 'pruned') {
    pruning.get(message.id)?.();
    pruning.delete(message.id);
  } else if (message.type === 'stop') {
    stopping = true;
    await starting;
    await relay?.stop();
    for (const resolve of pruning.values()) resolve();
    parent.postMessage({ type: 'stopped' } satisfies FromRelayWorker);
    parent.close();
  }
});
