/**
 * Entered and left along the location tree (events/tree.ts) against a naive computation: for random
 * trees and random pairs of locations, entered = the chain of `to` minus the chain of `from`, left =
 * the chain of `from` minus the chain of `to` (a chain: a location and its ancestors), in walking order.
 */
import fc from 'fast-check';
import t from 'tap';
import { enteredAndLeft, type NodeRef } from '../../src/events/tree.js';

/** Root first, the node itself last. */
function chainOf(parents: (number | null)[], node: number): NodeRef[] {
  const out: NodeRef[] = [];
  for (let n: number | null = node; n !== null; n = parents[n]!) out.push({ id: n + 1, external_key: `L${n}` });
  return out.reverse();
}

/** Several roots allowed: parent of node i is null or a node before it. */
const forest = fc
  .integer({ min: 1, max: 40 })
  .chain((size) =>
    fc.tuple(
      ...Array.from({ length: size }, (_, i) => (i === 0 ? fc.constant(null) : fc.option(fc.integer({ min: 0, max: i - 1 }), { freq: 6 }))),
    ),
  )
  .chain((parents) =>
    fc.record({
      parents: fc.constant(parents as (number | null)[]),
      from: fc.integer({ min: 0, max: parents.length - 1 }),
      to: fc.integer({ min: 0, max: parents.length - 1 }),
    }),
  );

t.test('entered and left equal the naive set differences of the two chains, in walking order', (t) => {
  fc.assert(
    fc.property(forest, ({ parents, from, to }) => {
      const fromChain = chainOf(parents, from);
      const toChain = chainOf(parents, to);
      const fromIds = new Set(fromChain.map((n) => n.id));
      const toIds = new Set(toChain.map((n) => n.id));
      const naiveEntered = toChain.filter((n) => !fromIds.has(n.id));
      const naiveLeft = fromChain.filter((n) => !toIds.has(n.id)).reverse();
      const got = enteredAndLeft(fromChain, toChain);
      t.same(got.entered, naiveEntered);
      t.same(got.left, naiveLeft);
      return JSON.stringify(got) === JSON.stringify({ entered: naiveEntered, left: naiveLeft });
    }),
    { numRuns: 500 },
  );
  t.end();
});

t.test('the examples of the issue', (t) => {
  const [site, a, b, r1, r2, r3] = ['SITE', 'A', 'B', 'R1', 'R2', 'R3'].map((key, i) => ({ id: i + 1, external_key: key }));
  t.same(enteredAndLeft([site!, a!, r1!], [site!, a!, r2!]), { entered: [r2], left: [r1] }, 'two rooms of A: A neither entered nor left');
  t.same(enteredAndLeft([], [site!, a!, r1!]), { entered: [site, a, r1], left: [] }, 'first placement enters the whole chain');
  t.same(enteredAndLeft([site!, a!, r1!], [site!, b!, r3!]), { entered: [b, r3], left: [r1, a] }, 'to another building');
  t.same(enteredAndLeft([site!, a!, r1!], [site!, a!]), { entered: [], left: [r1] }, 'from a room to its building');
  t.end();
});
