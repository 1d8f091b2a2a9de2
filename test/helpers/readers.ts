import fs from 'node:fs';
import path from 'node:path';
import { seed } from './masterdata.js';
import { ROOT, type Trackd } from './trackd.js';

/** The CS463 capture shipped with the tests (2,521 messages from two readers). */
export const CS463_CORPUS = path.join(ROOT, 'test', 'fixtures', 'cs463.tsv');

export interface CorpusRead {
  reader: string;
  epc: string;
  /** timeStampOfRead truncated to milliseconds. */
  at: number;
  capturePoint: string;
}

/** Every tag read of a capture in file (arrival) order. */
export function corpusReads(file = CS463_CORPUS): { messages: number; reads: CorpusRead[] } {
  const lines = fs
    .readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '');
  const reads: CorpusRead[] = [];
  for (const line of lines) {
    const body = JSON.parse(line.slice(line.indexOf('\t') + 1));
    for (const tag of body.tags)
      reads.push({
        reader: body.rfidReaderName,
        epc: tag.epc,
        at: Math.floor(tag.timeStampOfRead / 1000),
        capturePoint: tag.capturePointName,
      });
  }
  return { messages: lines.length, reads };
}

export interface ExpectedVisit {
  location: string;
  start: number;
  last: number;
  count: number;
}

/**
 * The visits operations.md section 3 implies for one asset's reads in arrival order: a read at or
 * after the latest one extends the current visit when at its location within the gap, else starts
 * one; a late read extends the visit it falls in (the latest one starting at or before it) when that
 * visit is at its location and within the gap, else adds its own event.
 */
export function expectedVisits(reads: { at: number; location: string }[], gapMs: number): ExpectedVisit[] {
  const visits: ExpectedVisit[] = [];
  let current: ExpectedVisit | undefined;
  for (const { at, location } of reads) {
    if (current === undefined || at >= current.last) {
      if (current !== undefined && current.location === location && at - current.last <= gapMs) {
        current.last = at;
        current.count++;
      } else {
        current = { location, start: at, last: at, count: 1 };
        visits.push(current);
      }
      continue;
    }
    let fallsIn: ExpectedVisit | undefined;
    for (const v of visits) if (v.start <= at && (fallsIn === undefined || v.start >= fallsIn.start)) fallsIn = v;
    if (fallsIn !== undefined && fallsIn.location === location && at - fallsIn.last <= gapMs) {
      fallsIn.last = Math.max(fallsIn.last, at);
      fallsIn.count++;
    } else visits.push({ location, start: at, last: at, count: 1 });
  }
  return visits.sort((a, b) => a.start - b.start);
}

/** The sum of every sample of a Prometheus metric whose labels contain `labelText` (e.g. `stream="READERS"`). */
export async function metricSum(trackd: Trackd, name: string, labelText = ''): Promise<number> {
  const res = await trackd.request('GET', '/metrics');
  let sum = 0;
  for (const line of res.text.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    const labels = line.startsWith(`${name}{`) ? line.slice(name.length, line.lastIndexOf('}') + 1) : '';
    if (labels.includes(labelText)) sum += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return sum;
}

const GAP_MS = 300_000;
// Three capture points are location external_keys; the fourth is a tag on a location with another key.
export const LOCATION_BY_CAPTURE_POINT: Record<string, string> = {
  'cs463-212-1': 'cs463-212-1',
  'cs463-212-2': 'cs463-212-2',
  'cs463-214-1': 'cs463-214-1',
  'cs463-214-2': 'DOCK-DOOR-7',
};

const assetKey = (epc: string) => `EPC-${epc}`;

interface Expectation {
  location: string;
  lastSeen: number;
  visits: ExpectedVisit[];
}

/** The corpus seeded into an org: what the file implies per EPC, and how to read and compare trackd's view. */
export class CorpusWorld {
  readonly corpus = corpusReads();
  readonly epcs = [...new Set(this.corpus.reads.map((r) => r.epc))].sort();
  readonly expected = new Map<string, Expectation>();
  private assetIds: Record<string, number> = {};
  private locationKeyById = new Map<number, string>();

  constructor(
    private readonly trackd: Trackd,
    private readonly token: string,
  ) {
    const byEpc = new Map<string, { at: number; location: string }[]>();
    for (const r of this.corpus.reads) {
      const list = byEpc.get(r.epc) ?? [];
      list.push({ at: r.at, location: LOCATION_BY_CAPTURE_POINT[r.capturePoint]! });
      byEpc.set(r.epc, list);
    }
    for (const [epc, reads] of byEpc) {
      const latest = reads.reduce((a, b) => (b.at > a.at ? b : a));
      if (reads.some((r) => r.at === latest.at && r.location !== latest.location))
        throw new Error(`corpus: ${epc} has two locations at its latest instant`);
      this.expected.set(epc, { location: latest.location, lastSeen: latest.at, visits: expectedVisits(reads, GAP_MS) });
    }
  }

  /** Creates the 4 capture-point locations and one asset per EPC (tag rfid/EPC) through the REST API. */
  async seed(adminToken: string): Promise<void> {
    const seeded = await seed(this.trackd, adminToken, {
      locations: Object.entries(LOCATION_BY_CAPTURE_POINT).map(([capturePoint, key]) => ({
        external_key: key,
        tags: key === capturePoint ? [] : [`barcode:${capturePoint}`],
      })),
      assets: this.epcs.map((epc) => ({ external_key: assetKey(epc), tags: [`rfid:${epc}`] })),
    });
    this.assetIds = seeded.assets;
    this.locationKeyById = new Map(Object.entries(seeded.locations).map(([key, id]) => [id, key]));
  }

  private async allPages(url: string): Promise<any[]> {
    const rows: any[] = [];
    for (let offset = 0; ; offset += 200) {
      const res = await this.trackd.request('GET', `${url}${url.includes('?') ? '&' : '?'}limit=200&offset=${offset}`, {
        token: this.token,
      });
      if (res.status !== 200) throw new Error(`GET ${url} ${res.status}: ${res.text}`);
      rows.push(...res.json.data);
      if (rows.length >= res.json.total_count || res.json.data.length === 0) return rows;
    }
  }

  /** The report and every asset's history, as comparable plain data. */
  async snapshot(): Promise<{ report: any[]; history: Record<string, any[]> }> {
    const report = await this.allPages('/api/v1/reports/asset-locations?sort=asset_external_key');
    const pages = await Promise.all(
      this.epcs.map((epc) => this.allPages(`/api/v1/assets/${this.assetIds[assetKey(epc)]}/history?sort=event_observed_at`)),
    );
    const history: Record<string, any[]> = {};
    for (const [i, epc] of this.epcs.entries()) history[epc] = pages[i]!;
    return { report, history };
  }

  /** Per EPC, where trackd's view differs from what the file implies (empty when it matches). */
  mismatches(view: { report: any[]; history: Record<string, any[]> }): { report: string[]; history: string[] } {
    const out = { report: [] as string[], history: [] as string[] };
    for (const epc of this.epcs) {
      const want = this.expected.get(epc)!;
      const row = view.report.find((r) => r.asset_external_key === assetKey(epc));
      const got = row === undefined ? undefined : { location: row.location_external_key, lastSeen: row.asset_last_seen };
      const wanted = { location: want.location, lastSeen: new Date(want.lastSeen).toISOString() };
      if (JSON.stringify(got) !== JSON.stringify(wanted))
        out.report.push(`${epc}: got ${JSON.stringify(got)}, want ${JSON.stringify(wanted)}`);
      const visits = view.history[epc]!.map((h) => ({
        location: this.locationKeyById.get(h.location_id),
        start: Date.parse(h.event_observed_at),
        last: Date.parse(h.last_seen_at),
        count: h.read_count,
      }));
      if (JSON.stringify(visits) !== JSON.stringify(want.visits))
        out.history.push(`${epc}: ${visits.length} visits, want ${want.visits.length}`);
    }
    return out;
  }

  visitCount(): number {
    return [...this.expected.values()].reduce((n, e) => n + e.visits.length, 0);
  }
}
