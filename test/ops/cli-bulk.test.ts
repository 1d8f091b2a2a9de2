/**
 * `trackd import` and `trackd export` (issue 16, step 5) against a running server: the job summary
 * on stdout, JSON progress lines on stderr when it is not a terminal, a key of their own revoked at
 * the end, and an export that imports back as a no-op.
 */
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { runCli, startTrackd, tempDir } from '../helpers/trackd.js';

t.test('trackd import and export', async (t) => {
  const trackd = await startTrackd(t);
  const org = await trackd.createOrg('CLI bulk');
  // Each command's time, to tell a slow machine from a stuck command (this file once ran 255 s in the suite).
  const run = async (args: string[]) => {
    const at = Date.now();
    const r = await runCli(trackd, args);
    t.comment(`trackd ${args[0]}: exit ${r.status} after ${Date.now() - at} ms`);
    return r;
  };
  const dir = tempDir('trackd-cli-bulk-');
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'assets.csv');
  let csv = 'external_key,name,tags\n';
  for (let i = 1; i <= 500; i++) csv += `CLI-${i},Asset ${i},rfid:CLI-T${i}\n`;
  fs.writeFileSync(file, `${csv}CLI-1,Again,\n`);

  const imported = await run(['import', file, '--org', String(org.id), '--kind', 'assets']);
  t.equal(imported.status, 0, imported.stderr);
  const job = JSON.parse(imported.stdout);
  t.match(job, { status: 'completed', total_rows: 501, created: 500, failed_rows: 1, tags_created: 500 });
  t.same(
    job.errors.map((e: any) => [e.row, e.field, e.error]),
    [[501, 'external_key', 'conflict']],
  );
  const progress = imported.stderr
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l));
  t.ok(progress.length > 0, 'progress as JSON lines on a pipe');
  t.match(progress[progress.length - 1], { progress: { phase: 'apply', processed_rows: 501 } }, 'the last line is the settled job');

  const out = path.join(dir, 'export.csv');
  const exported = await run(['export', '--org', String(org.id), '--kind', 'assets', '--format', 'csv', '--out', out]);
  t.equal(exported.status, 0, exported.stderr);
  t.match(JSON.parse(exported.stdout), { kind: 'assets', format: 'csv', rows: 500 });
  const again = await run(['import', out, '--org', String(org.id), '--kind', 'assets', '--mode', 'upsert']);
  t.match(JSON.parse(again.stdout), { unchanged: 500, created: 0, updated: 0, failed_rows: 0 }, 'the export imports back as a no-op');

  const dry = await run(['import', file, '--org', String(org.id), '--kind', 'assets', '--mode', 'upsert', '--dry-run']);
  t.match(JSON.parse(dry.stdout), { dry_run: true, unchanged: 500, failed_rows: 1 });

  const keys = await trackd.cli(['keys', 'list', '--org', String(org.id)]);
  t.ok(
    keys.filter((k: any) => k.name.startsWith('cli ')).every((k: any) => k.revoked_at !== null),
    'the keys the commands minted are revoked',
  );

  for (const [args, message] of [
    [['import', file, '--org', String(org.id), '--kind', 'tags'], /--kind must be assets or locations/],
    [['import', path.join(dir, 'missing.csv'), '--org', String(org.id), '--kind', 'assets'], /does not exist/],
    [['import', file, '--org', '999', '--kind', 'assets'], /organization 999 does not exist/],
    [['export', '--org', String(org.id), '--kind', 'assets'], /--out FILE is required/],
  ] as [string[], RegExp][]) {
    const r = await run(args);
    t.equal(r.status, 1, `${args.join(' ')}: exit 1`);
    t.match(r.stderr, message);
  }
});
