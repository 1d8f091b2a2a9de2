/**
 * The shard writer's page cache during bulk jobs: a batch raises it to BULK_LIMITS.writerCacheMb
 * (the q text index's merges read their pages from it instead of the file: README, "Why a row costs
 * more at 1,000,000 rows"), and the end of the shard's last running job sets the default back,
 * whether the job completed, failed or was abandoned at a start.
 */
import fs from 'node:fs';
import t from 'tap';
import { assetBatchCommand } from '../../src/bulk/assetRows.js';
import type { BatchArgs } from '../../src/bulk/batch.js';
import { ABANDON_INTERRUPTED } from '../../src/bulk/jobs.js';
import { BULK_LIMITS } from '../../src/bulk/limits.js';
import { ControlPlane } from '../../src/control/controlPlane.js';
import { scanPlacement } from '../../src/scans/placement.js';
import '../../src/shards/commandIndex.js';
import { ShardGenerations } from '../../src/shards/generations.js';
import type { CommandMessage } from '../../src/shards/mailbox.js';
import { ShardWriter } from '../../src/shards/writer.js';
import { DEFAULT_CACHE_KIB } from '../../src/storage/sqlite.js';
import { tempDir } from '../helpers/trackd.js';

let serial = 0;
const message = (name: string, args: unknown): CommandMessage => ({ id: ++serial, name, args, now: Date.now() });

t.test('a job raises the writer cache; the end of the last running job restores it', async (t) => {
  const dataDir = tempDir('trackd-writer-cache-');
  t.teardown(() => fs.rmSync(dataDir, { recursive: true, force: true }));
  const control = await ControlPlane.open(dataDir);
  const orgs = [await control.createOrg('Cache A', 1), await control.createOrg('Cache B', 1)];
  const writer = await ShardWriter.open(dataDir, 0, control, new ShardGenerations(), { placement: scanPlacement });
  t.teardown(() => {
    writer.close();
    control.close();
  });
  const cacheKib = () => -(writer.writer.pragma('cache_size', { simple: true }) as number);
  const run = (name: string, args: unknown) => {
    const answer = writer.execute(message(name, args));
    t.notOk(answer.error, name);
  };
  const begin = (orgId: number, jobId: string) =>
    run('bulk.begin', { orgId, jobId, idempotencyKey: null, kind: 'assets', mode: 'create', dryRun: false, atomic: false, format: 'csv' });
  const batch = (orgId: number, jobId: string, key: string): BatchArgs => ({
    orgId,
    jobId,
    mode: 'create',
    dryRun: false,
    atomic: false,
    rows: [{ row: 1, body: { external_key: key, name: key } }],
    errors: [],
    failedRows: 0,
    throughRow: 1,
    processedBefore: 0,
  });
  const finish = (orgId: number, jobId: string, status: 'completed' | 'failed') =>
    run('bulk.finish', { orgId, jobId, total: 1, status, detail: null });

  t.equal(cacheKib(), DEFAULT_CACHE_KIB, 'the default cache before any job');
  const [a, b] = ['01JOBCACHEA000000000000000', '01JOBCACHEB000000000000000'];
  begin(orgs[0]!.id, a);
  begin(orgs[1]!.id, b);
  run(assetBatchCommand.name, batch(orgs[0]!.id, a, 'CACHE-A'));
  t.equal(cacheKib(), BULK_LIMITS.writerCacheMb * 1024, "a batch raises it to the jobs' cache");
  run(assetBatchCommand.name, batch(orgs[1]!.id, b, 'CACHE-B'));
  finish(orgs[0]!.id, a, 'completed');
  t.equal(cacheKib(), BULK_LIMITS.writerCacheMb * 1024, 'kept while another job of the shard runs');
  finish(orgs[1]!.id, b, 'failed');
  t.equal(cacheKib(), DEFAULT_CACHE_KIB, 'the default again once the last job ended (failed)');

  const c = '01JOBCACHEC000000000000000';
  begin(orgs[0]!.id, c);
  const second = batch(orgs[0]!.id, c, 'CACHE-C');
  run(assetBatchCommand.name, second);
  t.equal(cacheKib(), BULK_LIMITS.writerCacheMb * 1024, 'raised again by the next job');
  run(ABANDON_INTERRUPTED, {});
  t.equal(cacheKib(), DEFAULT_CACHE_KIB, 'and restored when its job is abandoned');
});
