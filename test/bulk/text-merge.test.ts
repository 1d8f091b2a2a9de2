/**
 * The q text index's merge setting during bulk jobs (bulk/textMerge.ts): a batch sets FTS5's
 * automerge to BULK_LIMITS.textIndexAutomerge, the end of the shard's last running job sets the
 * default back (completed, failed or abandoned at a start), and a job that grew its table by a
 * tenth leaves its kind's index in one segment when it ends. What `q` answers meanwhile is
 * test/bulk/text-index.test.ts's (the same comparison with LIKE, over jobs of several batches).
 */
import fs from 'node:fs';
import t from 'tap';
import { assetBatchCommand } from '../../src/bulk/assetRows.js';
import type { BatchArgs } from '../../src/bulk/batch.js';
import { ABANDON_INTERRUPTED } from '../../src/bulk/jobs.js';
import { BULK_LIMITS } from '../../src/bulk/limits.js';
import { textMergeSetting } from '../../src/bulk/textMerge.js';
import { ControlPlane } from '../../src/control/controlPlane.js';
import { scanPlacement } from '../../src/scans/placement.js';
import '../../src/shards/commandIndex.js';
import { ShardGenerations } from '../../src/shards/generations.js';
import type { CommandMessage } from '../../src/shards/mailbox.js';
import { ShardWriter } from '../../src/shards/writer.js';
import { tempDir } from '../helpers/trackd.js';

let serial = 0;
const message = (name: string, args: unknown): CommandMessage => ({ id: ++serial, name, args, now: Date.now() });

t.test('a job raises the text index merge setting; the last job to end restores it and merges a grown index', async (t) => {
  const dataDir = tempDir('trackd-text-merge-');
  t.teardown(() => fs.rmSync(dataDir, { recursive: true, force: true }));
  const control = await ControlPlane.open(dataDir);
  const orgs = [await control.createOrg('Merge A', 1), await control.createOrg('Merge B', 1)];
  const writer = await ShardWriter.open(dataDir, 0, control, new ShardGenerations(), { placement: scanPlacement });
  t.teardown(() => {
    writer.close();
    control.close();
  });
  const run = (name: string, args: unknown) => {
    const answer = writer.execute(message(name, args));
    t.notOk(answer.error, name);
  };
  const segments = () => writer.writer.prepare('SELECT count(DISTINCT segid) FROM assets_text_idx').pluck().get() as number;
  const begin = (orgId: number, jobId: string) =>
    run('bulk.begin', { orgId, jobId, idempotencyKey: null, kind: 'assets', mode: 'create', dryRun: false, atomic: false, format: 'csv' });
  const processed = new Map<string, number>();
  const batch = (orgId: number, jobId: string, keys: string[]) => {
    const before = processed.get(jobId) ?? 0;
    const args: BatchArgs = {
      orgId,
      jobId,
      mode: 'create',
      dryRun: false,
      atomic: false,
      rows: keys.map((key, i) => ({ row: before + i + 1, body: { external_key: key, name: key } })),
      errors: [],
      failedRows: 0,
      throughRow: before + keys.length,
      processedBefore: before,
    };
    processed.set(jobId, before + keys.length);
    run(assetBatchCommand.name, args);
  };
  const finish = (orgId: number, jobId: string, status: 'completed' | 'failed') =>
    run('bulk.finish', { orgId, jobId, total: processed.get(jobId) ?? 0, status, detail: null });
  const raised = Array(2).fill(BULK_LIMITS.textIndexAutomerge);

  t.same(textMergeSetting(writer), [4, 4], "FTS5's default before any job");
  const [a, b] = ['01JOBMERGEA000000000000000', '01JOBMERGEB000000000000000'];
  begin(orgs[0]!.id, a);
  begin(orgs[1]!.id, b);
  for (let i = 0; i < 5; i++)
    batch(
      orgs[0]!.id,
      a,
      [1, 2, 3].map((k) => `MERGE-A${i}${k}`),
    );
  t.same(textMergeSetting(writer), raised, "a batch sets the jobs' setting on both text indexes");
  t.equal(segments(), 5, "one segment per batch, none merged yet (FTS5's default merges 4 of a level)");
  batch(orgs[1]!.id, b, ['MERGE-B1']);
  t.equal(segments(), 6, "the other org's batch: a segment more");
  finish(orgs[0]!.id, a, 'completed');
  t.same(textMergeSetting(writer), raised, 'kept while another job of the shard runs');
  t.equal(segments(), 1, 'the index of a job that grew its table merged into one segment at its end');
  finish(orgs[1]!.id, b, 'failed');
  t.same(textMergeSetting(writer), [4, 4], 'the default again once the last job ended (failed)');

  const c = '01JOBMERGEC000000000000000';
  begin(orgs[0]!.id, c);
  batch(orgs[0]!.id, c, ['MERGE-C1']);
  finish(orgs[0]!.id, c, 'completed');
  t.same(textMergeSetting(writer), [4, 4], 'restored after a small job');
  t.equal(segments(), 2, 'whose index is left as it is (one row of 17: no merge)');

  const d = '01JOBMERGED000000000000000';
  begin(orgs[0]!.id, d);
  batch(orgs[0]!.id, d, ['MERGE-D1']);
  t.same(textMergeSetting(writer), raised, 'raised again by the next job');
  run(ABANDON_INTERRUPTED, {});
  t.same(textMergeSetting(writer), [4, 4], 'and restored when its job is abandoned');
});
