/**
 * A scan batch's report-index work alone (OrgPositions.moveMany): 1,000,000 live positions over
 * 10,000 locations, batches of 95,000 re-reads (same location, newer last_seen) and 5,000 moves to
 * another location, the shape of the large ingest-field burst. Prints one JSON line.
 *
 *   node dist/bench/probes/moveMany.js [--assets 1000000] [--locations 10000] [--batches 8]
 */
import { parseArgs } from 'node:util';
import { MoveColumns, OrgPositions } from '../../src/scans/reportIndex.js';

const { values } = parseArgs({ options: { assets: { type: 'string' }, locations: { type: 'string' }, batches: { type: 'string' } } });
const N = Number(values.assets ?? 1_000_000);
const L = Number(values.locations ?? 10_000);
const BATCHES = Number(values.batches ?? 8);
const BASE = Date.UTC(2026, 0, 1);

const org = new OrgPositions((locationId) => `L${String(locationId).padStart(6, '0')}`);
const seen = new Float64Array(N + 1);
const at = new Int32Array(N + 1);
let started = performance.now();
for (let id = 1; id <= N; id++) {
  seen[id] = BASE + ((id * 7919) % N) * 10;
  at[id] = 1 + (id % L);
  org.add(id, seen[id]!, at[id]!, false, undefined);
}
const buildMs = performance.now() - started;

let now = BASE + N * 10;
let rng = 12345;
const random = () => {
  rng = (Math.imul(rng, 1103515245) + 12345) & 0x7fffffff;
  return rng;
};
const times: number[] = [];
for (let batch = 0; batch < BATCHES; batch++) {
  const picked = new Set<number>();
  while (picked.size < 100_000) picked.add(1 + (random() % N));
  const moves = new MoveColumns();
  let k = 0;
  for (const id of picked) {
    const beforeSeen = seen[id]!;
    const beforeLocation = at[id]!;
    now += 1;
    seen[id] = now;
    if (k++ % 20 === 0) at[id] = 1 + (random() % L);
    moves.push(id, beforeSeen, beforeLocation, seen[id]!, at[id]!);
  }
  started = performance.now();
  org.moveMany(moves);
  times.push(Math.round(performance.now() - started));
}
// The index must still hold every asset once, in order.
const page = org.all.entries(0, 5);
if (org.all.size !== N || page.keys[0] !== now)
  throw new Error(`index broken: size ${org.all.size}, first key ${page.keys[0]} against ${now}`);
console.log(JSON.stringify({ assets: N, locations: L, build_ms: Math.round(buildMs), batch_ms: times }));
