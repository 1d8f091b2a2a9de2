/**
 * The benchmark runs outside `npm test` (`npm run bench`); this runs it in its tiny mode so that it
 * cannot rot: every scenario is measured or says why not.
 */
import t from 'tap';
import { checkScenarios, runTinyBench } from '../helpers/bench.js';

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
  'events-sse-latency',
  'events-ws-latency',
  'events-fanout-1000',
  'webhooks-1',
  'webhooks-4',
  'import',
  'export',
];

// The comparisons (a fastify baseline, the in-process ceiling, a restart on one HTTP thread) cost
// seconds each; one read scenario runs them all (with an environment of its own, so the restarts too).
const COMPARED = ['asset-by-id-uncached'];

// About 100 s at load 3-5; 244 and 255 s in two suite runs at load 15-25 (past the suite's 240 s),
// since every scenario runs its load for its time and the ceilings with it.
t.setTimeout(480_000);

t.test('npm run bench (tiny) measures every scenario against ceilings of the same run and writes latest-style JSON', async (t) => {
  const { code, stdout, stderr, output } = await runTinyBench(t, SCENARIOS, COMPARED);
  t.equal(code, 0, `bench exits 0 (stderr: ${stderr.slice(-1500)})`);
  t.equal(output.dataset.size, 'tiny');
  t.ok(output.machine.cpus >= 1 && output.machine.node.startsWith('v'), 'machine facts recorded');
  t.not(output.versions['better-sqlite3'], 'missing', 'dependency versions recorded');
  t.ok(output.ceilings.fixed_body!.rate > 0, 'the fixed-body ceiling was measured in the same run');
  t.same(
    output.scenarios.map((s) => s.name),
    SCENARIOS,
    'every selected scenario is reported, in order',
  );
  // A latency of events has no rate ceiling: it is read beside the same run's publish-to-visible probes (extra).
  checkScenarios(
    t,
    output.scenarios,
    ['ingest-single', 'ingest-raw', 'webhooks-1', 'webhooks-4', 'export'],
    ['events-sse-latency', 'events-ws-latency'],
  );
  t.match(stdout, /\| scenario/, 'a table is printed on stdout');
  const measured = output.scenarios.filter((s) => s.status === 'measured');
  t.ok(measured.length > 0, 'at least one scenario was measured');
  for (const s of measured.filter((s) => s.kind === 'read')) {
    const figures = s as { ratio_to_single_thread?: number; ratio_to_baseline?: number; ratio_to_in_process?: number };
    const ratios = [figures.ratio_to_single_thread, figures.ratio_to_baseline, figures.ratio_to_in_process];
    if (COMPARED.includes(s.name)) {
      t.ok(
        ratios.every((r) => typeof r === 'number' && r > 0),
        `${s.name}: against fastify, in process and on HTTP_THREADS=1 in the same run (${ratios.join(', ')})`,
      );
    } else t.same(ratios, [undefined, undefined, undefined], `${s.name}: no comparison asked for, none made`);
  }
  const ceilings = new Map(measured.map((s) => [s.name, (s as { ceiling?: { name: string } }).ceiling?.name]));
  if (ceilings.has('ingest-single')) t.equal(ceilings.get('ingest-single'), 'jetstream-consume');
  if (ceilings.has('ingest-raw')) t.equal(ceilings.get('ingest-raw'), 'sqlite-insert');
  if (ceilings.has('import')) t.equal(ceilings.get('import'), 'sqlite-insert');
  if (ceilings.has('export')) t.equal(ceilings.get('export'), 'select-to-dev-null');
  const imported = output.scenarios.find((s) => s.name === 'import') as { extra?: Record<string, number> } | undefined;
  if (imported?.extra !== undefined)
    t.same([imported.extra.upsert_changes, imported.extra.upsert_events], [0, 0], 'the upsert re-import changed nothing');
  if (measured.some((s) => s.kind !== 'read')) t.ok(output.dataset.historyRows > 0, 'history was seeded through the ingest path');
});
