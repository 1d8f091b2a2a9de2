/**
 * Diagnostics (TRACKD_PAUSE_TRACE=dir, bench runs): one JSON-lines file per thread with what can
 * stop that thread, to tell the causes of a slow scan batch apart: its garbage collections
 * (`gc`), the late turns of its event loop (`late`), per second and around each traced span the
 * thread's own CPU time and its time runnable but waiting for a core (Linux schedstat of the
 * calling thread: `cpu_ms`, `wait_ms`). Off, each call costs a comparison.
 */
import fs from 'node:fs';
import path from 'node:path';
import v8 from 'node:v8';
import { PerformanceObserver, performance } from 'node:perf_hooks';

const dir = process.env.TRACKD_PAUSE_TRACE || undefined;
const LATE_CHECK_MS = 5;
const LATE_REPORT_MS = 15;

let lines: string[] | undefined;
let file = '';

const wall = () => performance.timeOrigin + performance.now();
const untraced = () => {};

/** [on-CPU ns, runnable-waiting ns] of the calling thread so far; zeros where schedstat is missing. */
function schedstat(): [number, number] {
  try {
    const [run, wait] = fs.readFileSync('/proc/thread-self/schedstat', 'utf8').split(' ');
    return [Number(run), Number(wait)];
  } catch {
    return [0, 0];
  }
}

/** The calling thread's CPU and wait since `from`, in ms. */
function since(from: [number, number]): { cpu_ms: number; wait_ms: number } {
  const now = schedstat();
  return { cpu_ms: Math.round((now[0] - from[0]) / 1e4) / 100, wait_ms: Math.round((now[1] - from[1]) / 1e4) / 100 };
}

/** Starts tracing the calling thread (once) when TRACKD_PAUSE_TRACE names a directory. */
export function tracePauses(thread: string): void {
  if (dir === undefined || lines !== undefined) return;
  const out: string[] = [];
  lines = out;
  file = path.join(dir, `${thread}-${process.pid}.jsonl`);
  const push = (kind: string, at: number, fields: object) => out.push(JSON.stringify({ k: kind, at: Math.round(at), ...fields }));
  push('tid', wall(), { tid: fs.readlinkSync('/proc/thread-self').split('/').at(-1) });
  new PerformanceObserver((list) => {
    for (const e of list.getEntries())
      push('gc', performance.timeOrigin + e.startTime, {
        ms: +e.duration.toFixed(2),
        kind: (e as unknown as { detail?: { kind?: number } }).detail?.kind,
      });
  }).observe({ entryTypes: ['gc'] });
  let last = wall();
  let lateFrom = schedstat();
  setInterval(() => {
    const now = wall();
    const gap = now - last;
    if (gap > LATE_CHECK_MS + LATE_REPORT_MS) push('late', last, { ms: Math.round(gap - LATE_CHECK_MS), ...since(lateFrom) });
    lateFrom = schedstat();
    last = now;
  }, LATE_CHECK_MS).unref();
  let secondFrom = schedstat();
  setInterval(() => {
    const heap = v8.getHeapStatistics();
    push('sec', wall(), {
      ...since(secondFrom),
      heap_mb: Math.round(heap.used_heap_size / 1048576),
      heap_total_mb: Math.round(heap.total_heap_size / 1048576),
      external_mb: Math.round(heap.external_memory / 1048576),
    });
    secondFrom = schedstat();
  }, 1000).unref();
  setInterval(flushTrace, 500).unref();
  process.on('exit', flushTrace);
}

function flushTrace(): void {
  if (lines === undefined || lines.length === 0) return;
  fs.appendFileSync(file, `${lines.join('\n')}\n`);
  lines.length = 0;
}

/** Starts a span of this thread: the returned function ends it, recording `fields` beside its times. */
export function traceSpan(kind: string): (fields?: Record<string, unknown>) => void {
  const out = lines;
  if (out === undefined) return untraced;
  const start = wall();
  const from = schedstat();
  return (fields) =>
    out.push(JSON.stringify({ k: kind, at: Math.round(start), ms: +(wall() - start).toFixed(2), ...since(from), ...fields }));
}

/** One line of this thread's trace, stamped now. */
export function traceLine(kind: string, fields: Record<string, unknown>): void {
  lines?.push(JSON.stringify({ k: kind, at: Math.round(wall()), ...fields }));
}

export const pauseTraceOn = dir !== undefined;
