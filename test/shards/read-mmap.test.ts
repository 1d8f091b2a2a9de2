/**
 * READ_MMAP_MB: the HTTP threads' reading connections map that much of each shard file (SQLite cuts
 * a larger map to its build's maximum, so the setting refuses more than READ_MMAP_MAX_MB); the
 * writer's connection keeps openDatabase's default.
 */
import fs from 'node:fs';
import t from 'tap';
import { loadConfig, READ_MMAP_MAX_MB } from '../../src/config.js';
import { ControlPlane } from '../../src/control/controlPlane.js';
import { inThreadActors, ShardRegistry } from '../../src/shards/registry.js';
import { DEFAULT_MMAP_BYTES, openDatabase } from '../../src/storage/sqlite.js';
import { tempDir } from '../helpers/trackd.js';

const MB = 1024 * 1024;
const mmapSize = (db: { pragma(sql: string, options: { simple: true }): unknown }) => db.pragma('mmap_size', { simple: true });

t.test('READ_MMAP_MB: default, bounds and refusals', async (t) => {
  const cases: [string | undefined, number | RegExp][] = [
    [undefined, READ_MMAP_MAX_MB],
    ['', READ_MMAP_MAX_MB],
    ['0', 0],
    ['256', 256],
    [String(READ_MMAP_MAX_MB), READ_MMAP_MAX_MB],
    [String(READ_MMAP_MAX_MB + 1), /^READ_MMAP_MB: Expected integer to be less or equal to 2047, got 2048$/],
    ['8192', /^READ_MMAP_MB: Expected integer to be less or equal to 2047/],
    ['-1', /^READ_MMAP_MB: must be a non-negative integer, got "-1"$/],
    ['1.5', /^READ_MMAP_MB: must be a non-negative integer/],
    ['lots', /^READ_MMAP_MB: must be a non-negative integer, got "lots"$/],
  ];
  for (const [given, expected] of cases) {
    const env = { DATA_DIR: '/tmp/x', ...(given === undefined ? {} : { READ_MMAP_MB: given }) };
    if (typeof expected === 'number') t.equal(loadConfig(env).READ_MMAP_MB, expected, `READ_MMAP_MB=${given}: ${expected}`);
    else t.throws(() => loadConfig(env), { message: expected }, `READ_MMAP_MB=${given}: refused`);
  }
  t.equal(READ_MMAP_MAX_MB * MB <= 0x7fff0000, true, 'the largest accepted value is within the build maximum');
});

t.test("the registry's reading connections map READ_MMAP_MB; SQLite's build caps the map", async (t) => {
  const dataDir = tempDir('trackd-mmap-');
  const control = await ControlPlane.open(dataDir);
  t.teardown(() => {
    control.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });
  for (const mb of [0, 64, READ_MMAP_MAX_MB]) {
    const registry = ShardRegistry.fromConfig({ DATA_DIR: dataDir, READ_MMAP_MB: mb }, control, inThreadActors(dataDir, control));
    const shard = await registry.open(0);
    t.equal(mmapSize(shard.reader), mb * MB, `READ_MMAP_MB=${mb}: the reader maps ${mb} MiB`);
    await registry.closeAll();
  }
  // A map above the build's maximum is cut to it: the reason the setting stops at READ_MMAP_MAX_MB.
  const db = openDatabase(`${dataDir}/probe.sqlite`, { mmapBytes: 8 * 1024 * MB });
  t.equal(mmapSize(db), 0x7fff0000, 'PRAGMA mmap_size of 8 GiB gives 0x7fff0000 bytes');
  db.close();
  const plain = openDatabase(`${dataDir}/plain.sqlite`);
  t.equal(mmapSize(plain), DEFAULT_MMAP_BYTES, 'other connections keep 256 MiB');
  plain.close();
});
