import fs from 'node:fs';
import Database from 'better-sqlite3';
import t from 'tap';
import { ControlPlane } from '../../src/control/controlPlane.js';
import { scanPlacement } from '../../src/scans/placement.js';
import '../../src/shards/commandIndex.js';
import { ShardGenerations } from '../../src/shards/generations.js';
import type { CommandAnswer, CommandMessage } from '../../src/shards/mailbox.js';
import { RoundActor } from '../../src/shards/rounds.js';
import { ShardWriter, shardFile } from '../../src/shards/writer.js';
import { tempDir, type Teardown } from '../helpers/trackd.js';

/**
 * The single-node shard actor (src/shards/rounds.ts): writes submitted together commit in one
 * transaction and are answered after it, each undone alone when it fails, in submission order;
 * a round the storage refuses answers every command with the failure and commits none of them.
 */
async function shard(t: Teardown) {
  const dir = tempDir('trackd-rounds-');
  const control = await ControlPlane.open(dir);
  const org = await control.createOrg('rounds', 1);
  const writer = await ShardWriter.open(dir, 0, control, new ShardGenerations(), { placement: scanPlacement });
  const reader = new Database(shardFile(dir, 0), { readonly: true });
  const actor = new RoundActor(writer);
  t.teardown(() => {
    reader.close();
    actor.current().close();
    control.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  let serial = 0;
  const message = (name: string, args: unknown): CommandMessage => ({ id: ++serial, name, args, now: Date.now() });
  const create = (key: string) => message('assets.create', { orgId: org.id, body: { name: `Asset ${key}`, external_key: key, tags: [] } });
  /** Submits all in one turn; each answer with what a separate connection saw committed when it came. */
  const submitAll = (messages: CommandMessage[]) =>
    Promise.all(
      messages.map(
        (m) =>
          new Promise<{ answer: CommandAnswer; committedKeys: string[] }>((resolve) =>
            actor.submit(m, (answer) =>
              resolve({ answer, committedKeys: reader.prepare('SELECT external_key FROM assets ORDER BY id').pluck().all() as string[] }),
            ),
          ),
      ),
    );
  return { org, writer, reader, actor, create, submitAll };
}

t.test('writes submitted together commit together, in order, and are answered after that commit', async (t) => {
  const { reader, create, submitAll } = await shard(t);
  const keys = ['R-1', 'R-2', 'R-3', 'R-4', 'R-5'];
  const answers = await submitAll(keys.map(create));
  t.same(
    answers.map((a) => ((a.answer as { value: unknown }).value as { external_key: string }).external_key),
    keys,
    'each answer is its own asset',
  );
  for (const [i, a] of answers.entries()) t.same(a.committedKeys, keys, `answer ${i + 1} comes after the commit of the whole round`);
  t.same(reader.prepare('SELECT seq FROM events ORDER BY pos').pluck().all(), [1, 2, 3, 4, 5], 'their events in submission order');
});

t.test('a write that fails in a round is undone alone; its neighbours commit', async (t) => {
  const { reader, create, submitAll } = await shard(t);
  const answers = await submitAll([create('D-1'), create('D-2'), create('D-1'), create('D-3')]);
  t.same(
    answers.map((a) => a.answer.error === undefined),
    [true, true, false, true],
    'only the repeated key failed',
  );
  t.match(answers[2]!.answer.error, { domain: { kind: 'conflict' } }, 'the repeated key: 409, as alone');
  t.same(reader.prepare('SELECT external_key FROM assets ORDER BY id').pluck().all(), ['D-1', 'D-2', 'D-3']);
  t.same(reader.prepare('SELECT seq FROM events ORDER BY pos').pluck().all(), [1, 2, 3], 'no hole in the event sequence');
});

t.test('a round the storage refuses: every command answers the failure, none commits, the next round works', async (t) => {
  const { writer, reader, actor, create, submitAll } = await shard(t);
  await submitAll([create('F-0')]);
  const pages = writer.writer.pragma('page_count', { simple: true }) as number;
  writer.writer.pragma(`max_page_count = ${pages}`);
  const refused = await submitAll(Array.from({ length: 40 }, (_, i) => create(`F-${i + 1}-${'x'.repeat(400)}`)));
  t.ok(
    refused.every((a) => a.answer.error !== undefined && 'code' in a.answer.error && a.answer.error.code === 'SQLITE_FULL'),
    'every command of the round: SQLITE_FULL (the storage 503)',
  );
  t.same(reader.prepare('SELECT external_key FROM assets').pluck().all(), ['F-0'], 'nothing of the round committed');
  actor.current().writer.pragma('max_page_count = 1073741823');
  const after = await submitAll([create('F-41'), create('F-42')]);
  t.ok(
    after.every((a) => a.answer.error === undefined),
    'the next round commits',
  );
  t.same(reader.prepare('SELECT seq FROM events ORDER BY pos').pluck().all(), [1, 2, 3], 'no hole in the event sequence');
});

t.test('reads and commands alone keep their place among the rounds', async (t) => {
  const { org, actor, create, submitAll } = await shard(t);
  const [first] = await submitAll([create('O-1')]);
  const id = ((first!.answer as { value: unknown }).value as { id: number }).id;
  const order: string[] = [];
  const submit = (name: string, m: CommandMessage) =>
    new Promise<void>((resolve) =>
      actor.submit(m, (answer) => {
        order.push(`${name}:${answer.error === undefined ? 'ok' : 'error'}`);
        resolve();
      }),
    );
  await Promise.all([
    submit('create', create('O-2')),
    submit('patch', { id: 90, name: 'assets.patch', args: { orgId: org.id, id, body: { description: 'x' } }, now: Date.now() }),
    submit('unknown', { id: 91, name: 'no.such.command', args: {}, now: Date.now() }),
    submit('create', create('O-3')),
  ]);
  t.same(order, ['create:ok', 'patch:ok', 'unknown:error', 'create:ok'], 'answered in submission order');
});

t.test('drain runs what was submitted at once (the worker drains before it closes)', async (t) => {
  const { reader, actor, create } = await shard(t);
  let answered = 0;
  for (const key of ['C-1', 'C-2']) actor.submit(create(key), () => answered++);
  actor.drain();
  t.equal(answered, 2);
  t.same(reader.prepare('SELECT external_key FROM assets ORDER BY id').pluck().all(), ['C-1', 'C-2']);
});

t.test('the actor counts its transactions by size (TRACKD_ROUND_SIZES)', async (t) => {
  const { org, actor, create, submitAll } = await shard(t);
  await submitAll([create('S-1'), create('S-2'), create('S-3')]);
  await submitAll([create('S-4')]);
  await submitAll([
    create('S-5'),
    { id: 92, name: 'no.such.command', args: {}, now: Date.now() },
    create('S-6'),
    create('S-7'),
    { id: 93, name: 'assets.patch', args: { orgId: org.id, id: 1, body: {} }, now: Date.now() },
  ]);
  t.same(actor.roundSizes(), { sizes: { 1: 2, 3: 2 }, others: 1 }, 'two rounds of 3, two alone, one apart');
});
