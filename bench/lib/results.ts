import type { Figure, Scenario, ScenarioRun } from './scenario.js';
import { round } from './loadSpec.js';

export interface Target {
  name: string;
  value: number;
  goal: number;
  /** 'min': value >= goal; 'max': value <= goal. */
  direction: 'min' | 'max';
  met: boolean;
}

export interface ScenarioResult {
  name: string;
  title: string;
  kind: string;
  unit: string;
  status: 'measured' | 'unavailable' | 'failed';
  reason?: string;
  rate?: number;
  p50_ms?: number;
  p99_ms?: number;
  max_ms?: number;
  ceiling?: { name: string; rate: number };
  ratio_to_ceiling?: number;
  baseline_rate?: number;
  baseline_p99_ms?: number;
  ratio_to_baseline?: number;
  in_process_rate?: number;
  ratio_to_in_process?: number;
  /** Rate and p99 with HTTP_THREADS=1 in the same run, and the default layout's rate over it. */
  single_thread_rate?: number;
  single_thread_p99_ms?: number;
  ratio_to_single_thread?: number;
  extra?: Record<string, number>;
  targets?: Target[];
  runs?: ScenarioRun[];
}

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const n = sorted.length;
  if (n === 0) return NaN;
  return n % 2 === 1 ? sorted[(n - 1) / 2]! : (sorted[n / 2 - 1]! + sorted[n / 2]!) / 2;
}

const medianOf = (runs: ScenarioRun[], get: (r: ScenarioRun) => number | undefined): number | undefined => {
  const values = runs.map(get).filter((v): v is number => typeof v === 'number' && Number.isFinite(v));
  return values.length === 0 ? undefined : round(median(values), 3);
};

const target = (name: string, value: number | undefined, goal: number, direction: 'min' | 'max'): Target[] =>
  value === undefined ? [] : [{ name, value, goal, direction, met: direction === 'min' ? value >= goal : value <= goal }];

/** Medians over the runs; every ratio is taken within a run (same-run pairs), then the median of those. */
export function summarizeScenario(
  scenario: Scenario,
  runs: ScenarioRun[],
  extraTargets: (r: ScenarioResult) => Target[] = () => [],
): ScenarioResult {
  const result: ScenarioResult = {
    name: scenario.name,
    title: scenario.title,
    kind: scenario.kind,
    unit: scenario.unit,
    status: 'measured',
    rate: medianOf(runs, (r) => r.trackd.rate),
    p50_ms: medianOf(runs, (r) => r.trackd.p50),
    p99_ms: medianOf(runs, (r) => r.trackd.p99),
    max_ms: medianOf(runs, (r) => r.trackd.max),
  };
  const ceiling = runs[0]?.ceiling;
  if (ceiling !== undefined) {
    result.ceiling = { name: ceiling.name, rate: medianOf(runs, (r) => r.ceiling?.rate) ?? 0 };
    result.ratio_to_ceiling = medianOf(runs, (r) => (r.ceiling ? r.trackd.rate / r.ceiling.rate : undefined));
  }
  result.baseline_rate = medianOf(runs, (r) => r.baseline?.rate);
  result.baseline_p99_ms = medianOf(runs, (r) => r.baseline?.p99);
  result.ratio_to_baseline = medianOf(runs, (r) => (r.baseline ? r.trackd.rate / r.baseline.rate : undefined));
  result.in_process_rate = medianOf(runs, (r) => r.inProcessRate);
  result.ratio_to_in_process = medianOf(runs, (r) => (r.inProcessRate ? r.trackd.rate / r.inProcessRate : undefined));
  result.single_thread_rate = medianOf(runs, (r) => r.singleThread?.rate);
  result.single_thread_p99_ms = medianOf(runs, (r) => r.singleThread?.p99);
  result.ratio_to_single_thread = medianOf(runs, (r) => (r.singleThread ? r.trackd.rate / r.singleThread.rate : undefined));
  const extraNames = new Set(runs.flatMap((r) => Object.keys(r.extra ?? {})));
  if (extraNames.size > 0) {
    result.extra = {};
    for (const name of extraNames) result.extra[name] = medianOf(runs, (r) => r.extra?.[name]) ?? NaN;
  }
  if (scenario.kind === 'read' && scenario.name !== 'report-any-offset') {
    result.targets = [
      ...target('rate >= 3x fastify baseline', result.ratio_to_baseline, 3, 'min'),
      ...target('rate >= 60% of in-process', result.ratio_to_in_process, 0.6, 'min'),
      ...target('p99 <= 5 ms', result.p99_ms, 5, 'max'),
    ];
  } else result.targets = [];
  result.targets.push(...extraTargets(result));
  result.runs = runs;
  return result;
}

export function figureOf(load: { rate: number; latency: { p50: number; p99: number; max: number }; requests: number }): Figure {
  return { rate: load.rate, p50: load.latency.p50, p99: load.latency.p99, max: load.latency.max, count: load.requests };
}

const fmt = (v: number | undefined, digits = 0): string =>
  v === undefined || !Number.isFinite(v)
    ? '-'
    : v.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });
const ratio = (v: number | undefined): string => (v === undefined ? '-' : `${v.toFixed(2)}x`);

/** The short table printed on stdout (and pasted into the README). */
export function table(results: ScenarioResult[], ceilings: Record<string, { rate: number; unit: string }>): string {
  const header = [
    'scenario',
    'rate',
    'unit',
    'p50 ms',
    'p99 ms',
    'max ms',
    'vs ceiling',
    'vs fastify',
    'vs in-process',
    'vs 1 thread',
    'targets',
  ];
  const rows: string[][] = [header];
  for (const r of results) {
    if (r.status !== 'measured') {
      rows.push([r.name, r.status, '', '', '', '', '', '', '', '', r.reason ?? '']);
      continue;
    }
    const met = r.targets ?? [];
    rows.push([
      r.name,
      fmt(r.rate),
      r.unit,
      fmt(r.p50_ms, 2),
      fmt(r.p99_ms, 2),
      fmt(r.max_ms, 1),
      r.ceiling ? `${ratio(r.ratio_to_ceiling)} ${r.ceiling.name}` : '-',
      ratio(r.ratio_to_baseline),
      ratio(r.ratio_to_in_process),
      ratio(r.ratio_to_single_thread),
      met.length === 0 ? '-' : `${met.filter((t) => t.met).length}/${met.length}`,
    ]);
  }
  const widths = header.map((_, i) => Math.max(...rows.map((row) => (row[i] ?? '').length)));
  const line = (row: string[]) => `| ${row.map((c, i) => (c ?? '').padEnd(widths[i] ?? 0)).join(' | ')} |`;
  const out = [line(rows[0] ?? []), `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`, ...rows.slice(1).map(line)];
  const ceilingText = Object.entries(ceilings).map(([name, c]) => `${name}: ${fmt(c.rate)} ${c.unit}`);
  return `${out.join('\n')}\n\nceilings (medians): ${ceilingText.join('; ')}`;
}
