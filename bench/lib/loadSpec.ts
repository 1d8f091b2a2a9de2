/** What the load generator child process is told to do, and what it reports back. */

export interface RequestTemplate {
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE';
  /** One is drawn at random per request. `{n}` in a path is replaced by a per-process counter. */
  paths: string[];
  /** Relative share of requests that use this template (default 1). */
  weight?: number;
  contentType?: string;
  /** Body text; `{n}` is replaced by a per-process counter (unique keys for creates). */
  body?: string;
  /** Sent without the Authorization header (ceiling routes). */
  anonymous?: boolean;
}

export interface LoadSpec {
  /** http://127.0.0.1:PORT */
  url: string;
  connections: number;
  durationSeconds: number;
  /** A discarded run first (JIT, statement caches, token cache, connection setup). */
  warmupSeconds: number;
  /** Bearer tokens; one is drawn at random per request. */
  tokens: string[];
  requests: RequestTemplate[];
  /** 'auto' uses wrk when installed, else autocannon. */
  generator?: 'auto' | 'autocannon';
}

export interface LatencySummary {
  p50: number;
  p99: number;
  max: number;
  mean: number;
}

export interface LoadResult {
  requests: number;
  /** Completed requests per second over the measured window. */
  rate: number;
  /** Milliseconds, from every response (not only 2xx), at sub-millisecond resolution. */
  latency: LatencySummary;
  /** Responses by status class and the first few unexpected statuses seen. */
  ok: number;
  notOk: number;
  unexpected: Record<string, number>;
  errors: number;
  timeouts: number;
  generator?: 'wrk' | 'autocannon';
}

export function summarize(samples: Float64Array, count: number): LatencySummary {
  if (count === 0) return { p50: 0, p99: 0, max: 0, mean: 0 };
  const sorted = samples.slice(0, count).sort();
  const at = (q: number) => sorted[Math.min(count - 1, Math.floor(q * count))]!;
  let sum = 0;
  for (let i = 0; i < count; i++) sum += sorted[i]!;
  return { p50: round(at(0.5)), p99: round(at(0.99)), max: round(sorted[count - 1]!), mean: round(sum / count) };
}

export const round = (x: number, digits = 3): number => Math.round(x * 10 ** digits) / 10 ** digits;
