/**
 * The thread of one shard actor: its mailboxes (one MessagePort per thread that talks to it) feed
 * one writer, one command at a time, in arrival order per port; with a journal, in rounds that
 * commit once their journal entry is stored (journaled.ts).
 */
import { parentPort, workerData, type MessagePort } from 'node:worker_threads';
import { ABANDON_INTERRUPTED, hasInterruptedJobs } from '../bulk/jobs.js';
import { ControlPlane } from '../control/controlPlane.js';
import { scanPlacement } from '../scans/placement.js';
import { reportIndexOf } from '../scans/reportIndex.js';
import './commandIndex.js';
import { ShardGenerations } from './generations.js';
import { ShardJournal, type JournalSettings } from './journal.js';
import { JournaledActor, reconcile, type JournalEvent } from './journaled.js';
import type { CommandMessage } from './mailbox.js';
import { jsonLinesSink, recordFile } from './records.js';
import { ShardWriter } from './writer.js';

export interface ShardWorkerData {
  dataDir: string;
  index: number;
  generations: SharedArrayBuffer;
  /** When set, the actor appends a record of each committed state change to a JSON-lines file in it. */
  recordDir?: string;
  /** When set, every commit is journaled first (docs/cluster.md). */
  journal?: JournalSettings;
}

/** What the actor's report index holds after its build at start, and how long the build took. */
export interface ReportIndexFigures {
  positions: number;
  bytes: number;
  ms: number;
}

export type ToShardWorker = { type: 'connect'; port: MessagePort } | { type: 'close' };
export type FromShardWorker =
  | { type: 'ready'; reportIndex: ReportIndexFigures }
  | { type: 'failed'; message: string }
  | { type: 'closed' }
  | { type: 'journal'; event: JournalEvent };

const data = workerData as ShardWorkerData;
const parent = parentPort!;
const ports = new Set<MessagePort>();
/** Tests only (faults): the process kills itself once it has journaled this command, before the commit. */
const killAfterAppendOf = process.env.TRACKD_TEST_KILL_AFTER_JOURNALING || undefined;

try {
  const control = await ControlPlane.open(data.dataDir);
  const generations = new ShardGenerations(data.generations);
  const records = data.recordDir === undefined ? undefined : jsonLinesSink(recordFile(data.recordDir, data.index));
  const open = async () => {
    const writer = await ShardWriter.open(data.dataDir, data.index, control, generations, { placement: scanPlacement });
    writer.recordTo(records?.write);
    return writer;
  };
  const writer = await open();
  const report = (event: JournalEvent) => parent.postMessage({ type: 'journal', event } satisfies FromShardWorker);
  let journal: ShardJournal | undefined;
  let actor: JournaledActor | undefined;
  if (data.journal !== undefined) {
    journal = await ShardJournal.open(data.journal, data.index);
    const { position, replayed } = await reconcile(writer, journal, report);
    report({ kind: 'reconciled', position, replayed });
    actor = new JournaledActor(writer, position, journal, open, report, killAfterAppendOf);
  }
  // Import jobs a previous process left running are failed, as a recorded command, before any new one can begin.
  if (hasInterruptedJobs(writer)) {
    const abandon: CommandMessage = { id: 0, name: ABANDON_INTERRUPTED, args: {}, now: Date.now() };
    if (actor === undefined) writer.execute(abandon);
    else await new Promise<void>((resolve) => actor.submit(abandon, () => resolve()));
  }
  // Built before the actor is ready, so that start-up (not the first report) pays for it.
  const building = performance.now();
  const reportIndex = { ...reportIndexOf(writer).footprint(), ms: Math.round(performance.now() - building) };
  parent.on('message', async (message: ToShardWorker) => {
    if (message.type === 'connect') {
      const port = message.port;
      ports.add(port);
      if (actor === undefined) port.on('message', (command: CommandMessage) => port.postMessage(writer.execute(command)));
      else port.on('message', (command: CommandMessage) => actor.submit(command, (answer) => port.postMessage(answer)));
      port.on('close', () => ports.delete(port));
    } else if (message.type === 'close') {
      for (const port of ports) port.close();
      if (actor === undefined) writer.close();
      else {
        await actor.idle();
        actor.current()?.close();
        await journal?.close();
      }
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
