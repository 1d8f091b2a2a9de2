import type { LoadResult, LoadSpec, RequestTemplate } from './loadSpec.js';
import { runJsonProcess, writeSpec } from './processes.js';
import type { BenchContext, Figure } from './scenario.js';
import { figureOf } from './results.js';

/** Runs the load generator (its own process) against `url`. */
export async function loadFigure(ctx: BenchContext, url: string, requests: RequestTemplate[], durationSeconds = ctx.options.durationSeconds): Promise<Figure & { notOk: number; unexpected: Record<string, number> }> {
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
