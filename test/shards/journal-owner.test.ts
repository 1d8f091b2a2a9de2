/**
 * The owner entry (docs/cluster.md, step 3): a new owner's first journal entry, `shard.owner` with
 * its node and lease revision, fences the previous owner (its next append is refused, its round
 * rolls back, the shard answers 503 and is fenced), and a rebuild from the journal, which applies
 * the entry as a no-op, equals the new owner's shard table by table.
 */
import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import t from 'tap';
import { ControlPlane } from '../../src/control/controlPlane.js';
import { scanPlacement } from '../../src/scans/placement.js';
import '../../src/shards/commandIndex.js';
import { ShardGenerations } from '../../src/shards/generations.js';
import { ShardJournal } from '../../src/shards/journal.js';
import { JournaledActor, reconcile, type JournalEvent } from '../../src/shards/journaled.js';
import type { CommandAnswer, CommandMessage } from '../../src/shards/mailbox.js';
import { rebuildShard } from '../../src/shards/replay.js';
import { ShardWriter } from '../../src/shards/writer.js';
import { journalEntries } from '../helpers/journal.js';
import { natsClient } from '../helpers/scans.js';
import { firstDifference, tables } from '../helpers/shardWorkload.js';
import { startNats, tempDir } from '../helpers/trackd.js';

let serial = 0;
const message = (name: string, args: unknown): CommandMessage => ({ id: ++serial, name, args, now: Date.now() });

/** One node's journaled actor on shard 0, over its own data dir (the control plane copied, as two nodes would share it). */
async function node(t: { teardown(fn: () => unknown): void }, natsUrl: string, dataDir: string) {
  const control = await ControlPlane.open(dataDir);
  const open = () => ShardWriter.open(dataDir, 0, control, new ShardGenerations(), { placement: scanPlacement });
  const writer = await open();
  const journal = await ShardJournal.open({ natsUrl, replicas: 1 }, 0);
  const events: JournalEvent[] = [];
  const { position } = await reconcile(writer, journal, (e) => events.push(e));
  const actor = new JournaledActor(writer, position, journal, open, (e) => events.push(e));
  t.teardown(async () => {
    await actor.idle();
    actor.current()?.close();
    await journal.close();
    control.close();
  });
  const send = (m: CommandMessage) => new Promise<CommandAnswer>((resolve) => actor.submit(m, resolve));
  return { send, events, file: path.join(dataDir, 'shards', 'shard-0.sqlite') };
}

t.test("a new owner's first entry names its lease revision and fences the previous owner", async (t) => {
  const nats = await startNats(t);
  const nc = await natsClient(t, nats.url);
  const [dirA, dirB, rebuilt] = [tempDir('trackd-owner-a-'), tempDir('trackd-owner-b-'), tempDir('trackd-owner-rebuild-')];
  t.teardown(() => {
    for (const dir of [dirA, dirB, rebuilt]) fs.rmSync(dir, { recursive: true, force: true });
  });
  const control = await ControlPlane.open(dirA);
  const org = await control.createOrg('Owners', 1);
  control.close();

  const a = await node(t, nats.url, dirA);
  t.notOk((await a.send(message('shard.owner', { node: 'node-a', epoch: 7 }))).error, 'node a starts as owner (epoch 7)');
  const first = await a.send(message('assets.create', { orgId: org.id, body: { name: 'By a' } }));
  t.notOk(first.error, 'node a writes');

  // The control plane as it is now, its WAL included (id blocks: in a cluster, one for every node).
  const shared = new Database(path.join(dirA, 'control.sqlite'), { readonly: true });
  await shared.backup(path.join(dirB, 'control.sqlite'));
  shared.close();
  const b = await node(t, nats.url, dirB);
  t.notOk((await b.send(message('shard.owner', { node: 'node-b', epoch: 9 }))).error, 'node b takes over (epoch 9)');

  // Nothing but the owner entry came after node a's last entry: that entry alone fences it.
  const stale = await a.send(message('assets.create', { orgId: org.id, body: { name: 'Stale write by a' } }));
  const refused = stale.error !== undefined && 'domain' in stale.error ? stale.error.domain : undefined;
  t.equal(refused?.kind, 'unavailable', 'the previous owner cannot write after the new owner entry: 503');
  t.match(refused?.detail, /owned by another writer/, 'owned by another writer now');
  t.ok(
    a.events.some((e) => e.kind === 'fenced'),
    'and is fenced',
  );

  t.notOk((await b.send(message('assets.create', { orgId: org.id, body: { name: 'By b' } }))).error, 'node b writes');

  const owners = (await journalEntries(nc, 0))
    .flatMap((e) => e.entry.records)
    .filter((r) => r.name === 'shard.owner')
    .map((r) => r.args);
  t.same(
    owners,
    [
      { node: 'node-a', epoch: 7 },
      { node: 'node-b', epoch: 9 },
    ],
    'the journal names each owner and its lease revision, in order',
  );
  const rebuild = await rebuildShard(path.join(rebuilt, 'shard-0.sqlite'), { natsUrl: nats.url, replicas: 1 }, 0, { fromSnapshot: false });
  t.equal(rebuild.replayed, 4, 'a rebuild replays both owner entries and both writes');
  t.equal(firstDifference(tables(b.file), tables(path.join(rebuilt, 'shard-0.sqlite'))), undefined, "it equals the new owner's shard");
});
