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

export interface RelayWorkerData {
  dataDir: string;
  index: number;
  settings: RelaySettings;
}

/** Shard thread -> relay thread. */
export type ToRelayWorker = { type: 'wake' } | { type: 'stop' } | { type: 'pruned'; id: number };
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

const starting = start();

parent.on('message', async (message: ToRelayWorker) => {
  if (message.type === 'wake') relay?.wake();
  else if (message.type === 'pruned') {
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
