import fs from 'node:fs';
import path from 'node:path';
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
  const lines = fs.readFileSync(file, 'utf8').split('\n').filter((l) => l.trim() !== '');
  const reads: CorpusRead[] = [];
  for (const line of lines) {
    const body = JSON.parse(line.slice(line.indexOf('\t') + 1));
    for (const tag of body.tags) reads.push({ reader: body.rfidReaderName, epc: tag.epc, at: Math.floor(tag.timeStampOfRead / 1000), capturePoint: tag.capturePointName });
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
