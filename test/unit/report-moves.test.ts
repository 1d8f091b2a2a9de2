/**
 * A scan batch's moves in the report index (OrgPositions.moveMany, the columns a batch hands it)
 * against the plain answer: after random batches of re-reads (same location, new last seen) and
 * moves (another location), the whole order, each location's order by last seen and by asset id,
 * and the location order equal sorted arrays of the model. The black-box report tests cannot see
 * an index that is wrong: the reading thread checks each page's keys against its rows and asks
 * SQLite instead (reportQuery.ts), so a wrong index is only slow there.
 */
import fc from 'fast-check';
import t from 'tap';
import { MoveColumns, OrgPositions } from '../../src/scans/reportIndex.js';

const locationKey = (locationId: number) => `L${String(locationId).padStart(3, '0')}`;
const bySeenDesc = (a: [number, number], b: [number, number]) => b[1] - a[1] || b[0] - a[0];

t.test('moveMany: every order of the organization equals the model after random batches', async (t) => {
  const move = fc.record({
    // An index into the initial positions (modulo their count).
    asset: fc.nat(),
    // Mostly re-reads at the same place, as the field workload.
    moves: fc.integer({ min: 0, max: 9 }),
    to: fc.integer({ min: 1, max: 12 }),
    later: fc.integer({ min: -50, max: 500 }),
  });
  t.doesNotThrow(
    () =>
      fc.assert(
        fc.property(
          fc.array(fc.record({ at: fc.integer({ min: 1, max: 12 }), seen: fc.integer({ min: 0, max: 1_000 }) }), {
            minLength: 1,
            maxLength: 400,
            size: 'max',
          }),
          fc.array(fc.array(move, { maxLength: 300, size: 'max' }), { minLength: 1, maxLength: 4 }),
          (initial, batches) => {
            const org = new OrgPositions(locationKey);
            // asset id -> [last seen, location]
            const model = new Map<number, [number, number]>();
            initial.forEach((p, i) => {
              org.add(i + 1, p.seen, p.at, false, `A${i + 1}`);
              model.set(i + 1, [p.seen, p.at]);
            });
            for (const batch of batches) {
              const columns = new MoveColumns();
              const moved = new Set<number>();
              for (const m of batch) {
                const asset = 1 + (m.asset % initial.length);
                const was = model.get(asset)!;
                if (moved.has(asset)) continue;
                moved.add(asset);
                const now: [number, number] = [Math.max(0, was[0] + m.later), m.moves === 0 ? m.to : was[1]];
                columns.push(asset, was[0], was[1], now[0], now[1]);
                model.set(asset, now);
              }
              org.moveMany(columns);
            }
            const all = [...model].map(([id, [seen]]) => [id, seen] as [number, number]).sort(bySeenDesc);
            const got = org.all.entries(0, all.length + 1);
            if (
              JSON.stringify(got.ids) !== JSON.stringify(all.map(([id]) => id)) ||
              JSON.stringify(got.keys) !== JSON.stringify(all.map(([, s]) => s))
            )
              throw new Error(`whole order: ${got.ids.join(',')} != ${all.map(([id]) => id).join(',')}`);
            const locations = [...new Set([...model.values()].map(([, at]) => at))].sort((a, b) => a - b);
            if (JSON.stringify([...org.byLocation.keys()].sort((a, b) => a - b)) !== JSON.stringify(locations))
              throw new Error(`locations ${[...org.byLocation.keys()].join(',')} != ${locations.join(',')}`);
            const keyOrder = org.locationsByKey.entries(0, locations.length + 1).ids;
            const wantKeyOrder = [...locations].sort((a, b) => (locationKey(b) < locationKey(a) ? -1 : 1));
            if (JSON.stringify(keyOrder) !== JSON.stringify(wantKeyOrder)) throw new Error(`location order ${keyOrder.join(',')}`);
            for (const at of locations) {
              const here = all.filter(([id]) => model.get(id)![1] === at);
              const group = org.byLocation.get(at)!;
              const seen = group.bySeen.entries(0, here.length + 1);
              if (
                JSON.stringify(seen.ids) !== JSON.stringify(here.map(([id]) => id)) ||
                JSON.stringify(seen.keys) !== JSON.stringify(here.map(([, s]) => s))
              )
                throw new Error(`location ${at} by last seen: ${seen.ids.join(',')} != ${here.map(([id]) => id).join(',')}`);
              const ids = here.map(([id]) => id).sort((a, b) => b - a);
              if (JSON.stringify(group.byId.page(0, ids.length + 1)) !== JSON.stringify(ids)) throw new Error(`location ${at} by id`);
            }
          },
        ),
        { numRuns: 300 },
      ),
    'the whole order, each location by last seen and by id, and the location order equal the model',
  );
});
