/**
 * The benchmark and the soak run outside `npm test` (`npm run bench`, `npm run soak`); this runs
 * both in their tiny modes so that neither can rot: every scenario is measured or says why not,
 * and the soak loses no scan.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { checkScenarios, runTinyBench } from '../helpers/bench.js';
import { ROOT, tempDir } from '../helpers/trackd.js';

const SCENARIOS = [
  'orgs-me',
  'asset-by-id',
  'asset-by-id-uncached',
  'asset-list',
  'report',
  'report-by-location',
  'report-any-offset',
  'history',
  'tree-ancestors',
  'tree-descendants',
  'create-patch',
  'ingest-field',
  'ingest-single',
  'drain-reads',
  'ingest-raw',
  'mix',
];

t.test('npm run bench (tiny) measures every scenario against ceilings of the same run and writes latest-style JSON', async (t) => {
  const { code, stdout, stderr, output } = await runTinyBench(t, SCENARIOS);
  t.equal(code, 0, `bench exits 0 (stderr: ${stderr.slice(-1500)})`);
  t.equal(output.dataset.size, 'tiny');
  t.ok(output.machine.cpus >= 1 && output.machine.node.startsWith('v'), 'machine facts recorded');
  t.not(output.versions['better-sqlite3'], 'missing', 'dependency versions recorded');
  t.ok(output.ceilings.fixed_body.rate > 0, 'the fixed-body ceiling was measured in the same run');
  t.same(
    output.scenarios.map((s) => s.name),
    SCENARIOS,
    'every selected scenario is reported, in order',
  );
  checkScenarios(t, output.scenarios, ['ingest-single', 'ingest-raw']);
  t.match(stdout, /\| scenario/, 'a table is printed on stdout');
  const measured = output.scenarios.filter((s) => s.status === 'measured');
  t.ok(measured.length > 0, 'at least one scenario was measured');
  for (const s of measured.filter((s) => s.kind === 'read')) {
    const scaling = (s as { ratio_to_single_thread?: number }).ratio_to_single_thread;
    t.ok(typeof scaling === 'number' && scaling > 0, `${s.name}: measured again with HTTP_THREADS=1 in the same run (${scaling}x)`);
  }
  const ceilings = new Map(measured.map((s) => [s.name, (s as { ceiling?: { name: string } }).ceiling?.name]));
  if (ceilings.has('ingest-single')) t.equal(ceilings.get('ingest-single'), 'jetstream-consume');
  if (ceilings.has('ingest-raw')) t.equal(ceilings.get('ingest-raw'), 'sqlite-insert');
  if (measured.some((s) => s.kind !== 'read')) t.ok(output.dataset.historyRows > 0, 'history was seeded through the ingest path');
});

t.test('npm run soak (tiny): mixed reads, writes and ingest; every scan published is applied, no request fails', async (t) => {
  const dir = tempDir('trackd-soak-test-');
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const out = path.join(dir, 'soak.json');
  const args = [
    path.join(ROOT, 'dist', 'bench', 'soak.js'),
    '--minutes',
    '0.1',
    '--interval',
    '2',
    '--http-rate',
    '60',
    '--scan-rate',
    '60',
    '--out',
    out,
  ];
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  t.equal(code, 0, `soak exits 0 (stderr: ${stderr.slice(-1500)})`);
  const result = JSON.parse(fs.readFileSync(out, 'utf8'));
  t.ok(result.samples.length >= 2, `${result.samples.length} samples`);
  t.same(result.errors, [], 'no request or publish failed');
  t.ok(result.scans_published > 0, `${result.scans_published} scans published`);
  t.equal(result.scans_applied, result.scans_published, 'every scan applied');
  t.ok(
    result.samples.every((s: { requests: number }) => s.requests > 0),
    'requests completed in every interval',
  );
});
