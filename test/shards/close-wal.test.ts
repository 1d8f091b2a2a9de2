/**
 * A shard writer's close leaves no frames in its WAL, even while another connection to the file is
 * still open (the checkpoint worker's: it lets go of the file only when its message arrives). SQLite
 * checkpoints at close only on the last connection, so before, a clean stop could leave hundreds of
 * MB of WAL for the next start to read (operations.md 1: "close SQLite").
 */
import fs from 'node:fs';
import t from 'tap';
import Database from 'better-sqlite3';
import { ControlPlane } from '../../src/control/controlPlane.js';
import { scanPlacement } from '../../src/scans/placement.js';
import { ShardGenerations } from '../../src/shards/generations.js';
import { ShardWriter } from '../../src/shards/writer.js';
import { tempDir } from '../helpers/trackd.js';
import '../../src/shards/commandIndex.js';

t.test("a writer's close copies its WAL back while another connection holds the file", async (t) => {
  const dataDir = tempDir('trackd-close-wal-');
  const control = await ControlPlane.open(dataDir);
  t.teardown(() => {
    control.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });
  const shard = await ShardWriter.open(dataDir, 0, control, new ShardGenerations(), { placement: scanPlacement });
  const file = shard.writer.name;
  // Another connection, open across the close, as the checkpoint worker's is.
  const other = new Database(file, { fileMustExist: true });
  t.teardown(() => other.close());
  shard.writer.exec(
    'CREATE TABLE close_wal_probe (n INTEGER); WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < 5000) INSERT INTO close_wal_probe SELECT n FROM c',
  );
  // It has read the file (as the worker's checkpoints do), so it holds its share of the WAL.
  t.equal(other.prepare('SELECT count(*) FROM close_wal_probe').pluck().get(), 5000, 'the other connection reads the rows');
  const before = fs.statSync(`${file}-wal`).size;
  t.ok(before > 0, `the WAL holds frames before the close (${before} bytes)`);
  shard.close();
  const after = fs.existsSync(`${file}-wal`) ? fs.statSync(`${file}-wal`).size : 0;
  t.equal(after, 0, 'the WAL is empty right after the close');
  t.equal(other.prepare('SELECT count(*) FROM close_wal_probe').pluck().get(), 5000, 'and every row is in the file');
});
