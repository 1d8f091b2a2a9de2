import fs from 'node:fs';
import Database from 'better-sqlite3';
import t from 'tap';
import { ASSET_TAGS } from '../../src/assets/store.js';
import { ControlPlane } from '../../src/control/controlPlane.js';
import { eventId } from '../../src/events/log.js';
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
  return { control, org, writer, reader, actor, create, submitAll };
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

t.test('the q text index of a round: written once at its commit, exact right after each answer, none of a failed command', async (t) => {
  const { org, reader, actor, create, submitAll } = await shard(t);
  let serial = 1000;
  const message = (name: string, args: unknown): CommandMessage => ({ id: ++serial, name, args, now: Date.now() });
  const made = await submitAll([
    message('assets.create', {
      orgId: org.id,
      body: { name: 'Old pier', external_key: 'T-0', tags: [{ tag_type: 'rfid', value: 'tg-dune' }] },
    }),
    create('T-00'),
  ]);
  const [first, second] = made.map((m) => (m.answer as { value: { id: number; tags: { id: number }[] } }).value);
  /** Assets whose name, key, description or a live tag holds `term` (the plain SQL answer), and what the index answers. */
  const plain = reader.prepare(
    `SELECT a.id FROM assets a WHERE a.name LIKE @p OR a.external_key LIKE @p OR a.description LIKE @p
       OR EXISTS (SELECT 1 FROM tags g WHERE g.asset_id = a.id AND g.deleted_at IS NULL AND g.value LIKE @p) ORDER BY a.id`,
  );
  const indexed = reader.prepare('SELECT rowid FROM assets_text(?) ORDER BY rowid');
  const TERMS = [
    'amber',
    'falcon',
    'cobalt',
    'birch',
    'crimson',
    'heron',
    'zircon',
    'quasar',
    'dune',
    'ember',
    'T-0',
    'T-1',
    'T-2',
    'pier',
  ];
  const mismatches = () =>
    TERMS.flatMap((term) => {
      const want = plain.pluck().all({ p: `%${term}%` });
      const got = indexed.pluck().all(`"${term}"`);
      return JSON.stringify(want) === JSON.stringify(got) ? [] : [{ term, want, got }];
    });
  const round = [
    message('assets.create', {
      orgId: org.id,
      body: { name: 'Amber falcon', external_key: 'T-1', tags: [{ tag_type: 'rfid', value: 'tg-cobalt' }] },
    }),
    message('assets.create', { orgId: org.id, body: { name: 'Birch', external_key: 'T-2' } }),
    message('assets.patch', { orgId: org.id, id: first!.id, body: { description: 'crimson heron' } }),
    // Refused (the key is taken; a validity window that ends before it starts): their terms must not land.
    message('assets.create', { orgId: org.id, body: { name: 'Dupe zircon', external_key: 'T-1' } }),
    message('assets.patch', {
      orgId: org.id,
      id: second!.id,
      body: { description: 'quasar', valid_from: '2030-01-01T00:00:00Z', valid_to: '2020-01-01T00:00:00Z' },
    }),
    message('tags.detach', { orgId: org.id, owner: ASSET_TAGS, ownerId: first!.id, tagId: first!.tags[0]!.id }),
    message('tags.attach', { orgId: org.id, owner: ASSET_TAGS, ownerId: second!.id, tag: { tag_type: 'barcode', value: 'tg-ember' } }),
  ];
  const seen: unknown[][] = [];
  const answers = await Promise.all(
    round.map(
      (m) =>
        new Promise<CommandAnswer>((resolve) =>
          actor.submit(m, (answer) => {
            seen.push(mismatches());
            resolve(answer);
          }),
        ),
    ),
  );
  t.same(
    answers.map((a) => a.error === undefined),
    [true, true, true, false, false, true, true],
    'the two refused commands failed alone',
  );
  t.same(
    seen,
    round.map(() => []),
    'right after each answer the index answers every term as the plain SQL does',
  );
  t.same(indexed.pluck().all('"zircon"'), [], "a refused create's name is not indexed");
  t.same(indexed.pluck().all('"quasar"'), [], "a refused patch's description is not indexed");
  t.same(indexed.pluck().all('"dune"'), [], 'a detached tag is no longer indexed');
  t.same(indexed.pluck().all('"ember"'), [second!.id], 'an attached tag is');
  t.equal(reader.prepare('SELECT count(*) FROM text_index_stale').pluck().get(), 0, 'no owner left marked');
  t.equal(reader.prepare('SELECT count(*) FROM text_index_paused').pluck().get(), 0, 'the pause never committed');
});

t.test('event heads of a round: written once at its commit, sequences per org gapless around a refused command', async (t) => {
  const { control, org, reader, create, submitAll } = await shard(t);
  const other = await control.createOrg('rounds other', 1);
  let serial = 2000;
  const createFor = (orgId: number, key: string): CommandMessage => ({
    id: ++serial,
    name: 'assets.create',
    args: { orgId, body: { name: `Asset ${key}`, external_key: key, tags: [] } },
    now: Date.now(),
  });
  await submitAll([create('H-0')]);
  const heads = () => reader.prepare('SELECT org_id, last_seq FROM event_heads ORDER BY org_id').all();
  const answers = await submitAll([
    createFor(other.id, 'H-A1'),
    create('H-1'),
    createFor(org.id, 'H-0'), // refused: the key is taken
    createFor(other.id, 'H-A2'),
    create('H-2'),
    createFor(other.id, 'H-A1'), // refused
    createFor(other.id, 'H-A3'),
  ]);
  t.same(
    answers.map((a) => a.answer.error === undefined),
    [true, true, false, true, true, false, true],
  );
  const seqs = (orgId: number) => reader.prepare('SELECT seq FROM events WHERE org_id = ? ORDER BY pos').pluck().all(orgId);
  t.same(seqs(org.id), [1, 2, 3], 'the first org: no hole where its refused command was');
  t.same(seqs(other.id), [1, 2, 3], 'the other org: none either');
  t.same(
    heads(),
    [
      { org_id: org.id, last_seq: 3 },
      { org_id: other.id, last_seq: 3 },
    ],
    'each head is its last sequence',
  );
  const ids = reader.prepare('SELECT org_id, seq, id, occurred_at FROM events ORDER BY pos').all() as {
    org_id: number;
    seq: number;
    id: string;
    occurred_at: number;
  }[];
  t.ok(
    ids.every((e) => e.id === eventId(e.org_id, e.seq, e.occurred_at)),
    'every event id is the one of its org, sequence and time',
  );
  // After a prune of every event (the relay published them all), the sequences go on from the heads.
  await submitAll([{ id: ++serial, name: 'events.prune', args: { before: Date.now() + 60_000, throughPos: 1e9 }, now: Date.now() }]);
  t.equal(reader.prepare('SELECT count(*) FROM events').pluck().get(), 0, 'all pruned');
  await submitAll([create('H-3'), createFor(other.id, 'H-A4')]);
  t.same(seqs(org.id), [4], 'the first org goes on from its head');
  t.same(seqs(other.id), [4], 'the other too');
  // An import batch (its own heads held for its rows) between creates of the same org, in one round.
  const job = {
    orgId: org.id,
    jobId: 'J-1',
    idempotencyKey: null,
    kind: 'assets',
    mode: 'create',
    dryRun: false,
    atomic: false,
    format: 'ndjson',
  };
  t.equal(
    (await submitAll([{ id: ++serial, name: 'bulk.begin', args: job, now: Date.now() }]))[0]!.answer.error,
    undefined,
    'the job began',
  );
  const batch = {
    orgId: org.id,
    jobId: 'J-1',
    mode: 'create',
    dryRun: false,
    atomic: false,
    rows: [1, 2].map((row) => ({ row, body: { external_key: `H-B${row}`, name: `Imported ${row}` } })),
    errors: [],
    failedRows: 0,
    throughRow: 2,
    processedBefore: 0,
  };
  const mixed = await submitAll([create('H-4'), { id: ++serial, name: 'bulk.assets.apply', args: batch, now: Date.now() }, create('H-5')]);
  t.same(
    mixed.map((a) => a.answer.error),
    [undefined, undefined, undefined],
    'the round committed',
  );
  t.same(seqs(org.id), [4, 5, 6, 7, 8], 'the import follows the create before it, the create after it follows the import');
  t.same(heads()[0], { org_id: org.id, last_seq: 8 }, 'the head is the last of them');
  // A webhook registered after a create of its round starts after that create's event (as with the head upserted per event).
  const webhook = {
    orgId: org.id,
    url: 'https://hooks.example.com/rounds',
    description: null,
    eventTypes: ['asset.created'],
    filters: {},
    scopes: ['assets:read'],
    secret: 'stored-secret',
    after: undefined,
  };
  const registered = await submitAll([create('H-6'), { id: ++serial, name: 'webhooks.create', args: webhook, now: Date.now() }]);
  t.match(registered[1]!.answer, { value: { last_delivered_seq: 9 } }, "the webhook's cursor is the round's event before it");
});

t.test('a write that fails after writing rows is undone whole, in a round and alone', async (t) => {
  const { org, writer, reader, create, submitAll } = await shard(t);
  let serial = 1_000;
  const tagged = (key: string, tags: string[]): CommandMessage => ({
    id: ++serial,
    name: 'assets.create',
    args: { orgId: org.id, body: { name: `Asset ${key}`, external_key: key, tags: tags.map((value) => ({ tag_type: 'rfid', value })) } },
    now: Date.now(),
  });
  await submitAll([tagged('U-1', ['taken'])]);
  const tags = () => reader.prepare('SELECT value FROM tags ORDER BY id').pluck().all();
  // Its first tag is inserted before its second one is refused (taken): the insert must be undone with it.
  const round = await submitAll([create('U-2'), tagged('U-3', ['fresh-1', 'taken']), create('U-4')]);
  t.same(
    round.map((a) => a.answer.error === undefined),
    [true, false, true],
    'in a round: only the write with the taken tag failed',
  );
  t.same(tags(), ['taken'], 'in a round: the tag it inserted before the refusal is gone');
  const alone = writer.execute(tagged('U-5', ['fresh-2', 'taken']));
  t.match(alone.error, { domain: { kind: 'conflict' } }, 'alone: refused');
  t.same(tags(), ['taken'], 'alone: the tag it inserted before the refusal is gone');
  t.same(reader.prepare('SELECT seq FROM events ORDER BY pos').pluck().all(), [1, 2, 3], 'no event of either, no hole');
  t.equal(writer.writer.inTransaction, false, 'no transaction left open');
});

t.test('scan batches submitted together: each is answered in a turn of its own, before the next one runs', async (t) => {
  const { org, actor } = await shard(t);
  let serial = 1000;
  const batch = (seq: number): CommandMessage => ({
    id: ++serial,
    name: 'scans.apply',
    args: {
      items: [
        {
          stream: 'SCANS',
          seq,
          scan: { orgId: org.id, eventId: `e${seq}`, observedAt: Date.now(), location: { externalKey: 'NOWHERE' }, reads: [] },
        },
      ],
      options: { historyGapMs: 0 },
    },
    now: Date.now(),
  });
  const order: string[] = [];
  const answers: CommandAnswer[] = [];
  await new Promise<void>((resolve) => {
    actor.submit(batch(1), (answer) => {
      answers.push(answer);
      order.push('first answered');
      // The worker sends a turn's answers from a microtask: it must run before the second batch does.
      queueMicrotask(() => order.push('the first turn ended'));
    });
    actor.submit(batch(2), (answer) => {
      answers.push(answer);
      order.push('second answered');
      resolve();
    });
  });
  t.same(
    answers.map((a) => a.error),
    [undefined, undefined],
    'both applied (their scan dead-lettered: no such location)',
  );
  t.same(order, ['first answered', 'the first turn ended', 'second answered']);
});
