import type { LoadResult, LoadSpec, RequestTemplate } from './loadSpec.js';
import type { OpenLoopResult, OpenLoopSpec } from './openLoop.js';
import { runJsonProcess, writeSpec } from './processes.js';
import type { BenchContext, Figure } from './scenario.js';
import { figureOf } from './results.js';

/** Runs the load generator (its own process) against `url`. */
export async function loadFigure(
  ctx: BenchContext,
  url: string,
  requests: RequestTemplate[],
  durationSeconds = ctx.options.durationSeconds,
): Promise<Figure & { notOk: number; unexpected: Record<string, number> }> {
  const spec: LoadSpec = {
    url,
    connections: ctx.options.connections,
    durationSeconds,
    warmupSeconds: ctx.options.warmupSeconds,
    tokens: ctx.tokens,
    requests,
    generator: ctx.options.generator,
  };
  const result = await runJsonProcess<LoadResult>('lib/loadgen.js', [writeSpec(ctx.workDir, 'load', spec)]);
  if (result.requests === 0) throw new Error(`no response from ${url} (errors ${result.errors}, timeouts ${result.timeouts})`);
  return { ...figureOf(result), notOk: result.notOk, unexpected: result.unexpected };
}

/** The in-process ceiling: the same handlers over the same paths, in a loop, in their own process. */
export async function inProcessRate(ctx: BenchContext, paths: string[]): Promise<number> {
  const spec = { dataDir: path(ctx), token: ctx.tokens[0], paths, durationSeconds: ctx.options.durationSeconds };
  const result = await runJsonProcess<{ rate: number; bad: number }>('ceilings/inProcess.js', [writeSpec(ctx.workDir, 'inprocess', spec)]);
  if (result.bad > 0) throw new Error(`in-process ceiling: ${result.bad} calls did not answer 200`);
  return result.rate;
}

const path = (ctx: BenchContext) => ctx.trackd.env.DATA_DIR;

/** Busy seconds of each trackd thread so far (trackd_thread_busy_seconds_total), with the time read. */
export async function threadBusy(url: string): Promise<{ at: number; busy: Map<string, number> }> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const busy = new Map<string, number>();
  for (const m of text.matchAll(/^trackd_thread_busy_seconds_total\{thread="([^"]+)"\} ([\d.e+-]+)$/gm)) busy.set(m[1]!, Number(m[2]));
  return { at: performance.now(), busy };
}

/**
 * A load on trackd, with the share of a core each kind of thread was busy during it (the thread
 * profile: main = scan consumer, http = all HTTP threads together, shards = all shard actors).
 */
export async function trackdLoad(
  ctx: BenchContext,
  requests: RequestTemplate[],
  durationSeconds?: number,
): Promise<Figure & { notOk: number; unexpected: Record<string, number>; busyCores: Record<string, number> }> {
  const url = ctx.trackd.url;
  const before = await threadBusy(url);
  const figure = await loadFigure(ctx, url, requests, durationSeconds);
  const after = await threadBusy(url);
  const seconds = (after.at - before.at) / 1000;
  const busyCores: Record<string, number> = { busy_cores_main: 0, busy_cores_http: 0, busy_cores_shards: 0 };
  for (const [thread, total] of after.busy) {
    const kind = thread === 'main' ? 'busy_cores_main' : thread.startsWith('http-') ? 'busy_cores_http' : 'busy_cores_shards';
    busyCores[kind] = (busyCores[kind] ?? 0) + (total - (before.busy.get(thread) ?? 0)) / seconds;
  }
  for (const k of Object.keys(busyCores)) busyCores[k] = Math.round(busyCores[k]! * 1000) / 1000;
  return { ...figure, busyCores };
}

/** Reads offered at a fixed rate (open loop, `openLoop.ts`, its own process): latency from each request's due time. */
export async function openLoopFigure(
  ctx: BenchContext,
  requests: RequestTemplate[],
  ratePerSecond: number,
  durationSeconds = ctx.options.durationSeconds,
): Promise<Figure & { notOk: number; unexpected: Record<string, number>; sentP99: number; maxBehindMs: number }> {
  const spec: OpenLoopSpec = {
    url: ctx.trackd.url,
    connections: ctx.options.connections,
    durationSeconds,
    warmupSeconds: ctx.options.warmupSeconds,
    tokens: ctx.tokens,
    requests,
    ratePerSecond,
  };
  const result = await runJsonProcess<OpenLoopResult>('lib/openLoop.js', [writeSpec(ctx.workDir, 'open-loop', spec)]);
  if (result.requests === 0) throw new Error(`no response from ${ctx.trackd.url} (errors ${result.errors})`);
  return {
    ...figureOf(result),
    notOk: result.notOk + result.errors,
    unexpected: result.unexpected,
    sentP99: result.sent_latency.p99,
    maxBehindMs: result.max_behind_ms,
  };
}
