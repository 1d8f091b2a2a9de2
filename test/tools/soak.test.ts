/**
 * The soak runs outside `npm test` (`npm run soak`); this runs it in its tiny mode so that it cannot
 * rot: mixed load for a few seconds, and no scan lost.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { uncovered } from '../helpers/bench.js';
import { ROOT, tempDir } from '../helpers/trackd.js';

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
  const child = spawn(process.execPath, args, { env: uncovered(), stdio: ['ignore', 'pipe', 'pipe'] });
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
