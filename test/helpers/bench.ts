import type { Test } from 'tap';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { ROOT, tempDir, type Teardown } from './trackd.js';

export interface BenchScenario {
  name: string;
  kind: string;
  status: string;
  reason?: string;
  rate?: number;
  p50_ms?: number;
  p99_ms?: number;
  max_ms?: number;
  ratio_to_ceiling?: number;
  targets?: unknown[];
}

export interface BenchOutput {
  machine: { cpus: number; node: string };
  versions: Record<string, string>;
  dataset: { size: string; assets: { count: number }; historyRows: number };
  ceilings: Record<string, { rate: number }>;
  scenarios: BenchScenario[];
}

/**
 * The environment for a load tool: under `npm run coverage` the load it makes would be instrumented
 * too (block counters double its CPU) and add no line the functional tests do not cover.
 */
export function uncovered(): NodeJS.ProcessEnv {
  const { NODE_V8_COVERAGE: _, ...env } = process.env;
  return env;
}

/**
 * Runs `npm run bench` in tiny mode (seconds, one run) for some scenarios, the comparison figures
 * (fastify, in-process, one HTTP thread) for `compare` only; the JSON goes to a temp file.
 */
export async function runTinyBench(
  t: Teardown,
  only: string[],
  compare: string[],
): Promise<{ code: number | null; stdout: string; stderr: string; output: BenchOutput }> {
  const dir = tempDir('trackd-bench-test-');
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const out = path.join(dir, 'latest.json');
  const args = [
    path.join(ROOT, 'dist', 'bench', 'run.js'),
    '--size',
    'tiny',
    '--runs',
    '1',
    '--duration',
    '0.25',
    '--warmup',
    '0',
    '--keys',
    '2',
    '--connections',
    '16',
    '--generator',
    'autocannon',
    '--only',
    only.join(','),
    '--compare',
    compare.join(','),
    '--out',
    out,
  ];
  // Its own process group, so that trackd, nats-server, the baseline and the load generators it
  // started go down with it even when this test is cut short.
  const child = spawn(process.execPath, args, { env: uncovered(), stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  const killGroup = () => {
    if (child.exitCode === null && child.signalCode === null) {
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  };
  process.once('exit', killGroup);
  t.teardown(killGroup);
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  const output = fs.existsSync(out)
    ? (JSON.parse(fs.readFileSync(out, 'utf8')) as BenchOutput)
    : ({ scenarios: [] } as unknown as BenchOutput);
  return { code, stdout, stderr, output };
}

/** Every measured scenario carries numbers; skipped ones say why; none failed. */
export function checkScenarios(t: Test, scenarios: BenchScenario[], latencyFree: string[] = [], ceilingFree: string[] = []): void {
  for (const s of scenarios) {
    t.not(s.status, 'failed', `${s.name} did not fail (${s.reason ?? ''})`);
    if (s.status === 'unavailable') {
      t.match(s.reason, /^not available yet/, `${s.name} says why it skipped`);
      continue;
    }
    const fields = (
      latencyFree.includes(s.name)
        ? (['rate', 'ratio_to_ceiling'] as const)
        : (['rate', 'p50_ms', 'p99_ms', 'max_ms', 'ratio_to_ceiling'] as const)
    ).filter((f) => f !== 'ratio_to_ceiling' || !ceilingFree.includes(s.name));
    for (const field of fields) t.ok(typeof s[field] === 'number' && Number.isFinite(s[field]), `${s.name}.${field} is a number`);
    t.ok((s.rate as number) > 0, `${s.name} measured a positive rate`);
    t.ok(Array.isArray(s.targets), `${s.name} lists its targets`);
  }
}
