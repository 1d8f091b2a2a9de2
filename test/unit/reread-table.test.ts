/**
 * A reading thread's table of re-reads (src/scans/rereadTable.ts) against a Map: after any sequence
 * of sets, deletes and prune sweeps, on a table small enough that probes wrap around its end and it
 * grows, it holds exactly the Map's entries with the Map's figures.
 */
import fc from 'fast-check';
import t from 'tap';
import { RereadTable } from '../../src/scans/rereadTable.js';
import { spreadIds } from '../helpers/spreadIds.js';

interface Entry {
  seq: number;
  visitId: number;
  lastSeenAt: number;
  readCount: number;
}

type Op =
  | { kind: 'set'; id: number; visitId: number; readCount: number }
  | { kind: 'delete'; id: number }
  | { kind: 'prune'; through: number; slots: number };

const opOver = (ids: readonly number[]): fc.Arbitrary<Op> =>
  fc.oneof(
    {
      weight: 6,
      arbitrary: fc.record({
        kind: fc.constant('set' as const),
        id: fc.constantFrom(...ids),
        visitId: fc.integer({ min: 1, max: 5 }),
        readCount: fc.integer({ min: 1, max: 2 ** 40 }),
      }),
    },
    { weight: 2, arbitrary: fc.record({ kind: fc.constant('delete' as const), id: fc.constantFrom(...ids) }) },
    {
      weight: 1,
      arbitrary: fc.record({
        kind: fc.constant('prune' as const),
        through: fc.integer({ min: 0, max: 1_000 }),
        slots: fc.integer({ min: 1, max: 64 }),
      }),
    },
  );

/** The table's entries for every id the Map could hold, read back through find(). */
function contents(table: RereadTable, ids: readonly number[]): Map<number, Entry> {
  const out = new Map<number, Entry>();
  for (const id of ids) {
    const slot = table.find(id);
    if (slot >= 0)
      out.set(id, {
        seq: table.seqAt(slot),
        visitId: table.visitAt(slot),
        lastSeenAt: table.lastSeenAt(slot),
        readCount: table.readCountAt(slot),
      });
  }
  return out;
}

for (const { ids, bits, what } of [
  { ids: spreadIds(400, 7), bits: 2, what: '400 ids from 4 slots: probes wrap and the table doubles many times' },
  {
    ids: spreadIds(12, 11),
    bits: 4,
    what: '12 ids in 16 slots (three quarters full, never grown): deletions shift entries across the end',
  },
])
  t.test(`sets, deletes and whole prune sweeps leave exactly the entries of a Map (${what})`, async (t) => {
    const run = fc.check(
      fc.property(fc.array(opOver(ids), { maxLength: 600 }), (ops) => {
        const table = new RereadTable(bits);
        const want = new Map<number, Entry>();
        let seq = 0;
        for (const o of ops) {
          if (o.kind === 'set') {
            seq++;
            const e = { seq, visitId: o.visitId, lastSeenAt: 1_700_000_000_000 + seq, readCount: o.readCount };
            table.set(o.id, e.seq, e.visitId, e.lastSeenAt, e.readCount);
            want.set(o.id, e);
          } else if (o.kind === 'delete') {
            if (table.delete(o.id) !== want.delete(o.id)) return false;
          } else {
            // A whole sweep, in slices of `slots`: every entry at or below `through` goes.
            for (let from = 0; from >= 0; ) from = table.prune(from, o.slots, o.through);
            // A deletion may shift an entry back across the end, behind the sweep: a second sweep finds it.
            for (let from = 0; from >= 0; ) from = table.prune(from, o.slots, o.through);
            for (const [id, e] of want) if (e.seq <= o.through) want.delete(id);
          }
          if (table.size !== want.size) return false;
        }
        const got = [...contents(table, ids)].sort((a, b) => a[0] - b[0]);
        return JSON.stringify(got) === JSON.stringify([...want].sort((a, b) => a[0] - b[0]));
      }),
      { numRuns: 2000 },
    );
    t.same(
      { failed: run.failed, runs: run.numRuns, counterexample: run.counterexample },
      { failed: false, runs: 2000, counterexample: null },
      '2,000 random sequences agreed with the Map',
    );
  });

t.test('a million consecutive asset ids: found, replaced and deleted like a Map', async (t) => {
  const table = new RereadTable();
  for (let id = 1; id <= 1_000_000; id++) table.set(id, id, id % 7, id * 2, 1);
  t.equal(table.size, 1_000_000);
  table.set(500_000, 2_000_000, 3, 42, 9);
  t.equal(table.size, 1_000_000, 'replacing keeps one entry');
  const slot = table.find(500_000);
  t.same([table.seqAt(slot), table.visitAt(slot), table.lastSeenAt(slot), table.readCountAt(slot)], [2_000_000, 3, 42, 9]);
  let deleted = 0;
  for (let id = 2; id <= 1_000_000; id += 2) deleted += table.delete(id) ? 1 : 0;
  t.equal(deleted, 500_000);
  let found = 0;
  let wrong = 0;
  for (let id = 1; id <= 1_000_000; id++) {
    const s = table.find(id);
    if (s >= 0) found++;
    if (s >= 0 !== (id % 2 === 1)) wrong++;
  }
  t.equal(found, 500_000, 'every odd id still found');
  t.equal(wrong, 0, 'no even id found, no odd id lost');
  for (let from = 0; from >= 0; ) from = table.prune(from, 100_000, 250_000);
  for (let from = 0; from >= 0; ) from = table.prune(from, 100_000, 250_000);
  t.equal(table.size, 375_000, 'a sweep drops the entries at or below its seq');
  t.equal(table.find(1), -1);
  t.not(table.find(250_001), -1);
});

t.test('a cluster across the table’s end: each deletion keeps the others found, whatever the order', async (t) => {
  // The table's own placement (Fibonacci hashing, 4 bits: 16 slots), to pick ids whose probes wrap.
  const home = (id: number) => Math.imul(id, 0x9e3779b1) >>> 28;
  const homedAt = (slot: number, n: number) => {
    const out: number[] = [];
    for (let id = 1; out.length < n; id++) if (home(id) === slot) out.push(id);
    return out;
  };
  // Three ids at home in the last slot, two in the first: they fill slots 15, 0, 1, 2, 3.
  const ids = [...homedAt(15, 3), ...homedAt(0, 2)];
  const orders = [ids, [...ids].reverse(), [ids[1]!, ids[3]!, ids[0]!, ids[4]!, ids[2]!], [ids[3]!, ids[0]!, ids[2]!, ids[1]!, ids[4]!]];
  let lost = 0;
  for (const order of orders) {
    const table = new RereadTable(4);
    for (const id of ids) table.set(id, id, 1, 1, 1);
    const left = new Set(ids);
    for (const id of order) {
      table.delete(id);
      left.delete(id);
      for (const other of ids) if (table.find(other) >= 0 !== left.has(other)) lost++;
    }
    t.equal(table.size, 0);
  }
  t.equal(lost, 0, 'every entry found until its own deletion, in every order');
  // A sweep that deletes the entry in the last slot shifts one back across the end, behind it: a second sweep finds it.
  const table = new RereadTable(4);
  for (const [i, id] of ids.entries()) table.set(id, i + 1, 1, 1, 1);
  for (let sweep = 0; sweep < 2; sweep++) for (let from = 0; from >= 0; ) from = table.prune(from, 5, 5);
  t.equal(table.size, 0, 'two sweeps drop every entry at or below their seq');
});
