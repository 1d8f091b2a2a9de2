import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { ROOT } from './lib/processes.js';
import { runSoak } from './lib/soak.js';

/**
 * `node dist/bench/soak.js [--minutes 10] [--interval 30] [--http-rate 200] [--scan-rate 200] [--out FILE]`
 * Mixed HTTP reads and writes plus scan ingest at a steady rate; prints RSS and latency per interval
 * and writes bench/results/soak-latest.json. Exits 1 when a request or publish failed, a scan was not
 * applied, or (over four samples or more) RSS grew by more than 64 MiB or p99 by more than 5x (at least
 * 2 s: the machine is shared). `npm run soak`; the test suite runs a tiny one (test/tools) so it cannot rot.
 */
const USAGE = 'usage: node dist/bench/soak.js [--minutes N] [--interval S] [--http-rate R] [--scan-rate R] [--out FILE]';
const { values } = parseArgs({
  args: process.argv.slice(2),
  options: {
    minutes: { type: 'string', default: '10' },
    interval: { type: 'string', default: '30' },
    'http-rate': { type: 'string', default: '200' },
    'scan-rate': { type: 'string', default: '200' },
    out: { type: 'string', default: path.join(ROOT, 'bench', 'results', 'soak-latest.json') },
    help: { type: 'boolean' },
  },
  strict: true,
});
if (values.help) {
  process.stdout.write(`${USAGE}\n`);
  process.exit(0);
}
const number = (name: string, text: string) => {
  const n = Number(text);
  if (!Number.isFinite(n) || n <= 0) {
    process.stderr.write(`--${name} must be a positive number\n${USAGE}\n`);
    process.exit(1);
  }
  return n;
};

const result = await runSoak({
  durationMs: number('minutes', values.minutes) * 60_000,
  intervalMs: number('interval', values.interval) * 1000,
  httpRate: number('http-rate', values['http-rate']),
  scanRate: number('scan-rate', values['scan-rate']),
  log: (line) => process.stderr.write(`${line}\n`),
});
const first = result.samples[0];
const last = result.samples[result.samples.length - 1];
process.stderr.write(
  `soak: RSS ${first?.rss_mib} -> ${last?.rss_mib} MiB, heap ${first?.heap_mib} -> ${last?.heap_mib} MiB, p99 ${first?.p99_ms} -> ${last?.p99_ms} ms; scans published ${result.scans_published}, applied ${result.scans_applied}; errors ${result.errors.length}\n`,
);
fs.mkdirSync(path.dirname(values.out), { recursive: true });
fs.writeFileSync(values.out, `${JSON.stringify(result, null, 2)}\n`);
const problems: string[] = [];
if (result.errors.length > 0) problems.push(`${result.errors.length} requests or publishes failed`);
if (result.scans_applied !== result.scans_published)
  problems.push(`${result.scans_published} scans published, ${result.scans_applied} applied`);
if (result.samples.length >= 4) {
  const peak = (xs: typeof result.samples, k: 'rss_mib' | 'p99_ms') => Math.max(...xs.map((s) => s[k]));
  const [early, late] = [result.samples.slice(0, 2), result.samples.slice(-2)];
  if (peak(late, 'rss_mib') - peak(early, 'rss_mib') >= 64)
    problems.push(`RSS grew ${peak(early, 'rss_mib')} -> ${peak(late, 'rss_mib')} MiB`);
  if (peak(late, 'p99_ms') > Math.max(5 * peak(early, 'p99_ms'), 2000))
    problems.push(`p99 grew ${peak(early, 'p99_ms')} -> ${peak(late, 'p99_ms')} ms`);
}
process.stdout.write(
  `${JSON.stringify({ out: values.out, first, last, scans_published: result.scans_published, scans_applied: result.scans_applied, problems })}\n`,
);
if (problems.length > 0) process.exitCode = 1;
