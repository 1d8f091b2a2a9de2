import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { connect, headers } from '@nats-io/transport-node';
import { jetstream } from '@nats-io/jetstream';
import { TrackdProcess, mintKeys, startBenchNats, trackdCli } from './trackd.js';

/**
 * A soak: mixed HTTP reads, writes and scan ingest at a steady (open-loop) rate for a fixed time,
 * sampling the server's RSS and the request latency percentiles per interval, so a leak or a slow
 * drift shows as a trend between the first and the last samples.
 */

export interface SoakOptions {
  durationMs: number;
  intervalMs: number;
  /** HTTP requests per second (60% reads, 40% writes). */
  httpRate: number;
  /** Scans published per second. */
  scanRate: number;
  /** Extra trackd environment. */
  env?: Record<string, string>;
  log?: (line: string) => void;
}

export interface SoakSample {
  t_s: number;
  rss_mib: number;
  /** V8 heap in use (from /metrics): flat here and rising RSS means caches, not a leak. */
  heap_mib: number;
  requests: number;
  errors: number;
  p50_ms: number;
  p99_ms: number;
  max_ms: number;
  scans_published: number;
}

export interface SoakResult {
  options: Omit<SoakOptions, 'log'>;
  samples: SoakSample[];
  scans_published: number;
  scans_applied: number;
  errors: string[];
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0;
}

function rssMiB(pid: number): number {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  return Math.round(Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? NaN) / 102.4) / 10;
}

export async function runSoak(options: SoakOptions): Promise<SoakResult> {
  const log = options.log ?? (() => undefined);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'trackd-soak-'));
  const nats = await startBenchNats(path.join(dir, 'nats'));
  const dataDir = path.join(dir, 'data');
  const trackd = await TrackdProcess.start({ dataDir, natsUrl: nats.url, env: { HISTORY_GAP_SECONDS: '0', ...options.env } });
  const nc = await connect({ servers: nats.url });
  try {
    const org = trackdCli(dataDir, ['orgs', 'create', '--name', 'Soak']);
    const tokens = mintKeys(dataDir, org.id, 4);
    // The synchronous CLI calls blocked the loop past uWS's idle timeout: let the pooled sockets' closes land.
    await new Promise((r) => setTimeout(r, 100));
    const call = async (method: string, p: string, body?: unknown, token = tokens[0]) => {
      const res = await fetch(`${trackd.url}${p}`, {
        method,
        headers: {
          authorization: `Bearer ${token}`,
          ...(body === undefined ? {} : { 'content-type': method === 'PATCH' ? 'application/merge-patch+json' : 'application/json' }),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const text = await res.text();
      return { status: res.status, json: text ? JSON.parse(text) : undefined };
    };
    // Master data: a few locations, 100 assets with one tag each.
    const locations: string[] = [];
    for (let i = 0; i < 5; i++)
      locations.push(
        (await call('POST', '/api/v1/locations', { external_key: `SOAK-LOC-${i}`, name: `Soak location ${i}` })).json.data.external_key,
      );
    const assetIds: number[] = [];
    for (let i = 0; i < 100; i++) {
      const res = await call('POST', '/api/v1/assets', {
        external_key: `SOAK-${i}`,
        name: `Soak asset ${i}`,
        tags: [{ tag_type: 'rfid', value: `SOAK-EPC-${i}` }],
      });
      assetIds.push(res.json.data.id);
    }
    const js = jetstream(nc);
    const errors: string[] = [];
    let latencies: number[] = [];
    let requests = 0;
    let failed = 0;
    let published = 0;
    let seq = 0;
    const started = Date.now();
    const base = started - 86_400_000;
    const samples: SoakSample[] = [];
    const pending = new Set<Promise<void>>();
    const track = (p: Promise<void>) => {
      pending.add(p);
      void p.finally(() => pending.delete(p));
    };
    const oneRequest = (n: number) => {
      const token = tokens[n % tokens.length];
      const id = assetIds[n % assetIds.length];
      const kind = n % 10;
      const t0 = performance.now();
      const request =
        kind < 2
          ? call('GET', `/api/v1/assets/${id}`, undefined, token)
          : kind < 4
            ? call('GET', `/api/v1/assets?limit=20&offset=${n % 80}`, undefined, token)
            : kind < 5
              ? call('GET', '/api/v1/reports/asset-locations?limit=20', undefined, token)
              : kind < 6
                ? call('GET', `/api/v1/assets/${id}/history?limit=20`, undefined, token)
                : kind < 8
                  ? call('PATCH', `/api/v1/assets/${id}`, { description: `soak ${n}` }, token)
                  : call('POST', '/api/v1/assets', { name: `Soak extra ${n}` }, token);
      track(
        request.then(
          (res) => {
            latencies.push(performance.now() - t0);
            requests++;
            if (res.status >= 400) {
              failed++;
              if (errors.length < 20) errors.push(`${res.status} ${JSON.stringify(res.json).slice(0, 200)}`);
            }
          },
          (err: Error) => {
            failed++;
            if (errors.length < 20) errors.push(err.message);
          },
        ),
      );
    };
    const oneScan = () => {
      const i = seq++;
      const h = headers();
      const eventId = `soak-${i}`;
      h.set('Nats-Msg-Id', eventId);
      const body = JSON.stringify({
        event_id: eventId,
        observed_at: new Date(base + i).toISOString(),
        location: { external_key: locations[i % locations.length] },
        reads: [{ tag_type: 'rfid', value: `SOAK-EPC-${i % assetIds.length}` }],
      });
      track(
        js.publish(`scans.${org.id}.fixed`, body, { headers: h }).then(
          () => {
            published++;
          },
          (err: Error) => {
            if (errors.length < 20) errors.push(`publish: ${err.message}`);
          },
        ),
      );
    };

    const TICK_MS = 50;
    let http = 0;
    let scans = 0;
    let nextSample = started + options.intervalMs;
    while (Date.now() - started < options.durationMs) {
      const elapsed = (Date.now() - started) / 1000;
      while (http < elapsed * options.httpRate) oneRequest(http++);
      while (scans < elapsed * options.scanRate) {
        oneScan();
        scans++;
      }
      if (Date.now() >= nextSample) {
        const metricsText = await (await fetch(`${trackd.url}/metrics`)).text();
        const heap = Number(/^nodejs_heap_used_bytes (\d+)/m.exec(metricsText)?.[1] ?? NaN);
        const sorted = latencies.sort((a, b) => a - b);
        const sample: SoakSample = {
          t_s: Math.round((Date.now() - started) / 1000),
          rss_mib: rssMiB(trackd.child.pid as number),
          heap_mib: Math.round(heap / 104857.6) / 10,
          requests,
          errors: failed,
          p50_ms: Math.round(percentile(sorted, 50) * 10) / 10,
          p99_ms: Math.round(percentile(sorted, 99) * 10) / 10,
          max_ms: Math.round((sorted[sorted.length - 1] ?? 0) * 10) / 10,
          scans_published: published,
        };
        samples.push(sample);
        log(
          `t=${sample.t_s}s rss=${sample.rss_mib}MiB heap=${sample.heap_mib}MiB requests=${sample.requests} errors=${sample.errors} p50=${sample.p50_ms}ms p99=${sample.p99_ms}ms max=${sample.max_ms}ms scans=${sample.scans_published}`,
        );
        latencies = [];
        requests = 0;
        failed = 0;
        nextSample += options.intervalMs;
      }
      await new Promise((r) => setTimeout(r, TICK_MS));
    }
    await Promise.all([...pending]);
    // Every published scan reaches the history (HISTORY_GAP_SECONDS=0: one event per scan).
    let applied = 0;
    const deadline = Date.now() + 60_000;
    while (Date.now() < deadline) {
      applied = 0;
      for (const id of assetIds) applied += (await call('GET', `/api/v1/assets/${id}/history?limit=1`)).json.total_count;
      if (applied >= published) break;
      await new Promise((r) => setTimeout(r, 500));
    }
    const { log: _log, ...rest } = options;
    return { options: rest, samples, scans_published: published, scans_applied: applied, errors };
  } finally {
    await nc.close();
    await trackd.stop();
    await nats.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
