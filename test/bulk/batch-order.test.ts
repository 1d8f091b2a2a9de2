/**
 * A job's batches apply in the order they were sent, or not at all: a batch whose predecessor was
 * refused (its deadline passed in the shard's queue: 503) is refused too, although it was already on
 * its way, so `applied_through_row` never claims rows that were not judged (the 100,000-row bench's
 * refused upsert had judged rows 1-1,000 and 2,001-3,000 and reported applied through 3,000).
 */
import fs from 'node:fs';
import t from 'tap';
import { assetBatchCommand } from '../../src/bulk/assetRows.js';
import type { BatchArgs } from '../../src/bulk/batch.js';
import { ControlPlane } from '../../src/control/controlPlane.js';
import { scanPlacement } from '../../src/scans/placement.js';
import '../../src/shards/commandIndex.js';
import { ShardGenerations } from '../../src/shards/generations.js';
import type { CommandMessage } from '../../src/shards/mailbox.js';
import { ShardWriter } from '../../src/shards/writer.js';
import { tempDir } from '../helpers/trackd.js';

let serial = 0;
const message = (name: string, args: unknown): CommandMessage => ({ id: ++serial, name, args, now: Date.now() });

t.test('a batch sent after a refused one is refused with it', async (t) => {
  const dataDir = tempDir('trackd-batch-order-');
  t.teardown(() => fs.rmSync(dataDir, { recursive: true, force: true }));
  const control = await ControlPlane.open(dataDir);
  const org = await control.createOrg('Batches', 1);
  const writer = await ShardWriter.open(dataDir, 0, control, new ShardGenerations(), { placement: scanPlacement });
  t.teardown(() => {
    writer.close();
    control.close();
  });
  const jobId = '01JOBORDER0000000000000000';
  const begun = writer.execute(
    message('bulk.begin', {
      orgId: org.id,
      jobId,
      idempotencyKey: null,
      kind: 'assets',
      mode: 'create',
      dryRun: false,
      atomic: false,
      format: 'csv',
    }),
  );
  t.notOk(begun.error, 'the job begins');
  const batch = (from: number, processedBefore: number): BatchArgs => ({
    orgId: org.id,
    jobId,
    mode: 'create',
    dryRun: false,
    atomic: false,
    rows: [0, 1].map((i) => ({ row: from + i, body: { external_key: `ORDER-${from + i}`, name: `row ${from + i}` } })),
    errors: [],
    failedRows: 0,
    throughRow: from + 1,
    processedBefore,
  });
  t.notOk(writer.execute(message(assetBatchCommand.name, batch(1, 0))).error, 'rows 1-2 apply');
  // Rows 3-4 were refused (late); rows 5-6 were sent after them, expecting 4 processed.
  const after = writer.execute(message(assetBatchCommand.name, batch(5, 4)));
  t.match(
    after.error,
    { domain: { kind: 'unavailable', detail: /an earlier batch was not applied.*nothing was changed/ } },
    'rows 5-6 are refused until the batch before them applies (the importer sends them again then)',
  );
  const job = writer.writer.prepare('SELECT processed, created, applied_through_row FROM bulk_jobs WHERE job_id = ?').get(jobId);
  t.same(job, { processed: 2, created: 2, applied_through_row: 2 }, 'the job holds rows 1-2 only');
  const keys = writer.writer.prepare('SELECT external_key FROM assets WHERE org_id = ? ORDER BY id').pluck().all(org.id);
  t.same(keys, ['ORDER-1', 'ORDER-2'], 'and so does the data');
  t.notOk(writer.execute(message(assetBatchCommand.name, batch(3, 2))).error, 'the batch that follows what applied does apply');
  // The same batch again (its first answer was lost: a journal append that timed out, yet stored): applied once.
  t.notOk(writer.execute(message(assetBatchCommand.name, batch(3, 2))).error, 'rows 3-4 sent again: no error');
  t.same(
    writer.writer.prepare('SELECT processed, created, applied_through_row FROM bulk_jobs WHERE job_id = ?').get(jobId),
    { processed: 4, created: 4, applied_through_row: 4 },
    'and not applied twice',
  );
  t.notOk(writer.execute(message(assetBatchCommand.name, batch(5, 4))).error, 'rows 5-6, sent again, apply now');
});
