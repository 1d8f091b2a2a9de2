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
