/**
 * SHARD_CACHE_MB: the page cache of each shard's writing connection (SQLite's cache_size, in KiB
 * when negative); the reading connections keep openDatabase's.
 */
import fs from 'node:fs';
import t from 'tap';
import { DEFAULT_WRITER_CACHE_MB, loadConfig } from '../../src/config.js';
import { ControlPlane } from '../../src/control/controlPlane.js';
import { scanPlacement } from '../../src/scans/placement.js';
import { ShardGenerations } from '../../src/shards/generations.js';
import { ShardWriter } from '../../src/shards/writer.js';
import { tempDir } from '../helpers/trackd.js';
import '../../src/shards/commandIndex.js';

t.test('SHARD_CACHE_MB: default, bounds and refusals', async (t) => {
  const cases: [string | undefined, number | RegExp][] = [
    [undefined, DEFAULT_WRITER_CACHE_MB],
    ['', DEFAULT_WRITER_CACHE_MB],
    ['2', 2],
    ['4096', 4096],
    ['65536', 65_536],
    ['1', /^SHARD_CACHE_MB: Expected integer to be greater or equal to 2, got 1$/],
    ['65537', /^SHARD_CACHE_MB: Expected integer to be less or equal to 65536/],
    ['-1', /^SHARD_CACHE_MB: must be a non-negative integer, got "-1"$/],
    ['lots', /^SHARD_CACHE_MB: must be a non-negative integer, got "lots"$/],
  ];
  for (const [given, expected] of cases) {
    const env = { DATA_DIR: '/tmp/x', ...(given === undefined ? {} : { SHARD_CACHE_MB: given }) };
    if (typeof expected === 'number') t.equal(loadConfig(env).SHARD_CACHE_MB, expected, `SHARD_CACHE_MB=${given}: ${expected}`);
    else t.throws(() => loadConfig(env), { message: expected }, `SHARD_CACHE_MB=${given}: refused`);
  }
});

t.test("the writer's connection gets the cache it is given, and the default without one", async (t) => {
  const dataDir = tempDir('trackd-cache-');
  const control = await ControlPlane.open(dataDir);
  t.teardown(() => {
    control.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });
  for (const mb of [undefined, 8]) {
    const writer = await ShardWriter.open(dataDir, 0, control, new ShardGenerations(), { placement: scanPlacement }, undefined, mb);
    const expected = -(mb ?? DEFAULT_WRITER_CACHE_MB) * 1024;
    t.equal(writer.writer.pragma('cache_size', { simple: true }), expected, `SHARD_CACHE_MB=${mb}: cache_size ${expected}`);
    writer.close();
  }
});
