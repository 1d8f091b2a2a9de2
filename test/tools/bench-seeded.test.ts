/**
 * What the bench keeps of a seeded work directory (bench/lib/seeded.ts): the events in a shard's log
 * are marked relayed (the relay's saved position moves to the last one, never back), and the
 * dataset's description survives for `--reuse`.
 */
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { shardMigrations } from '../../migrations/shard/index.js';
import { markEventsRelayed, readDataset, saveDataset } from '../../bench/lib/seeded.js';
import type { DatasetInfo } from '../../bench/dataset/sizes.js';
import { relayFile } from '../../src/events/relay.js';
import { migrate, openDatabase } from '../../src/storage/sqlite.js';
import { tempDir } from '../helpers/trackd.js';

/** Events seq first..last of org 1 in shard `index`'s log (the shard file made by the migrations when missing). */
async function shardWithEvents(dataDir: string, index: number, first: number, last: number): Promise<void> {
  const file = path.join(dataDir, 'shards', `shard-${index}.sqlite`);
  await migrate(file, shardMigrations);
  const db = openDatabase(file);
  const insert = db.prepare('INSERT INTO events (org_id, seq, id, type, occurred_at, data) VALUES (1, ?, ?, ?, ?, ?)');
  for (let i = first; i <= last; i++) insert.run(i, `ev-${index}-${i}`, 'asset.moved', Date.now(), '{}');
  db.close();
}

const relayed = (dataDir: string, index: number) => {
  const store = openDatabase(relayFile(dataDir, index), { readonly: true });
  try {
    return store.prepare('SELECT pos FROM relay_position WHERE id = 1').pluck().get();
  } finally {
    store.close();
  }
};

t.test('every shard log is marked relayed up to its last event, and only forward', async (t) => {
  const dataDir = tempDir('trackd-bench-seeded-');
  t.teardown(() => fs.rmSync(dataDir, { recursive: true, force: true }));
  await shardWithEvents(dataDir, 0, 1, 7);
  await shardWithEvents(dataDir, 1, 1, 0);
  t.equal(markEventsRelayed(dataDir), 7, 'seven events marked');
  t.same([relayed(dataDir, 0), fs.existsSync(relayFile(dataDir, 1))], [7, false], 'shard 0 at its last event; shard 1 has none to mark');
  await shardWithEvents(dataDir, 0, 8, 10);
  t.equal(markEventsRelayed(dataDir), 3, 'only the events written since are counted');
  t.equal(relayed(dataDir, 0), 10);
  const store = openDatabase(relayFile(dataDir, 0));
  store.prepare('UPDATE relay_position SET pos = 50 WHERE id = 1').run();
  store.close();
  t.equal(markEventsRelayed(dataDir), 0, 'a relay already past the log is left alone');
  t.equal(relayed(dataDir, 0), 50);
});

t.test('the dataset description is read back as saved; a directory without one is refused', async (t) => {
  const workDir = tempDir('trackd-bench-seeded-');
  t.teardown(() => fs.rmSync(workDir, { recursive: true, force: true }));
  t.throws(() => readDataset(workDir), /no dataset\.json/);
  const dataset = { size: 'tiny', orgId: 3, assets: { first: 1, count: 500 }, notes: [] } as unknown as DatasetInfo;
  saveDataset(workDir, dataset);
  t.same(readDataset(workDir), dataset);
});
