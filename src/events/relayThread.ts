import { Worker } from 'node:worker_threads';
import { threadFile } from '../runtime/threadFile.js';
import type { RelaySettings } from './relay.js';
import type { FromRelayWorker, RelayWorkerData, ToRelayWorker } from './relayWorker.js';

/**
 * The shard thread's handle on its event relay, which runs on a thread of its own (relayWorker.ts):
 * the relay follows the shard's commits with events through the shard's generations in shared
 * memory (no message per commit), the relay's prune requests run as the shard's commands by `prune`.
 * The relay's guarantees are its own (relay.ts): it reads only committed rows and saves its
 * position only after JetStream acknowledged, whichever thread it runs on.
 */
export class RelayThread {
  private readonly worker: Worker;
  private readonly exited: Promise<void>;

  constructor(
    dataDir: string,
    index: number,
    settings: RelaySettings,
    generations: SharedArrayBuffer,
    prune: (before: number, throughPos: number) => Promise<unknown>,
  ) {
    const workerData: RelayWorkerData = { dataDir, index, settings, generations };
    this.worker = new Worker(threadFile('events/relayWorker.js'), { workerData, name: `relay-${index}` });
    this.exited = new Promise((resolve) => this.worker.once('exit', () => resolve()));
    this.worker.on('message', (message: FromRelayWorker) => {
      if (message.type === 'prune') {
        void prune(message.before, message.throughPos)
          .catch(() => undefined)
          .then(() => this.post({ type: 'pruned', id: message.id }));
      }
    });
    // An error of the relay's thread ends it; the shard goes on (events wait in the log for the next start).
    this.worker.on('error', () => undefined);
  }

  private post(message: ToRelayWorker): void {
    this.worker.postMessage(message);
  }

  /** Stops the relay (its publish in flight given up to 2 s, relay.ts) and waits for its thread to end. */
  async stop(): Promise<void> {
    this.post({ type: 'stop' });
    await this.exited;
  }
}
