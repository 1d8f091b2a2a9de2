type Labels = Record<string, string | number>;

const BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];

function labelText(labels: Labels): string {
  const parts = Object.entries(labels).map(([k, v]) => `${k}="${String(v).replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n')}"`);
  return parts.length === 0 ? '' : `{${parts.join(',')}}`;
}

interface Family {
  type: 'counter' | 'gauge';
  help: string;
  values: Map<string, number>;
}

interface Histogram {
  help: string;
  series: Map<string, { labels: Labels; counts: number[]; sum: number; count: number }>;
}

/** A small Prometheus text-format registry: counters, gauges (also computed on scrape) and histograms. */
export class Metrics {
  private readonly families = new Map<string, Family>();
  private readonly histograms = new Map<string, Histogram>();
  private readonly collectors: (() => void)[] = [];

  private family(name: string, type: 'counter' | 'gauge', help: string): Family {
    let f = this.families.get(name);
    if (f === undefined) this.families.set(name, (f = { type, help, values: new Map() }));
    return f;
  }

  inc(name: string, help: string, labels: Labels = {}, by = 1): void {
    const f = this.family(name, 'counter', help);
    const key = labelText(labels);
    f.values.set(key, (f.values.get(key) ?? 0) + by);
  }

  set(name: string, help: string, labels: Labels, value: number): void {
    this.family(name, 'gauge', help).values.set(labelText(labels), value);
  }

  /** Runs before every scrape; use it to set gauges computed from live state. */
  onCollect(fn: () => void): void {
    this.collectors.push(fn);
  }

  observe(name: string, help: string, labels: Labels, seconds: number): void {
    let h = this.histograms.get(name);
    if (h === undefined) this.histograms.set(name, (h = { help, series: new Map() }));
    const key = labelText(labels);
    let s = h.series.get(key);
    if (s === undefined) h.series.set(key, (s = { labels, counts: new Array(BUCKETS.length).fill(0), sum: 0, count: 0 }));
    for (let i = 0; i < BUCKETS.length; i++) if (seconds <= BUCKETS[i]) s.counts[i]++;
    s.sum += seconds;
    s.count++;
  }

  render(): string {
    for (const fn of this.collectors) fn();
    const lines: string[] = [];
    for (const [name, f] of this.families) {
      lines.push(`# HELP ${name} ${f.help}`, `# TYPE ${name} ${f.type}`);
      for (const [labels, v] of f.values) lines.push(`${name}${labels} ${v}`);
    }
    for (const [name, h] of this.histograms) {
      lines.push(`# HELP ${name} ${h.help}`, `# TYPE ${name} histogram`);
      for (const s of h.series.values()) {
        for (let i = 0; i < BUCKETS.length; i++) lines.push(`${name}_bucket${labelText({ ...s.labels, le: BUCKETS[i] })} ${s.counts[i]}`);
        lines.push(`${name}_bucket${labelText({ ...s.labels, le: '+Inf' })} ${s.count}`);
        lines.push(`${name}_sum${labelText(s.labels)} ${s.sum}`, `${name}_count${labelText(s.labels)} ${s.count}`);
      }
    }
    return `${lines.join('\n')}\n`;
  }
}
