import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { ROOT, tempDir } from './helpers/trackd.js';

interface Output {
  machine: { cpus: number; node: string };
  versions: Record<string, string>;
  dataset: { size: string; assets: { count: number } };
  ceilings: Record<string, { rate: number }>;
  scenarios: { name: string; status: string; reason?: string; rate?: number; p50_ms?: number; p99_ms?: number; max_ms?: number; ratio_to_ceiling?: number; targets?: unknown[] }[];
}

const SCENARIOS = ['orgs-me', 'asset-by-id', 'asset-list', 'report', 'report-by-location', 'report-any-offset', 'history', 'tree-ancestors', 'tree-descendants', 'create-patch'];

t.test('npm run bench in tiny mode writes latest-style JSON with every available scenario measured', async (t) => {
  const dir = tempDir('trackd-bench-test-');
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const out = path.join(dir, 'latest.json');
  const args = [path.join(ROOT, 'dist', 'bench', 'run.js'), '--size', 'tiny', '--runs', '1', '--duration', '0.5', '--warmup', '0', '--keys', '2', '--connections', '16', '--out', out];
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  t.equal(code, 0, `bench exits 0 (stderr: ${stderr.slice(-1500)})`);

  const result = JSON.parse(fs.readFileSync(out, 'utf8')) as Output;
  t.equal(result.dataset.size, 'tiny');
  t.ok(result.machine.cpus >= 1 && result.machine.node.startsWith('v'), 'machine facts recorded');
  t.not(result.versions['better-sqlite3'], 'missing', 'dependency versions recorded');
  t.ok(result.ceilings.fixed_body.rate > 0, 'the fixed-body ceiling was measured in the same run');
  t.same(result.scenarios.map((s) => s.name), SCENARIOS, 'every scenario is reported, in order');
  for (const s of result.scenarios) {
    t.not(s.status, 'failed', `${s.name} did not fail (${s.reason ?? ''})`);
    if (s.status === 'unavailable') {
      t.match(s.reason, /^not available yet/, `${s.name} says why it skipped`);
      continue;
    }
    for (const field of ['rate', 'p50_ms', 'p99_ms', 'max_ms', 'ratio_to_ceiling'] as const) {
      t.ok(typeof s[field] === 'number' && Number.isFinite(s[field]), `${s.name}.${field} is a number`);
    }
    t.ok((s.rate as number) > 0, `${s.name} served requests`);
    t.ok(Array.isArray(s.targets), `${s.name} lists its targets`);
  }
  t.ok(result.scenarios.some((s) => s.status === 'measured'), 'at least one scenario was measured');
  t.match(stdout, /\| scenario/, 'a table is printed on stdout');
});
