/**
 * The scan writer's table of positions (src/scans/positionTable.ts) against a Map: after any
 * sequence of sets (positions and "no position"), deletes and trims, on a table small enough that
 * probes wrap around its end and it grows, every id reads back what the Map holds, and a trim
 * keeps exactly the number asked with only entries the Map had.
 */
import fc from 'fast-check';
import t from 'tap';
import { PositionTable, type StoredPosition } from '../../src/scans/positionTable.js';
import { spreadIds } from '../helpers/spreadIds.js';

type Op = { kind: 'set'; id: number; placed: boolean; n: number } | { kind: 'delete'; id: number } | { kind: 'trim'; keep: number };

const opOver = (ids: readonly number[]): fc.Arbitrary<Op> =>
  fc.oneof(
    {
      weight: 6,
      arbitrary: fc.record({
        kind: fc.constant('set' as const),
        id: fc.constantFrom(...ids),
        placed: fc.boolean(),
        n: fc.integer({ min: 1, max: 2 ** 40 }),
      }),
    },
    { weight: 2, arbitrary: fc.record({ kind: fc.constant('delete' as const), id: fc.constantFrom(...ids) }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant('trim' as const), keep: fc.integer({ min: 0, max: 40 }) }) },
  );

/** A position whose every field differs, from one number. */
const positionOf = (id: number, n: number): StoredPosition => ({
  assetId: id,
  orgId: (n % 5) + 1,
  locationId: n + 1,
  lastSeenAt: 1_700_000_000_000 + n,
  visitId: n + 2,
  visitStartedAt: 1_600_000_000_000 + n,
  visitReadCount: n + 3,
  visitCount: n + 4,
});

for (const { ids, bits, what } of [
  { ids: spreadIds(300, 3), bits: 2, what: '300 ids from 4 slots: probes wrap and the table doubles many times' },
  { ids: spreadIds(12, 5), bits: 4, what: '12 ids in 16 slots: deletions and trims shift entries across the end' },
])
  t.test(`sets, deletes and trims read back as a Map (${what})`, async (t) => {
    const run = fc.check(
      fc.property(fc.array(opOver(ids), { maxLength: 500 }), (ops) => {
        const table = new PositionTable(bits);
        const want = new Map<number, StoredPosition | null>();
        // Slots taken from find() with the layout then: each must still hold its id while the layout stays (apply.ts reuses them).
        const slots = new Map<number, { slot: number; layout: number }>();
        for (const o of ops) {
          if (o.kind === 'set') {
            const p = o.placed ? positionOf(o.id, o.n) : null;
            table.set(o.id, p);
            want.set(o.id, p);
          } else if (o.kind === 'delete') {
            if (table.delete(o.id) !== want.delete(o.id)) return false;
          } else {
            const before = table.size;
            table.trimTo(o.keep);
            if (table.size !== Math.min(before, o.keep)) return false;
            // What the trim dropped is the table's choice: the Map follows it.
            for (const id of [...want.keys()]) if (!table.has(id)) want.delete(id);
          }
          if (table.size !== want.size) return false;
          for (const [id, held] of slots) if (held.layout === table.layout && table.find(id) !== held.slot) return false;
          if (o.kind === 'set') slots.set(o.id, { slot: table.find(o.id), layout: table.layout });
        }
        for (const id of ids) {
          const got = table.get(id);
          const expected = want.get(id);
          if (
            expected === undefined
              ? got !== undefined
              : expected === null
                ? got !== null
                : JSON.stringify(got) !== JSON.stringify({ ...expected, stored: true })
          )
            return false;
        }
        return true;
      }),
      { numRuns: 2000 },
    );
    t.same(
      { failed: run.failed, runs: run.numRuns, counterexample: run.counterexample },
      { failed: false, runs: 2000, counterexample: null },
      '2,000 random sequences agreed with the Map',
    );
  });

t.test('a million positions: read back exactly, a trim to three quarters keeps the rest readable', async (t) => {
  const table = new PositionTable();
  for (let id = 1; id <= 1_000_000; id++) table.set(id, id % 10 === 0 ? null : positionOf(id, id));
  t.equal(table.size, 1_000_000);
  t.same(table.get(123_457), { ...positionOf(123_457, 123_457), stored: true });
  t.equal(table.get(500_000), null, 'an asset known to have no position');
  const slot = table.find(123_457);
  const p = positionOf(123_457, 123_457);
  t.same(
    [
      table.placedAt(slot),
      table.locationAt(slot),
      table.seenAt(slot),
      table.visitAt(slot),
      table.visitStartAt(slot),
      table.visitCountAt(slot),
    ],
    [true, p.locationId, p.lastSeenAt, p.visitId, p.visitStartedAt, p.visitCount],
    'the slot accessors read the same figures',
  );
  t.equal(table.placedAt(table.find(500_000)), false, 'a slot of "no position" is not placed');
  t.equal(table.get(1_000_001), undefined, 'an asset not known');
  const copy = table.get(7)!;
  copy.lastSeenAt = 1;
  t.equal(table.get(7)!.lastSeenAt, positionOf(7, 7).lastSeenAt, 'get hands out a copy');
  table.trimTo(750_000);
  t.equal(table.size, 750_000);
  let wrong = 0;
  let held = 0;
  for (let id = 1; id <= 1_000_000; id++) {
    const got = table.get(id);
    if (got === undefined) continue;
    held++;
    if (id % 10 === 0 ? got !== null : got === null || got.visitId !== id + 2 || got.lastSeenAt !== 1_700_000_000_000 + id) wrong++;
  }
  t.equal(held, 750_000, 'every entry kept is found');
  t.equal(wrong, 0, 'and holds its own figures');
});
