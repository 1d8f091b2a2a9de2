import fs from 'node:fs';
import path from 'node:path';
import { SIZES } from '../dataset/sizes.js';
import { loadMasterData } from '../dataset/masterData.js';
import { SCENARIOS } from '../scenarios/index.js';
import type { RequestTemplate } from './loadSpec.js';
import { inProcessRate, loadFigure, trackdLoad } from './measure.js';
import { ROOT, machine, startServerProcess, versions } from './processes.js';
import { median, summarizeScenario, table, type ScenarioResult, type Target } from './results.js';
import type { BenchContext, BenchOptions, Figure, Scenario, ScenarioRun } from './scenario.js';
import { PRODUCTION_ENV, TrackdProcess, mintKeys, startBenchNats, trackdCli } from './trackd.js';
import { seedHistory } from '../dataset/history.js';
import { purgeAppliedScans, SCAN_OPERATIONS } from './ingest.js';
import { wrkAvailable } from './wrk.js';
import { markEventsRelayed, readDataset, saveDataset } from './seeded.js';

const FIXED: RequestTemplate[] = [{ method: 'GET', paths: ['/bench/fixed'], anonymous: true }];
const log = (text: string) => process.stderr.write(`[bench] ${text}\n`);

/**
 * Reads every file of `dir` once, so that the kernel's page cache holds them. At the large size a
 * reused data dir was partly out of the cache after other work (2.4 of 5.5 GiB of the shard file
 * resident), and the moves of the scan batches then waited for the disk: the shard and the
 * checkpointer blocked for 200-375 ms at a time (README, "the p99's causes found").
 */
function warmPageCache(dir: string): { bytes: number; seconds: number } {
  const started = performance.now();
  const chunk = Buffer.allocUnsafe(8 << 20);
  let bytes = 0;
  for (const name of fs.readdirSync(dir)) {
    const fd = fs.openSync(path.join(dir, name), 'r');
    try {
      for (let n = fs.readSync(fd, chunk); n > 0; n = fs.readSync(fd, chunk)) bytes += n;
    } finally {
      fs.closeSync(fd);
    }
  }
  return { bytes, seconds: Math.round((performance.now() - started) / 100) / 10 };
}

export async function runBench(options: BenchOptions, workDir: string): Promise<void> {
  const dataDir = path.join(workDir, 'data');
  const nats = await startBenchNats(path.join(workDir, 'nats'));
  const stops: (() => Promise<void>)[] = [() => nats.stop()];
  try {
    const dataset = options.reuse === undefined ? await seedMasterData(options, dataDir) : readDataset(workDir);
    if (dataset.size !== options.size) throw new Error(`--reuse ${workDir} holds the ${dataset.size} dataset, not --size ${options.size}`);
    if (options.reuse !== undefined) {
      log(`reusing the ${dataset.size} dataset seeded in ${workDir}`);
      dataset.notes.push(`--reuse: the dataset kept in ${workDir} by an earlier run, with that run's writes`);
      const purged = await purgeAppliedScans(nats.url);
      if (purged > 0) log(`purged ${purged} scan messages of earlier runs (acked by every consumer) from SCANS`);
    }
    const trackd = await TrackdProcess.start({ dataDir, natsUrl: nats.url, nodeArgs: profileArgs(options) });
    let current = trackd;
    stops.unshift(() => current.stop());
    const tokens = mintKeys(dataDir, dataset.orgId, options.keys);
    const request = async (method: string, urlPath: string, body?: unknown) => {
      const res = await fetch(`${current.url}${urlPath}`, {
        method,
        headers: {
          authorization: `Bearer ${tokens[0]}`,
          ...(body === undefined ? {} : { 'content-type': method === 'PATCH' ? 'application/merge-patch+json' : 'application/json' }),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const text = await res.text();
      let json: any;
      try {
        json = JSON.parse(text);
      } catch {
        json = undefined;
      }
      return { status: res.status, json };
    };
    const doc = (await request('GET', '/api/openapi.json')).json as { paths: Record<string, Record<string, unknown>> };
    const operations = new Set(Object.entries(doc.paths).flatMap(([p, ops]) => Object.keys(ops).map((m) => `${m.toUpperCase()} ${p}`)));
    const ctx: BenchContext = {
      options,
      dataset,
      trackd,
      natsUrl: nats.url,
      tokens,
      workDir,
      operations,
      request,
      async restartTrackd(env = {}) {
        await ctx.trackd.stop();
        ctx.trackd = current = await TrackdProcess.start({ dataDir, natsUrl: nats.url, env, nodeArgs: profileArgs(options) });
      },
    };
    if (options.reuse === undefined) {
      if (SCAN_OPERATIONS.every((op) => operations.has(op))) {
        log(`seeding ${SIZES[options.size].historyRows} history rows through the ingest path`);
        await seedHistory(ctx, SIZES[options.size]);
        log(`history seeded in ${dataset.seconds.history} s`);
      } else dataset.notes.push('no history seeded: trackd has no scan read endpoints yet');
      saveDataset(workDir, dataset);
    }
    await ctx.trackd.stop();
    const marked = markEventsRelayed(dataDir);
    log(`${marked} events written before the measured run marked relayed`);
    dataset.notes.push(`${marked} events written before the measured run marked relayed (bench/lib/seeded.ts)`);
    const warm = warmPageCache(path.join(dataDir, 'shards'));
    log(`read ${(warm.bytes / 2 ** 30).toFixed(1)} GiB of shard files in ${warm.seconds} s (page cache)`);
    dataset.notes.push(
      `the shard files (${(warm.bytes / 2 ** 30).toFixed(1)} GiB) read once before the measured run, in ${warm.seconds} s: the run starts with them in the page cache, whatever earlier work left there`,
    );
    ctx.trackd = current = await TrackdProcess.start({ dataDir, natsUrl: nats.url, nodeArgs: profileArgs(options) });

    const selected = SCENARIOS.filter((s) => options.only === undefined || options.only.includes(s.name));
    if (options.only !== undefined) {
      const unknown = options.only.filter((n) => !SCENARIOS.some((s) => s.name === n));
      if (unknown.length > 0)
        throw new Error(`unknown scenario(s) ${unknown.join(', ')}; known: ${SCENARIOS.map((s) => s.name).join(', ')}`);
    }
    const unavailable = new Map<string, string>();
    for (const s of selected) {
      const missing = s.needs.filter((op) => !operations.has(op));
      if (missing.length > 0) unavailable.set(s.name, `not available yet: trackd has no ${missing.join(', ')}`);
    }
    for (const [name, reason] of unavailable) log(`${name}: ${reason}`);

    const baseline = selected.some((s) => s.kind === 'read' && compared(options, s) && !unavailable.has(s.name))
      ? await startServerProcess('baseline/fastify.js', [dataDir])
      : undefined;
    if (baseline) stops.unshift(() => baseline.stop());

    const fixedRuns: number[] = [];
    const runs = new Map<string, ScenarioRun[]>();
    const failures = new Map<string, string>();
    for (let run = 1; run <= options.runs; run++) {
      const fixed = await loadFigure(ctx, ctx.trackd.url, FIXED);
      fixedRuns.push(fixed.rate);
      log(`run ${run}/${options.runs}: fixed-body ceiling ${fixed.rate} req/s (p99 ${fixed.p99} ms)`);
      for (const scenario of selected) {
        if (unavailable.has(scenario.name) || failures.has(scenario.name)) continue;
        try {
          const result = await runScenario(
            ctx,
            scenario,
            fixed.rate,
            baseline ? `http://127.0.0.1:${baseline.port}` : undefined,
            compared(options, scenario),
          );
          runs.set(scenario.name, [...(runs.get(scenario.name) ?? []), result]);
          log(
            `run ${run}/${options.runs}: ${scenario.name} ${result.trackd.rate} ${scenario.unit}` +
              (result.trackd.p99 === undefined ? '' : ` p99 ${result.trackd.p99} ms`) +
              (result.baseline ? `, fastify ${result.baseline.rate}` : '') +
              (result.inProcessRate ? `, in-process ${result.inProcessRate}` : ''),
          );
        } catch (err) {
          failures.set(scenario.name, (err as Error).message);
          log(`${scenario.name} failed: ${(err as Error).message}`);
        }
      }
      const measured = selected.filter((s) => s.kind === 'read' && compared(options, s) && runs.has(s.name) && !failures.has(s.name));
      // One restart per distinct environment: the plain read scenarios together, then each with an env of its own.
      await measureSingleThread(
        ctx,
        measured.filter((s) => s.kind === 'read' && s.env === undefined),
        runs,
        {},
      );
      for (const s of measured) if (s.kind === 'read' && s.env !== undefined) await measureSingleThread(ctx, [s], runs, s.env);
    }

    const results: ScenarioResult[] = selected.map((s) => {
      const reason = unavailable.get(s.name) ?? failures.get(s.name);
      if (reason !== undefined)
        return {
          name: s.name,
          title: s.title,
          kind: s.kind,
          unit: s.unit,
          status: unavailable.has(s.name) ? 'unavailable' : 'failed',
          reason,
        };
      return summarizeScenario(s, runs.get(s.name) ?? [], (r) => scenarioTargets(s, r));
    });
    const ceilings = { fixed_body: { rate: median(fixedRuns), unit: 'req/s', runs: fixedRuns } };
    const output = {
      generated_at: new Date().toISOString(),
      command: `npm run bench -- ${process.argv.slice(2).join(' ')}`.trim(),
      machine: machine(),
      versions: versions(),
      settings: {
        runs: options.runs,
        duration_s: options.durationSeconds,
        warmup_s: options.warmupSeconds,
        connections: options.connections,
        keys: options.keys,
        load_generator:
          options.generator === 'auto' && wrkAvailable()
            ? 'wrk, 1 thread (Lua: random template, path and key per request)'
            : 'autocannon (wrk not installed: figures may be bounded by the generator)',
        trackd_env: PRODUCTION_ENV,
      },
      dataset: {
        ...dataset,
        deepBranch: dataset.deepBranch.length,
        subtreeRoots: dataset.subtreeRoots.length,
        scanLocations: dataset.scanLocations.length,
      },
      ceilings,
      scenarios: results,
    };
    fs.mkdirSync(path.dirname(options.out), { recursive: true });
    fs.writeFileSync(options.out, `${JSON.stringify(output, null, 2)}\n`);
    process.stdout.write(
      `\ntrackd bench, ${options.size} dataset, medians of ${options.runs} run(s), ${options.connections} connections\n\n`,
    );
    process.stdout.write(`${table(results, ceilings)}\n\nwritten to ${options.out}\n`);
  } finally {
    for (const stop of stops) {
      try {
        await stop();
      } catch (err) {
        log(`cleanup: ${(err as Error).message}`);
      }
    }
  }
}

/** A fresh dataset's organization and master data, bulk-loaded into its shard file while trackd is stopped. */
async function seedMasterData(options: BenchOptions, dataDir: string) {
  log(`seeding the ${options.size} dataset`);
  const org = trackdCli(dataDir, ['orgs', 'create', '--name', 'Bench Org']) as { id: number };
  const dataset = await loadMasterData(dataDir, org.id, options.size, SIZES[options.size]);
  log(`master data loaded in ${dataset.seconds.masterData} s`);
  return dataset;
}

/**
 * Thread scaling: the run's read scenarios again, on trackd restarted with HTTP_THREADS=1 (one HTTP
 * thread, the shard actors and the consumer on their own threads as always), each figure filed with
 * that run's default-layout figure.
 */
async function measureSingleThread(
  ctx: BenchContext,
  scenarios: Scenario[],
  runs: Map<string, ScenarioRun[]>,
  env: Record<string, string>,
): Promise<void> {
  if (scenarios.length === 0) return;
  await ctx.restartTrackd({ ...env, HTTP_THREADS: '1' });
  try {
    for (const scenario of scenarios) {
      if (scenario.kind !== 'read') continue;
      const figure = await trackdLoad(ctx, [{ method: 'GET', paths: scenario.paths(ctx, 2_000) }]);
      checkStatuses(`${scenario.name} (1 thread)`, figure);
      const latest = runs.get(scenario.name)!.at(-1)!;
      latest.singleThread = strip(figure);
      latest.extra = { ...latest.extra, ...prefixed('single_thread_', figure.busyCores) };
      log(
        `${scenario.name} with HTTP_THREADS=1: ${figure.rate} ${scenario.unit} p99 ${figure.p99} ms (default ${latest.trackd.rate}, ${(latest.trackd.rate / figure.rate).toFixed(2)}x)`,
      );
    }
  } finally {
    await ctx.restartTrackd();
  }
}

/** `--profile`: trackd runs under --cpu-prof, profiles written to bench/results/. */
function profileArgs(options: BenchOptions): string[] {
  return options.profile ? ['--cpu-prof', `--cpu-prof-dir=${path.join(ROOT, 'bench', 'results')}`] : [];
}

/** Whether a scenario gets its comparison figures (`--compare`; the tiny test compares one, to stay short). */
const compared = (options: BenchOptions, scenario: Scenario) => options.compare === undefined || options.compare.includes(scenario.name);

async function runScenario(
  ctx: BenchContext,
  scenario: Scenario,
  fixedRate: number,
  baselineUrl: string | undefined,
  compare: boolean,
): Promise<ScenarioRun> {
  const ceiling = { name: 'fixed-body', rate: fixedRate };
  if (scenario.kind === 'read' && scenario.env !== undefined) {
    await ctx.restartTrackd(scenario.env);
    try {
      return await runScenario(ctx, { ...scenario, env: undefined }, fixedRate, baselineUrl, compare);
    } finally {
      await ctx.restartTrackd();
    }
  }
  if (scenario.kind === 'read') {
    const paths = scenario.paths(ctx, 2_000);
    const probe = await ctx.request('GET', paths[0]!);
    if (probe.status !== 200)
      throw new Error(`probe GET ${paths[0]} answered ${probe.status}: ${JSON.stringify(probe.json).slice(0, 300)}`);
    const requests: RequestTemplate[] = [{ method: 'GET', paths }];
    const trackd = await trackdLoad(ctx, requests);
    checkStatuses(scenario.name, trackd);
    const baseline = baselineUrl && compare ? await loadFigure(ctx, baselineUrl, requests) : undefined;
    if (baseline) checkStatuses(`${scenario.name} (fastify)`, baseline);
    const inProcess = compare ? await inProcessRate(ctx, paths) : undefined;
    return { trackd: strip(trackd), baseline: baseline && strip(baseline), inProcessRate: inProcess, ceiling, extra: trackd.busyCores };
  }
  if (scenario.kind === 'write') {
    const trackd = await trackdLoad(ctx, scenario.requests(ctx));
    checkStatuses(scenario.name, trackd);
    return { trackd: strip(trackd), ceiling, extra: trackd.busyCores };
  }
  let busy: Record<string, number> | undefined;
  const result = await scenario.run(ctx, {
    fixedRate,
    load: async (requests, duration) => {
      const figure = await trackdLoad(ctx, requests, duration);
      busy = figure.busyCores;
      return figure;
    },
  });
  return busy === undefined ? result : { ...result, extra: { ...result.extra, ...busy } };
}

function checkStatuses(name: string, figure: { count?: number; notOk: number; unexpected: Record<string, number> }): void {
  if (figure.notOk > 0.01 * (figure.count ?? 0))
    throw new Error(`${name}: ${figure.notOk} of ${figure.count} responses were not 2xx: ${JSON.stringify(figure.unexpected)}`);
}

const prefixed = (prefix: string, values: Record<string, number>) =>
  Object.fromEntries(Object.entries(values).map(([k, v]) => [`${prefix}${k}`, v]));

const strip = <T extends Figure>(f: T) => ({ rate: f.rate, p50: f.p50, p99: f.p99, max: f.max, count: f.count });

/** The targets beyond the common read targets (those are in summarizeScenario). */
function scenarioTargets(scenario: Scenario, r: ScenarioResult): Target[] {
  const t = (name: string, value: number | undefined, goal: number, direction: 'min' | 'max'): Target[] =>
    value === undefined ? [] : [{ name, value, goal, direction, met: direction === 'min' ? value >= goal : value <= goal }];
  switch (scenario.name) {
    case 'asset-by-id':
    case 'asset-by-id-uncached':
      return t('rate >= 40% of fixed-body ceiling', r.ratio_to_ceiling, 0.4, 'min');
    case 'ingest-field':
      return [
        ...t('>= 100,000 tag reads/s end to end', r.rate, 100_000, 'min'),
        ...t('publish-to-visible p99 <= 250 ms', r.p99_ms, 250, 'max'),
      ];
    case 'ingest-single':
      return t('>= 50% of raw JetStream consume', r.ratio_to_ceiling, 0.5, 'min');
    case 'drain-reads':
      return t('read p99 <= 50 ms while a backlog drains', r.p99_ms, 50, 'max');
    case 'mix':
      return t('p99 <= 50 ms', r.p99_ms, 50, 'max');
    case 'events-sse-latency':
    case 'events-ws-latency':
      return t('scan published to event received p99 <= 100 ms', r.p99_ms, 100, 'max');
    case 'events-fanout-1000':
      return t('read p99 <= 50 ms at the offered rate while 1,000 clients stream', r.p99_ms, 50, 'max');
    case 'webhooks-1':
    case 'webhooks-4':
      return t('>= 2,000 deliveries/s', r.rate, 2_000, 'min');
    case 'ingest-raw':
      return t('>= 50% of raw SQLite insert', r.ratio_to_ceiling, 0.5, 'min');
    case 'import':
      return [
        ...t('>= 50,000 rows/s end to end', r.rate, 50_000, 'min'),
        ...t('reads of the importing org p99 <= 50 ms', r.p99_ms, 50, 'max'),
        ...t('upsert re-import at least as fast', r.extra?.upsert_vs_import, 1, 'min'),
      ];
    case 'export':
      return [
        ...t('assets >= 200,000 rows/s', r.rate, 200_000, 'min'),
        ...t('report >= 200,000 rows/s', r.extra?.report_rows_per_s, 200_000, 'min'),
      ];
    case 'report-full-scan':
      return t('the whole report paged through in <= 60 s', r.extra?.seconds, 60, 'max');
    default:
      return [];
  }
}
