import t from 'tap';
import { checkScenarios, runTinyBench } from './helpers/bench.js';

const INGEST_SCENARIOS = ['ingest-field', 'ingest-single', 'drain-reads', 'ingest-raw', 'mix'];

t.test('npm run bench (tiny) measures ingest against raw JetStream and SQLite ceilings, and the mix', async (t) => {
  const { code, stderr, output } = await runTinyBench(t, INGEST_SCENARIOS);
  t.equal(code, 0, `bench exits 0 (stderr: ${stderr.slice(-1500)})`);
  t.same(
    output.scenarios.map((s) => s.name),
    INGEST_SCENARIOS,
    'every selected scenario is reported, in order',
  );
  checkScenarios(t, output.scenarios, ['ingest-single', 'ingest-raw']);
  const measured = output.scenarios.filter((s) => s.status === 'measured');
  if (measured.length > 0) t.ok(output.dataset.historyRows > 0, 'history was seeded through the ingest path');
  const ceilings = new Map(measured.map((s) => [s.name, (s as { ceiling?: { name: string } }).ceiling?.name]));
  if (ceilings.has('ingest-single')) t.equal(ceilings.get('ingest-single'), 'jetstream-consume');
  if (ceilings.has('ingest-raw')) t.equal(ceilings.get('ingest-raw'), 'sqlite-insert');
});
