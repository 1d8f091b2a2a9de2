/**
 * What committing the writes that arrive together in one round (src/shards/rounds.ts) saves the
 * single-node shard actor, in one process against one command per transaction, in alternating
 * blocks so that a shared machine's drift falls on both:
 *
 *   node dist/bench/probes/writeRounds.js [--assets 10000] [--blocks 6] [--commands 2000] [--inflight 64]
 *
 * Asset creates (with a tag) and merge patches of random existing assets, 50/50 (the create-patch
 * scenario's bodies), `inflight` outstanding at a time (its 64 connections), through
 * ShardWriter.execute one at a time (`alone`, the actor before rounds) or RoundActor.submit
 * (`rounds`). Both modes drive one shard file and writer, seeded with `assets` assets first. Prints
 * one JSON document: per mode the commands/s and the process's CPU us per command of each block,
 * medians, and rounds/alone.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { ControlPlane } from '../../src/control/controlPlane.js';
import { scanPlacement } from '../../src/scans/placement.js';
import '../../src/shards/commandIndex.js';
import { ShardGenerations } from '../../src/shards/generations.js';
import type { CommandAnswer, CommandMessage } from '../../src/shards/mailbox.js';
import { RoundActor } from '../../src/shards/rounds.js';
import { ShardWriter } from '../../src/shards/writer.js';

const { values } = parseArgs({
  options: { assets: { type: 'string' }, blocks: { type: 'string' }, commands: { type: 'string' }, inflight: { type: 'string' } },
});
const ASSETS = Number(values.assets ?? 10_000);
const BLOCKS = Number(values.blocks ?? 6);
const COMMANDS = Number(values.commands ?? 2000);
const INFLIGHT = Number(values.inflight ?? 64);

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'trackd-write-rounds-'));
try {
  const control = await ControlPlane.open(root);
  const org = await control.createOrg('probe', 1);
  const writer = await ShardWriter.open(root, 0, control, new ShardGenerations(), { placement: scanPlacement });
  const actor = new RoundActor(writer);
  type Send = (message: CommandMessage) => Promise<CommandAnswer>;
  const modes: { name: string; send: Send }[] = [
    { name: 'alone', send: (m) => new Promise((resolve) => setImmediate(() => resolve(writer.execute(m)))) },
    { name: 'rounds', send: (m) => new Promise((resolve) => actor.submit(m, resolve)) },
  ];
  let serial = 0;
  const ids: number[] = [];
  const command = async (send: Send, n: number) => {
    const id = ++serial;
    const message: CommandMessage =
      n % 2 === 1 && ids.length > 0
        ? {
            id,
            name: 'assets.patch',
            args: { orgId: org.id, id: ids[(n * 7919) % ids.length], body: { description: `patched by the probe ${id}` } },
            now: Date.now(),
          }
        : {
            id,
            name: 'assets.create',
            args: {
              orgId: org.id,
              body: {
                name: `Probe asset ${id}`,
                external_key: `PROBE-${id}`,
                metadata: { source: 'probe' },
                tags: [{ tag_type: 'rfid', value: `PROBE-${id}` }],
              },
            },
            now: Date.now(),
          };
    const answer = await send(message);
    if (answer.error !== undefined) throw new Error(`${message.name}: ${JSON.stringify(answer.error)}`);
    if (message.name === 'assets.create') ids.push((answer.value as { id: number }).id);
  };
  /** `count` commands, `INFLIGHT` outstanding; creates only when seeding. */
  const load = async (send: Send, count: number, createsOnly: boolean) => {
    let next = 0;
    const worker = async () => {
      while (next < count) {
        const n = next++;
        await command(send, createsOnly ? 0 : n);
      }
    };
    await Promise.all(Array.from({ length: INFLIGHT }, worker));
  };
  await load(modes[1]!.send, ASSETS, true);
  const figures: Record<string, { commands_per_s: number[]; cpu_us_per_command: number[] }> = {};
  for (let block = 0; block < BLOCKS; block++) {
    for (const mode of block % 2 === 0 ? modes : [...modes].reverse()) {
      const cpu = process.cpuUsage();
      const started = performance.now();
      await load(mode.send, COMMANDS, false);
      const used = process.cpuUsage(cpu);
      const f = (figures[mode.name] ??= { commands_per_s: [], cpu_us_per_command: [] });
      f.commands_per_s.push(Math.round(COMMANDS / ((performance.now() - started) / 1000)));
      f.cpu_us_per_command.push(Math.round((used.user + used.system) / COMMANDS));
    }
  }
  const medians = Object.fromEntries(
    Object.entries(figures).map(([name, f]) => [
      name,
      { commands_per_s: median(f.commands_per_s), cpu_us_per_command: median(f.cpu_us_per_command) },
    ]),
  );
  console.log(
    JSON.stringify(
      {
        probe: 'writeRounds',
        assets: ASSETS,
        blocks: BLOCKS,
        commands: COMMANDS,
        inflight: INFLIGHT,
        load_average: os.loadavg().map((x) => Number(x.toFixed(1))),
        figures,
        medians,
        rounds_over_alone: {
          commands_per_s: Number((medians.rounds!.commands_per_s / medians.alone!.commands_per_s).toFixed(2)),
          cpu_us_per_command: Number((medians.rounds!.cpu_us_per_command / medians.alone!.cpu_us_per_command).toFixed(2)),
        },
      },
      null,
      2,
    ),
  );
  actor.current().close();
  control.close();
} finally {
  fs.rmSync(root, { recursive: true, force: true });
}
