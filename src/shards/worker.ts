/**
 * The thread of one shard actor: its mailboxes (one MessagePort per thread that talks to it) feed
 * one writer, one command at a time, in arrival order per port; with a journal, in rounds that
 * commit once their journal entry is stored (journaled.ts).
 */
import fs from 'node:fs';
import { parentPort, workerData, type MessagePort } from 'node:worker_threads';
import { ABANDON_INTERRUPTED, hasInterruptedJobs } from '../bulk/jobs.js';
import { ControlPlane } from '../control/controlPlane.js';
import { ControlKv } from '../control/controlKv.js';
import { KvIdBlocks } from '../control/kvIdBlocks.js';
import { connectNats } from '../scans/streams.js';
import type { IdSource } from './writer.js';
import { scanPlacement } from '../scans/placement.js';
import { reportIndexOf } from '../scans/reportIndex.js';
import { rereadLogOf } from '../scans/rereadLog.js';
import { arrived } from './commands.js';
import './commandIndex.js';
import { ShardGenerations } from './generations.js';
import { ShardJournal, type JournalSettings } from './journal.js';
import { catchUp } from './catchUp.js';
import { JournaledActor, type JournalEvent } from './journaled.js';
import type { CommandMessage } from './mailbox.js';
import { jsonLinesSink, recordFile } from './records.js';
import { pruneCommand } from '../events/commands.js';
import type { RelaySettings } from '../events/relay.js';
import { RelayThread } from '../events/relayThread.js';
import { recordProgress } from '../webhooks/commands.js';
import { WebhookDispatcher, type WebhookSettings } from '../webhooks/dispatcher.js';
import type { CommandAnswer } from './mailbox.js';
import { RoundActor } from './rounds.js';
import { SnapshotSchedule, type SnapshotPolicy } from './snapshotSchedule.js';
import { ShardWriter, shardFile } from './writer.js';
import { traceLine, tracePauses, pauseTraceOn } from '../runtime/pauseTrace.js';
import { nameThread } from '../runtime/threadPriority.js';

export interface ShardWorkerData {
  dataDir: string;
  index: number;
  generations: SharedArrayBuffer;
  /** When set, the actor appends a record of each committed state change to a JSON-lines file in it. */
  recordDir?: string;
  /** When set, every commit is journaled first (docs/cluster.md). */
  journal?: JournalSettings;
  /** With a journal: when the shard takes snapshots (and purges what they cover). */
  snapshots?: SnapshotPolicy;
  /** Cluster mode: ids come in blocks from the cluster's control bucket instead of the local file. */
  clusterIds?: { natsUrl: string; replicas: number };
  /** SHARD_CACHE_MB (default DEFAULT_WRITER_CACHE_MB). */
  cacheMb?: number;
}

/** What the actor's report index holds after its build at start, and how long the build took. */
export interface ReportIndexFigures {
  positions: number;
  bytes: number;
  /** The build, with the re-read log read back before it. */
  ms: number;
  /** Assets whose latest re-read the log held at start, not yet folded (or folded but not yet deleted). */
  rereads: number;
}

export type ToShardWorker = { type: 'connect'; port: MessagePort } | { type: 'relay'; settings: RelaySettings } | { type: 'close' };
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
/** Tests only (faults): once this file exists, the process kills itself halfway through uploading the next snapshot. */
const killDuringSnapshot = process.env.TRACKD_TEST_KILL_DURING_SNAPSHOT || undefined;
/** Diagnostics: at close, the actor appends the sizes of the transactions it ran to this file (rounds.ts, `roundSizes`). */
const roundSizesFile = process.env.TRACKD_ROUND_SIZES || undefined;

tracePauses(`shard-${data.index}`);
nameThread(`shard-${data.index}`);
try {
  const control = await ControlPlane.open(data.dataDir);
  let ids: IdSource = control;
  if (data.clusterIds !== undefined) {
    const nc = await connectNats(data.clusterIds.natsUrl, `trackd-ids-shard-${data.index}`, { reconnect: true });
    ids = await KvIdBlocks.open(await ControlKv.open(nc, data.clusterIds.replicas), control);
  }
  const generations = new ShardGenerations(data.generations);
  const records = data.recordDir === undefined ? undefined : jsonLinesSink(recordFile(data.recordDir, data.index));
  const open = async () => {
    const writer = await ShardWriter.open(
      data.dataDir,
      data.index,
      ids,
      generations,
      { placement: scanPlacement },
      undefined,
      data.cacheMb,
    );
    writer.recordTo(records?.write);
    return writer;
  };
  const report = (event: JournalEvent) => parent.postMessage({ type: 'journal', event } satisfies FromShardWorker);
  let writer: ShardWriter;
  let journal: ShardJournal | undefined;
  let actor: JournaledActor | undefined;
  let schedule: SnapshotSchedule | undefined;
  if (data.journal === undefined) writer = await open();
  else {
    journal = await ShardJournal.open(data.journal, data.index);
    const file = shardFile(data.dataDir, data.index);
    const started = await catchUp(data.journal, journal, file, open, report);
    writer = started.writer;
    if (data.snapshots !== undefined) {
      const entries = Math.max(0, (await journal.count()) - 1);
      schedule = new SnapshotSchedule(
        data.snapshots,
        { file, settings: data.journal, index: data.index },
        entries,
        report,
        killDuringSnapshot,
      );
    }
    actor = new JournaledActor(writer, started.position, journal, open, report, (seqs) => schedule?.appended(seqs), killAfterAppendOf);
  }
  // Import jobs a previous process left running are failed, as a recorded command, before any new one can begin.
  if (hasInterruptedJobs(writer)) {
    const abandon: CommandMessage = { id: 0, name: ABANDON_INTERRUPTED, args: {}, now: Date.now() };
    if (actor === undefined) writer.execute(abandon);
    else await new Promise<void>((resolve) => actor.submit(abandon, () => resolve()));
  }
  // Built before the actor is ready, so that start-up (not the first report) pays for it.
  const building = performance.now();
  const reportIndex = {
    ...reportIndexOf(writer).footprint(),
    ms: Math.round(performance.now() - building),
    rereads: rereadLogOf(writer).size,
  };
  // Without a journal, the commands that arrive together commit together (rounds.ts).
  const rounds = actor === undefined ? new RoundActor(writer) : undefined;
  let relay: RelayThread | undefined;
  let dispatcher: WebhookDispatcher | undefined;
  let dispatcherStarting: Promise<void> | undefined;
  /**
   * The answers for each port and the wakes of the commands answered in one turn (a round's, or a
   * journal entry's), sent once the turn is over: one postMessage per port (an array when several)
   * and one relay wake per turn instead of one of each per command, which cost the shard thread 80
   * us a write under create-patch (README, "Single node since the cluster work").
   */
  const outbox = new Map<MessagePort, CommandAnswer[]>();
  let flushQueued = false;
  let webhooksChanged = false;
  const flush = () => {
    flushQueued = false;
    for (const [port, answers] of outbox) port.postMessage(answers.length === 1 ? answers[0] : answers);
    outbox.clear();
    if (webhooksChanged) dispatcher?.reload();
    else dispatcher?.wake();
    webhooksChanged = false;
  };
  const answerOn = (port: MessagePort) => (answer: CommandAnswer) => {
    const answers = outbox.get(port);
    if (answers === undefined) outbox.set(port, [answer]);
    else answers.push(answer);
  };
  /** Runs a command on the shard's writer (through the journal when there is one); the relay publishes what it committed, the webhook dispatcher delivers it. */
  const run = (command: CommandMessage, reply: (answer: CommandAnswer) => void) => {
    const answered = (answer: CommandAnswer) => {
      reply(answer);
      if (command.name.startsWith('webhooks.') && command.name !== recordProgress.name) webhooksChanged = true;
      if (!flushQueued) {
        flushQueued = true;
        // After the synchronous turn that answers (a round runs to its end in one): every answer of it is in.
        queueMicrotask(flush);
      }
    };
    if (rounds !== undefined) rounds.submit(command, answered);
    else actor!.submit(command, answered);
  };
  let localIds = 0;
  const prune = (before: number, throughPos: number) =>
    new Promise<void>((resolve) =>
      run({ id: --localIds, name: pruneCommand.name, args: { before, throughPos }, now: Date.now() }, () => resolve()),
    );
  // The relay runs on a thread of its own (it retries its start until the broker answers).
  const startRelay = (settings: RelaySettings) => new RelayThread(data.dataDir, data.index, settings, data.generations, prune);
  const startDispatcher = async (settings: WebhookSettings) => {
    const submit = (items: unknown) =>
      new Promise<void>((resolve) => run({ id: --localIds, name: recordProgress.name, args: { items }, now: Date.now() }, () => resolve()));
    dispatcher = await WebhookDispatcher.start(data.dataDir, data.index, settings, submit);
  };
  let closing = false;
  parent.on('message', async (message: ToShardWorker) => {
    if (message.type === 'connect') {
      const port = message.port;
      ports.add(port);
      const answer = answerOn(port);
      port.on('message', (command: CommandMessage) => {
        if (pauseTraceOn) traceLine('arrive', { name: command.name, id: command.id });
        run(arrived(command), answer);
      });
      port.on('close', () => ports.delete(port));
    } else if (message.type === 'relay') {
      if (!closing) relay ??= startRelay(message.settings);
      if (message.settings.webhooks !== undefined) dispatcherStarting ??= startDispatcher(message.settings.webhooks);
    } else if (message.type === 'close') {
      closing = true;
      await relay?.stop();
      await dispatcherStarting?.catch(() => undefined);
      await dispatcher?.stop();
      for (const port of ports) port.close();
      if (rounds !== undefined) {
        rounds.drain();
        rounds.current().close();
        // Diagnostics (bench runs): the sizes of the transactions the actor ran, one JSON line per shard.
        if (roundSizesFile !== undefined)
          fs.appendFileSync(roundSizesFile, `${JSON.stringify({ shard: data.index, pid: process.pid, ...rounds.roundSizes() })}\n`);
      } else if (actor !== undefined) {
        await schedule?.close();
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
