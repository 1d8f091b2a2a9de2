/**
 * What the shard journal costs the shard actor (docs/cluster.md), measured in one process against
 * the same actor without it, in alternating blocks so that a shared machine's drift falls on both:
 *
 *   node dist/bench/probes/journalCost.js [--blocks 6] [--commands 2000] [--inflight 64]
 *
 * - master data: asset creates (with a tag) and patches, `inflight` commands outstanding at a time
 *   (the 64 connections of create-patch), through ShardWriter.execute (SHARD_JOURNAL=off: one
 *   transaction per command) or JournaledActor.submit (on: rounds, one entry each);
 * - scan batches one at a time (a consumer lane) of 1, 300 and 10,000 one-read messages, journaled
 *   as references.
 * Both modes drive one shard file and writer (the journal does not follow the commands of mode off:
 * this is a cost probe, not a journal). Prints one JSON document: commands/s and batch times per
 * mode, medians over the blocks, and on/off.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { ControlPlane } from '../../src/control/controlPlane.js';
import { startNatsServer } from '../../src/nats/embedded.js';
import type { SourcedScan } from '../../src/scans/canonical.js';
import { scanPlacement } from '../../src/scans/placement.js';
import '../../src/shards/commandIndex.js';
import { ShardGenerations } from '../../src/shards/generations.js';
import { ShardJournal } from '../../src/shards/journal.js';
import { JournaledActor, reconcile } from '../../src/shards/journaled.js';
import type { CommandAnswer, CommandMessage } from '../../src/shards/mailbox.js';
import { ShardWriter } from '../../src/shards/writer.js';

const { values } = parseArgs({ options: { blocks: { type: 'string' }, commands: { type: 'string' }, inflight: { type: 'string' } } });
const BLOCKS = Number(values.blocks ?? 6);
const COMMANDS = Number(values.commands ?? 2000);
const INFLIGHT = Number(values.inflight ?? 64);
const BATCHES: [size: number, count: number][] = [
  [1, 300],
  [300, 20],
  [10_000, 2],
];

type Send = (message: CommandMessage) => Promise<CommandAnswer>;

interface Mode {
  name: string;
  send: Send;
  orgId: number;
  /** Tag values of the assets created in this mode's shard (what its scans read). */
  tags: string[];
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;

async function shardOf(dir: string) {
  const control = await ControlPlane.open(dir);
  const org = await control.createOrg('probe', 1);
  const writer = await ShardWriter.open(dir, 0, control, new ShardGenerations(), { placement: scanPlacement });
  return { control, org, writer };
}

let serial = 0;
const message = (name: string, args: unknown): CommandMessage => ({ id: ++serial, name, args, now: Date.now() });

/** `COMMANDS` creates and patches, `INFLIGHT` outstanding; commands per second. */
async function masterData({ send, orgId, tags }: Mode): Promise<number> {
  const created: number[] = [];
  let next = 0;
  const started = performance.now();
  const worker = async () => {
    while (next < COMMANDS) {
      const n = next++;
      const patch = n % 2 === 1 && created.length > 0;
      const m = patch
        ? message('assets.patch', { orgId, id: created[n % created.length], body: { description: `patched ${n}` } })
        : message('assets.create', { orgId, body: { name: `Probe ${serial}`, tags: [{ tag_type: 'rfid', value: `PROBE-${serial}` }] } });
      const answer = await send(m);
      if (answer.error !== undefined) throw new Error(`${m.name}: ${JSON.stringify(answer.error)}`);
      if (!patch) {
        created.push((answer.value as { id: number }).id);
        tags.push((m.args as { body: { tags: { value: string }[] } }).body.tags[0]!.value);
      }
    }
  };
  await Promise.all(Array.from({ length: INFLIGHT }, worker));
  return COMMANDS / ((performance.now() - started) / 1000);
}

let seq = 0;
/** Batches of one-read scans at one location, one at a time; median ms per batch. */
async function scanBatches({ send, orgId, tags }: Mode, size: number, count: number): Promise<number> {
  const times: number[] = [];
  for (let b = 0; b < count; b++) {
    const items: SourcedScan[] = Array.from({ length: size }, (_, i) => ({
      stream: 'SCANS',
      seq: ++seq,
      scan: {
        orgId,
        eventId: `probe-${seq}`,
        observedAt: Date.now() - 60_000 + i,
        location: { externalKey: 'PROBE-DOCK' },
        reads: [{ tagType: 'rfid', value: tags[i % 500]! }],
      },
    }));
    const t = performance.now();
    const answer = await send(message('scans.apply', { items, options: { historyGapMs: 300_000 } }));
    if (answer.error !== undefined) throw new Error(`scans.apply: ${JSON.stringify(answer.error)}`);
    times.push(performance.now() - t);
  }
  return median(times);
}

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'trackd-journal-cost-'));
const nats = await startNatsServer({ storeDir: path.join(root, 'nats') });
try {
  // One shard file for both modes: two shard files in one process do not cost the same (the
  // second opened was up to 2x faster either way round), so the modes share the writer and its state.
  const shard = await shardOf(path.join(root, 'shard'));
  const journal = await ShardJournal.open({ natsUrl: nats.url, replicas: 1 }, 0);
  const { position } = await reconcile(shard.writer, journal, () => {});
  const actor = new JournaledActor(
    shard.writer,
    position,
    journal,
    () => Promise.reject(new Error('no reopen in the probe')),
    () => {},
  );
  const tags: string[] = [];
  const orgId = shard.org.id;
  const modes: Mode[] = [
    { name: 'off', send: async (m) => shard.writer.execute(m), orgId, tags },
    { name: 'on', send: (m) => new Promise((resolve) => actor.submit(m, resolve)), orgId, tags },
  ];
  await modes[0]!.send(message('locations.create', { orgId, body: { external_key: 'PROBE-DOCK', name: 'Dock' } }));
  for (const mode of modes) await masterData(mode);
  const figures: Record<string, Record<string, number[]>> = { off: {}, on: {} };
  const record = (mode: string, key: string, value: number) => ((figures[mode]![key] ??= []) as number[]).push(value);
  for (let block = 0; block < BLOCKS; block++) {
    for (const mode of block % 2 === 0 ? modes : [...modes].reverse()) {
      record(mode.name, 'master_data_commands_per_s', await masterData(mode));
      for (const [size, count] of BATCHES) record(mode.name, `scan_batch_${size}_ms`, await scanBatches(mode, size, count));
    }
  }
  const medians = Object.fromEntries(
    Object.entries(figures).map(([mode, keys]) => [mode, Object.fromEntries(Object.entries(keys).map(([k, xs]) => [k, median(xs)]))]),
  );
  const ratios = Object.fromEntries(
    Object.keys(medians.off!).map((k) => [k, Math.round((medians.on![k]! / medians.off![k]!) * 100) / 100]),
  );
  const entries = await journal.last();
  process.stdout.write(
    `${JSON.stringify({ blocks: BLOCKS, commands: COMMANDS, inflight: INFLIGHT, batches: BATCHES, medians, on_over_off: ratios, journal_last_seq: entries, runs: figures }, null, 2)}\n`,
  );
  await journal.close();
  shard.writer.close();
  shard.control.close();
} finally {
  await nats.stop();
  fs.rmSync(root, { recursive: true, force: true });
}
