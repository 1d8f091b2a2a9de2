/**
 * What a seeded work directory keeps for later runs (`--keep`, then `--reuse DIR`): the dataset's
 * description beside its DATA_DIR, and the event relay's position moved past the events written
 * before the measured run.
 */
import fs from 'node:fs';
import path from 'node:path';
import { relayFile } from '../../src/events/relay.js';
import { openDatabase } from '../../src/storage/sqlite.js';
import type { DatasetInfo } from '../dataset/sizes.js';

const datasetFile = (workDir: string) => path.join(workDir, 'dataset.json');

export function saveDataset(workDir: string, dataset: DatasetInfo): void {
  fs.writeFileSync(datasetFile(workDir), `${JSON.stringify(dataset, null, 2)}\n`);
}

export function readDataset(workDir: string): DatasetInfo {
  const file = datasetFile(workDir);
  if (!fs.existsSync(file)) throw new Error(`--reuse ${workDir}: no dataset.json (a work directory kept by a run with --keep)`);
  return JSON.parse(fs.readFileSync(file, 'utf8')) as DatasetInfo;
}

/**
 * With trackd stopped: every shard's event relay treats the events in its log as published. The
 * seeding writes one event per history row (10,000,000 at the large size), which a live relay would
 * have published as they happened; left as a backlog, the relay publishes it (a few thousand a
 * second) on the shard's thread beside every measured scenario. The events stay in the log for
 * what reads it there. Returns how many were marked.
 */
export function markEventsRelayed(dataDir: string): number {
  let marked = 0;
  for (const name of fs.readdirSync(path.join(dataDir, 'shards'))) {
    const index = /^shard-(\d+)\.sqlite$/.exec(name)?.[1];
    if (index === undefined) continue;
    const shard = openDatabase(path.join(dataDir, 'shards', name), { readonly: true });
    const hasLog = shard.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'events'").get() !== undefined;
    const last = hasLog ? (shard.prepare('SELECT max(pos) FROM events').pluck().get() as number | null) : null;
    shard.close();
    if (last === null) continue;
    const store = openDatabase(relayFile(dataDir, Number(index)));
    store.exec('CREATE TABLE IF NOT EXISTS relay_position (id INTEGER PRIMARY KEY CHECK (id = 1), pos INTEGER NOT NULL)');
    const published = (store.prepare('SELECT pos FROM relay_position WHERE id = 1').pluck().get() as number | undefined) ?? 0;
    if (last > published) {
      store.prepare('INSERT INTO relay_position (id, pos) VALUES (1, ?) ON CONFLICT (id) DO UPDATE SET pos = excluded.pos').run(last);
      marked += last - published;
    }
    store.close();
  }
  return marked;
}
