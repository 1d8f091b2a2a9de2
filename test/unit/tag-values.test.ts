/**
 * The scan writer's tag table (src/scans/tagValues.ts) against a Map: after any sequence of sets
 * (new keys and replaced ones, ids negative, zero and positive), every key set reads back the
 * Map's id and every other key reads undefined. Keys mix those kept in slots (up to MAX_SLOT_KEY
 * characters, each at most U+00FF) with those that are not (longer, or with a wider character),
 * near neighbours (one character apart, prefixes of each other, the empty key), and enough of them
 * that the table grows several times.
 */
import fc from 'fast-check';
import t from 'tap';
import { MAX_SLOT_KEY, TagValues } from '../../src/scans/tagValues.js';

const HEX = '0123456789ABCDEF';

/** EPC-like keys from a number: the field's 24 hex characters, and neighbours of them. */
const epc = (n: number) => `E280${n.toString(16).toUpperCase().padStart(20, '0')}`;

const keyArb: fc.Arbitrary<string> = fc.oneof(
  fc.integer({ min: 0, max: 400 }).map(epc),
  fc.integer({ min: 0, max: 400 }).map((n) => epc(n).slice(0, 1 + (n % 24))),
  fc.integer({ min: 0, max: 400 }).map((n) => `${epc(n)}${HEX[n % 16]}${'X'.repeat(n % 8)}`),
  fc.string({ maxLength: MAX_SLOT_KEY + 3 }),
  fc.string({ unit: 'binary', maxLength: 6 }),
  fc.constantFrom('', 'é', 'ÿÿ', 'Ā', '\u0000', 'x'.repeat(MAX_SLOT_KEY), 'x'.repeat(MAX_SLOT_KEY + 1)),
);

const idArb = fc.oneof(fc.constantFrom(-1, 0), fc.integer({ min: 1, max: 2 ** 31 - 1 }));

t.test('every key reads back what a Map holds, through growth and replacement', async (t) => {
  const run = fc.check(
    fc.property(fc.array(fc.tuple(keyArb, idArb), { maxLength: 3_000 }), fc.array(keyArb, { maxLength: 200 }), (sets, probes) => {
      const table = new TagValues();
      const model = new Map<string, number>();
      for (const [key, id] of sets) {
        table.set(key, id);
        model.set(key, id);
      }
      if (table.size !== model.size) return false;
      for (const [key, id] of model) if (table.get(key) !== id) return false;
      for (const key of probes) if (table.get(key) !== model.get(key)) return false;
      return true;
    }),
    { numRuns: 150 },
  );
  t.same(
    { failed: run.failed, runs: run.numRuns, counterexample: run.counterexample },
    { failed: false, runs: 150, counterexample: null },
    '150 random sequences agreed with the Map',
  );
});

t.test('100,000 EPCs: each found with its id, their one-character neighbours not', async (t) => {
  const table = new TagValues();
  for (let n = 0; n < 100_000; n++) table.set(epc(n * 2), n - 1);
  t.equal(table.size, 100_000);
  let wrong = 0;
  for (let n = 0; n < 100_000; n++) {
    if (table.get(epc(n * 2)) !== n - 1) wrong++;
    if (table.get(epc(n * 2 + 1)) !== undefined) wrong++;
  }
  t.equal(wrong, 0, 'no key read a wrong id');
  t.equal(table.get(epc(0).slice(0, 23)), undefined, 'a prefix of a key is another key');
  table.set(epc(10), 7);
  t.equal(table.get(epc(10)), 7, 'a replaced id reads back');
  t.equal(table.size, 100_000, 'replacing adds nothing');
});

t.test('a key is not found by a longer key it begins (a table three quarters full of their extensions)', async (t) => {
  const table = new TagValues();
  // 750 keys in the first 1,024 slots: a missing key's probe passes several, most of them its extensions.
  for (const prefix of ['E', 'F', 'G'])
    for (let c = 0; c < 250; c++) table.set(`${prefix}${String.fromCharCode(c)}`, prefix.charCodeAt(0) * 1000 + c);
  t.same(
    ['E', 'F', 'G', ''].map((key) => table.get(key)),
    [undefined, undefined, undefined, undefined],
    'the prefixes are not found',
  );
  t.equal(table.get('F\u0007'), 'F'.charCodeAt(0) * 1000 + 7, 'an extension is');
});
