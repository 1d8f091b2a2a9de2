/**
 * The thread of one shard actor: its mailboxes (one MessagePort per thread that talks to it) feed
 * one writer, one command at a time, in arrival order per port.
 */
import { parentPort, workerData, type MessagePort } from 'node:worker_threads';
import { ControlPlane } from '../control/controlPlane.js';
import { scanPlacement } from '../scans/placement.js';
import { reportIndexOf } from '../scans/reportIndex.js';
import './commandIndex.js';
import { ShardGenerations } from './generations.js';
import type { CommandMessage } from './mailbox.js';
import { jsonLinesSink, recordFile } from './records.js';
import { ShardWriter } from './writer.js';

export interface ShardWorkerData {
  dataDir: string;
  index: number;
  generations: SharedArrayBuffer;
  /** When set, the actor appends a record of each committed state change to a JSON-lines file in it. */
  recordDir?: string;
}

/** What the actor's report index holds after its build at start, and how long the build took. */
export interface ReportIndexFigures {
  positions: number;
  bytes: number;
  ms: number;
}

export type ToShardWorker = { type: 'connect'; port: MessagePort } | { type: 'close' };
export type FromShardWorker = { type: 'ready'; reportIndex: ReportIndexFigures } | { type: 'failed'; message: string } | { type: 'closed' };

const data = workerData as ShardWorkerData;
const parent = parentPort!;
const ports = new Set<MessagePort>();

try {
  const control = await ControlPlane.open(data.dataDir);
  const writer = await ShardWriter.open(data.dataDir, data.index, control, new ShardGenerations(data.generations), {
    placement: scanPlacement,
  });
  const records = data.recordDir === undefined ? undefined : jsonLinesSink(recordFile(data.recordDir, data.index));
  writer.recordTo(records?.write);
  // Built before the actor is ready, so that start-up (not the first report) pays for it.
  const building = performance.now();
  const report = reportIndexOf(writer).footprint();
  const reportIndex = { ...report, ms: Math.round(performance.now() - building) };
  parent.on('message', (message: ToShardWorker) => {
    if (message.type === 'connect') {
      const port = message.port;
      ports.add(port);
      port.on('message', (command: CommandMessage) => port.postMessage(writer.execute(command)));
      port.on('close', () => ports.delete(port));
    } else if (message.type === 'close') {
      for (const port of ports) port.close();
      writer.close();
      records?.close();
      control.close();
      parent.postMessage({ type: 'closed' } satisfies FromShardWorker);
      parent.close();
    }
  });
  parent.postMessage({ type: 'ready', reportIndex } satisfies FromShardWorker);
} catch (err) {
  parent.postMessage({ type: 'failed', message: (err as Error).message } satisfies FromShardWorker);
}
