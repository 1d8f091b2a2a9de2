import t from 'tap';
import { runSoak } from '../bench/lib/soak.js';

/** The short soak (bench/soak.ts runs the long one): memory and latency stay flat within generous bounds. */
t.test('a 30-second soak of mixed reads, writes and scan ingest keeps memory and latency flat', async (t) => {
  const result = await runSoak({ durationMs: 30_000, intervalMs: 5000, httpRate: 120, scanRate: 150, log: (line) => t.comment(line) });
  const { samples } = result;
  t.ok(samples.length >= 5, `${samples.length} samples`);
  t.same(result.errors, [], 'no request or publish failed');
  t.equal(result.scans_applied, result.scans_published, `every scan applied (${result.scans_published} published)`);
  const first = samples.slice(0, 2);
  const last = samples.slice(-2);
  const peak = (xs: typeof samples, k: 'rss_mib' | 'p99_ms') => Math.max(...xs.map((s) => s[k]));
  t.ok(
    peak(last, 'rss_mib') - peak(first, 'rss_mib') < 64,
    `RSS ${peak(first, 'rss_mib')} -> ${peak(last, 'rss_mib')} MiB (bound: +64 MiB)`,
  );
  t.ok(
    peak(last, 'p99_ms') <= Math.max(5 * peak(first, 'p99_ms'), 2000),
    `p99 ${peak(first, 'p99_ms')} -> ${peak(last, 'p99_ms')} ms (bound: 5x or 2 s: the machine is shared)`,
  );
  t.ok(
    samples.every((s) => s.requests > 0),
    'requests completed in every interval',
  );
});
