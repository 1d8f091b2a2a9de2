import type { DatasetInfo } from '../dataset/sizes.js';
import type { RequestTemplate } from './loadSpec.js';
import type { TrackdProcess } from './trackd.js';

export interface BenchOptions {
  size: 'tiny' | 'small' | 'large';
  only: string[] | undefined;
  runs: number;
  durationSeconds: number;
  warmupSeconds: number;
  connections: number;
  out: string;
  /** Keep the work directory (DATA_DIR, specs) for inspection, or for a later run with `--reuse`. */
  keep: boolean;
  /** A work directory kept by an earlier run (`--keep`) whose seeded dataset this run measures again, skipping the seeding. */
  reuse?: string;
  /** Run trackd under --cpu-prof (profiles in bench/results/). */
  profile: boolean;
  /** The event latency scenarios split each event's latency into stages (trackd at LOG_LEVEL=debug; bench/lib/eventStages.ts). */
  stages: boolean;
  /** 'auto': wrk when installed, else autocannon (which takes fractional seconds, for the tiny test). */
  generator: 'auto' | 'autocannon';
  keys: number;
  /** Read scenarios that also get the fastify, in-process and one-thread figures; undefined: all. */
  compare: string[] | undefined;
  /** Rows the import scenario imports (`--bulk-rows`); undefined: the size's. */
  bulkRows?: number;
  /** ingest-field's paced latency phase at this offered rate in reads/s (`--field-rate`); undefined: half the burst's measured rate. */
  fieldRate?: number;
  /** How long ingest-field's paced latency phase publishes (`--field-seconds`); undefined: 4 x `durationSeconds`. */
  fieldSeconds?: number;
}

export interface BenchContext {
  options: BenchOptions;
  dataset: DatasetInfo;
  trackd: TrackdProcess;
  natsUrl: string;
  tokens: string[];
  workDir: string;
  /** "GET /api/v1/assets/{asset_id}" for every operation in trackd's OpenAPI document. */
  operations: Set<string>;
  request(method: string, path: string, body?: unknown): Promise<{ status: number; json: any }>;
  /** Starts trackd again (after a stop) with extra environment; `trackd` then points at the new process. */
  restartTrackd(env?: Record<string, string>): Promise<void>;
}

/** One figure of a run: a rate with its latency distribution (latencies in ms). */
export interface Figure {
  rate: number;
  /** Latencies; absent where none applies (a backlog drain has a rate, not a latency). */
  p50?: number;
  p99?: number;
  max?: number;
  count?: number;
}

/** What one run of a scenario measured; ratios are computed by the runner against the same run's ceilings. */
export interface ScenarioRun {
  trackd: Figure;
  baseline?: Figure;
  inProcessRate?: number;
  /** Named ceiling this scenario is compared with, measured in this run. */
  ceiling?: { name: string; rate: number };
  /** Further figures (e.g. publish-to-visible p99), all numbers. */
  extra?: Record<string, number>;
  /** The same load on trackd restarted with HTTP_THREADS=1, in the same run (read scenarios). */
  singleThread?: Figure;
}

interface ScenarioBase {
  name: string;
  title: string;
  /** Operations (as in `operations`) the scenario needs; missing ones make it skip itself. */
  needs: string[];
  /** Unit of `rate`: requests/s, reads/s, messages/s or rows/s (bulk jobs). */
  unit: 'req/s' | 'reads/s' | 'msgs/s' | 'rows/s';
}

/** A hot read: measured on trackd, on the fastify baseline and in-process, over the same random paths. */
export interface ReadScenario extends ScenarioBase {
  kind: 'read';
  paths(ctx: BenchContext, count: number): string[];
  /** trackd runs with this extra environment for the scenario (restarted before and after it). */
  env?: Record<string, string>;
}

/** Writes through the HTTP API: measured on trackd against the fixed-body ceiling. */
export interface WriteScenario extends ScenarioBase {
  kind: 'write';
  requests(ctx: BenchContext): RequestTemplate[];
}

/** Anything with its own procedure (ingest, the mix). */
export interface CustomScenario extends ScenarioBase {
  kind: 'custom';
  run(ctx: BenchContext, helpers: RunHelpers): Promise<ScenarioRun>;
}

export type Scenario = ReadScenario | WriteScenario | CustomScenario;

export interface RunHelpers {
  /** Runs the load generator against trackd with these templates. */
  load(requests: RequestTemplate[], durationSeconds?: number): Promise<Figure & { notOk: number }>;
  /** The fixed-body ceiling of this run (req/s). */
  fixedRate: number;
}

const pickInt = (n: number) => Math.floor(Math.random() * n);

/** `count` ids drawn uniformly at random from a contiguous range. */
export function randomIds(range: { first: number; count: number }, count: number): number[] {
  return Array.from({ length: count }, () => range.first + pickInt(range.count));
}

export function randomOf<T>(items: readonly T[], count: number): T[] {
  return Array.from({ length: count }, () => items[pickInt(items.length)]!);
}
