import { constants, monitorEventLoopDelay, PerformanceObserver } from 'node:perf_hooks';
import type { Metrics } from './metrics.js';

/** Process memory on every scrape: RSS beside the V8 heap tells a leak from a growing page cache. */
export function collectProcessMetrics(metrics: Metrics, options: { wholeProcess: boolean } = { wholeProcess: true }): void {
  metrics.onCollect(() => {
    const m = process.memoryUsage();
    // RSS is the process's; the heap figures are this thread's isolate (summed over threads on scrape).
    if (options.wholeProcess) metrics.set('process_resident_memory_bytes', 'Resident set size of the trackd process', {}, m.rss);
    metrics.set('nodejs_heap_used_bytes', 'V8 heap in use', {}, m.heapUsed);
    metrics.set('nodejs_heap_total_bytes', 'V8 heap reserved', {}, m.heapTotal);
    metrics.set(
      'nodejs_external_memory_bytes',
      'Memory of C++ objects bound to JS (buffers, SQLite, uWS)',
      {},
      m.external + m.arrayBuffers,
    );
  });
}

export interface LoopClock {
  eventLoopUtilization(): { active: number };
}

/**
 * Seconds each thread's event loop has been busy (not waiting for I/O) since it started: the
 * difference of two scrapes over the wall time between them is the share of a core the thread used,
 * per thread (main: the scan consumer; http-N; shard-N).
 */
export function collectThreadBusy(metrics: Metrics, threads: () => [string, LoopClock][]): void {
  metrics.onCollect(() => {
    for (const [thread, clock] of threads()) {
      metrics.counter('trackd_thread_busy_seconds_total', "Time the thread's event loop was busy since it started", { thread }).value =
        clock.eventLoopUtilization().active / 1000;
    }
  });
}

const GC_KINDS: Record<number, string> = {
  [constants.NODE_PERFORMANCE_GC_MINOR]: 'minor',
  [constants.NODE_PERFORMANCE_GC_MAJOR]: 'major',
  [constants.NODE_PERFORMANCE_GC_INCREMENTAL]: 'incremental',
  [constants.NODE_PERFORMANCE_GC_WEAKCB]: 'weakcb',
};

/**
 * Event-loop lag and garbage collection of one thread under prom-client's standard names
 * (`nodejs_eventloop_lag_*_seconds`, `nodejs_gc_duration_seconds{kind}`), so existing Node dashboards
 * read them. Lag is per thread (a `thread` label: one busy thread must not hide behind idle ones) and
 * covers the time since the previous scrape; GC durations sum over threads like every histogram.
 * Returns the function that stops both observers.
 */
export function collectLoopAndGc(metrics: Metrics, thread: string): () => void {
  const resolutionMs = 10;
  const lag = monitorEventLoopDelay({ resolution: resolutionMs });
  lag.enable();
  const gc = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      const kind = GC_KINDS[(entry as { detail?: { kind?: number } }).detail?.kind ?? -1] ?? 'other';
      metrics.observe('nodejs_gc_duration_seconds', 'Garbage collection pauses by kind', { kind }, entry.duration / 1000);
    }
  });
  gc.observe({ entryTypes: ['gc'] });
  metrics.onCollect(() => {
    // The histogram holds the nanoseconds between samples, the sampling interval included: lag is what
    // exceeds it. NaN (no sample yet) would be invalid Prometheus text.
    const seconds = (ns: number) => (Number.isFinite(ns) ? Math.max(0, ns / 1e9 - resolutionMs / 1000) : 0);
    const labels = { thread };
    metrics.set('nodejs_eventloop_lag_mean_seconds', 'Mean event-loop delay since the last scrape', labels, seconds(lag.mean));
    metrics.set('nodejs_eventloop_lag_p50_seconds', 'Median event-loop delay since the last scrape', labels, seconds(lag.percentile(50)));
    metrics.set(
      'nodejs_eventloop_lag_p99_seconds',
      '99th percentile event-loop delay since the last scrape',
      labels,
      seconds(lag.percentile(99)),
    );
    metrics.set('nodejs_eventloop_lag_max_seconds', 'Longest event-loop delay since the last scrape', labels, seconds(lag.max));
    lag.reset();
  });
  return () => {
    lag.disable();
    gc.disconnect();
  };
}
