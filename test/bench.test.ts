import t from 'tap';
import { checkScenarios, runTinyBench } from './helpers/bench.js';

const HTTP_SCENARIOS = [
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
];

t.test('npm run bench (tiny) measures every HTTP scenario against its ceilings and writes latest-style JSON', async (t) => {
  const { code, stdout, stderr, output } = await runTinyBench(t, HTTP_SCENARIOS);
  t.equal(code, 0, `bench exits 0 (stderr: ${stderr.slice(-1500)})`);
  t.equal(output.dataset.size, 'tiny');
  t.ok(output.machine.cpus >= 1 && output.machine.node.startsWith('v'), 'machine facts recorded');
  t.not(output.versions['better-sqlite3'], 'missing', 'dependency versions recorded');
  t.ok(output.ceilings.fixed_body.rate > 0, 'the fixed-body ceiling was measured in the same run');
  t.same(
    output.scenarios.map((s) => s.name),
    HTTP_SCENARIOS,
    'every selected scenario is reported, in order',
  );
  checkScenarios(t, output.scenarios);
  t.ok(
    output.scenarios.some((s) => s.status === 'measured'),
    'at least one scenario was measured',
  );
  t.match(stdout, /\| scenario/, 'a table is printed on stdout');
  for (const s of output.scenarios.filter((s) => s.kind === 'read' && s.status === 'measured')) {
    const scaling = (s as { ratio_to_single_thread?: number }).ratio_to_single_thread;
    t.ok(typeof scaling === 'number' && scaling > 0, `${s.name}: measured again with HTTP_THREADS=1 in the same run (${scaling}x)`);
  }
});
