/**
 * The text index of `q` (src/masterdata/textIndex.ts) never misses a row `q` matches: the code
 * points it cannot answer for are recomputed from this Node's lowercase and this SQLite's trigram
 * fold; its queries are checked by hand; and over random texts and q of the characters where the
 * two foldings differ, every row the exact test (substringMatch) matches is among the index's
 * candidates, on a shard file migrated for real.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import fc from 'fast-check';
import t from 'tap';
import { shardMigrations } from '../../migrations/shard/index.js';
import { addLowerFunction, substringMatch } from '../../src/masterdata/filters.js';
import { textIndexQuery, UNFOLDED_PATTERN } from '../../src/masterdata/textIndex.js';
import { migrate, openDatabase } from '../../src/storage/sqlite.js';

/** The trigram tokenizer's fold of every code point (what `c c c` indexes as), read back at once. */
function trigramFold(): (c: string) => string {
  const db = new Database(':memory:');
  db.exec("CREATE VIRTUAL TABLE f USING fts5(x, tokenize = 'trigram', content = '', contentless_delete = 1, detail = 'full')");
  db.exec("CREATE VIRTUAL TABLE fv USING fts5vocab(f, 'instance')");
  const insert = db.prepare('INSERT INTO f (rowid, x) VALUES (?, ?)');
  db.transaction(() => {
    for (let cp = 0; cp <= 0x10ffff; cp++) if (cp < 0xd800 || cp > 0xdfff) insert.run(cp, String.fromCodePoint(cp).repeat(3));
  })();
  const folds = new Map<number, string>();
  for (const row of db.prepare('SELECT term, doc FROM fv').iterate() as Iterable<{ term: string; doc: number }>) {
    folds.set(row.doc, String.fromCodePoint(row.term.codePointAt(0)!));
  }
  db.close();
  return (c) => folds.get(c.codePointAt(0)!)!;
}

t.test('the code points the index cannot answer for, recomputed', async (t) => {
  const fold = trigramFold();
  const unfolded = new Set<number>();
  for (let cp = 0; cp <= 0x10ffff; cp++) {
    if (cp >= 0xd800 && cp <= 0xdfff) continue;
    const c = String.fromCodePoint(cp);
    const lower = [...c.toLowerCase()];
    if (lower.length === 1 && lower[0] === c) continue;
    if (lower.length === 1 && fold(lower[0]!) === fold(c)) continue;
    // A lowercase whose first code point folds like c answers for that one; the rest cannot.
    for (const x of lower.slice(fold(lower[0]!) === fold(c) ? 1 : 0)) unfolded.add(x.codePointAt(0)!);
  }
  // Beyond ASCII, the code points F makes ASCII: migration 013 indexes them as U+FFFD, so their lowercases cannot be answered for.
  const replaced: number[] = [];
  for (let cp = 0x80; cp <= 0x10ffff; cp++) {
    if (cp >= 0xd800 && cp <= 0xdfff) continue;
    const c = String.fromCodePoint(cp);
    if (fold(c).codePointAt(0)! < 0x80) {
      replaced.push(cp);
      for (const x of c.toLowerCase()) unfolded.add(x.codePointAt(0)!);
    }
  }
  t.same(replaced, [0x17f, 0x212a], 'the code points beyond ASCII that fold into ASCII are the two migration 013 indexes as U+FFFD');
  const named: number[] = [];
  for (let cp = 0; cp <= 0x10ffff; cp++)
    if (!(cp >= 0xd800 && cp <= 0xdfff) && UNFOLDED_PATTERN.test(String.fromCodePoint(cp))) named.push(cp);
  t.same(
    named.map((n) => n.toString(16)),
    [...unfolded].sort((a, b) => a - b).map((n) => n.toString(16)),
    'UNFOLDED names exactly the code points JavaScript lowercases into and the trigram fold does not match',
  );
  t.same(['Σ', 'σ', 'ς'].map(fold), ['σ', 'σ', 'σ'], "sigma's lowercase depends on its context: both forms fold as the capital");
  t.same([...'AZaz09 %_"'].map(fold), [...'azaz09 %_"'], 'ASCII folds to its lowercase');
});

t.test('queries of the index', async (t) => {
  const exact = (match: string) => ({ match, exact: true });
  const candidates = (match: string) => ({ match, exact: false });
  const cases: [string, { match: string; exact: boolean } | undefined][] = [
    ['ab', undefined],
    ['abc', exact('"abc"')],
    ['Pallet', exact('"Pallet"')],
    ['a"bc', exact('"a""bc"')],
    ['50%_x', exact('"50%_x"')],
    ['Mobile', exact('"Mobile"')],
    ['tab\there', undefined],
    ['ÉCOLE', candidates('"école"')],
    ['ÀÉ', undefined],
    // "i" is what U+0130 lowercases into, "k" what U+212A does: a non-ASCII q is asked for around them.
    ['Évian', undefined],
    ['Übersicht', candidates('"übers"')],
    ['Kölner Dom', candidates('"ölner dom"')],
  ];
  for (const [q, want] of cases) t.same(textIndexQuery(q), want, JSON.stringify(q));
});

/** Texts and q of the code points where JavaScript's lowercase and the trigram fold part ways. */
const ALPHABET = [
  ...'aAeEiIkKlsS xé',
  'É',
  'İ',
  'ı',
  '\u0307',
  '\u212a',
  'ſ',
  'Σ',
  'σ',
  'ς',
  '\u13a0',
  '\uab70',
  'Ꞵ',
  'ꞵ',
  '\u{10400}',
  '\u{10428}',
];
const textOf = (min: number, max: number) =>
  fc.array(fc.constantFrom(...ALPHABET), { minLength: min, maxLength: max }).map((cs) => cs.join(''));

t.test('every row the exact test matches is a candidate of the index', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'text-index-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'shard.sqlite');
  await migrate(file, shardMigrations);
  const db = openDatabase(file);
  t.teardown(() => db.close());
  addLowerFunction(db);
  const insert = db.prepare(
    'INSERT INTO assets (id, org_id, external_key, name, description, valid_from, created_at, updated_at) VALUES (?, 1, ?, ?, ?, 0, 0, 0)',
  );
  const tag = db.prepare("INSERT INTO tags (id, org_id, tag_type, value, asset_id, created_at) VALUES (?, 1, 'rfid', ?, ?, 0)");
  const texts = fc.sample(fc.tuple(textOf(0, 12), textOf(1, 12), textOf(0, 12), textOf(0, 12)), { numRuns: 400, seed: 13 });
  db.transaction(() =>
    texts.forEach(([name, key, description, value], i) => {
      insert.run(i + 1, `${key}${i}`, name, description === '' ? null : description);
      if (value !== '') tag.run(i + 1, `${value}#${i}`, i + 1);
    }),
  )();
  // A stretch of a row's text with its case changed: a q that matches.
  const fromRow = fc
    .tuple(fc.nat(texts.length - 1), fc.nat(3), fc.nat(12), fc.integer({ min: 3, max: 6 }), fc.boolean())
    .map(([row, field, start, length, upper]) => {
      const all = [...texts[row]![field]!];
      const cps = all.slice(start % Math.max(1, all.length - 2), (start % Math.max(1, all.length - 2)) + length);
      return cps.map((c) => (upper ? c.toUpperCase() : c.toLowerCase())).join('');
    });
  const candidates = db.prepare('SELECT rowid FROM assets_text(?)').pluck();
  let indexed = 0;
  let matched = 0;
  let exactMatched = 0;
  t.doesNotThrow(() =>
    fc.assert(
      fc.property(fc.oneof(textOf(3, 6), fromRow), (q) => {
        const query = textIndexQuery(q);
        if (query === undefined) return true;
        indexed++;
        const m = substringMatch(q);
        const exact = db
          .prepare(
            `SELECT a.id FROM assets a WHERE ${m.sql('a.name')} OR ${m.sql('a.external_key')} OR ${m.sql('a.description')}
               OR EXISTS (SELECT 1 FROM tags t WHERE t.asset_id = a.id AND t.deleted_at IS NULL AND ${m.sql('t.value')})
             ORDER BY a.id`,
          )
          .pluck()
          .all(m.value, m.value, m.value, m.value) as number[];
        if (exact.length > 0) matched++;
        const rows = candidates.all(query.match) as number[];
        if (query.exact && exact.length > 0) exactMatched++;
        if (query.exact && JSON.stringify([...rows].sort((a, b) => a - b)) !== JSON.stringify(exact))
          throw new Error(`q ${JSON.stringify(q)} (${query.match}): the index gave ${JSON.stringify(rows)}, LIKE ${JSON.stringify(exact)}`);
        const found = new Set(rows);
        const missed = exact.filter((id) => !found.has(id));
        if (missed.length > 0)
          throw new Error(`q ${JSON.stringify(q)} (${query.match}) missed ${JSON.stringify(missed.map((id) => texts[id - 1]))}`);
        return true;
      }),
      { numRuns: 3000, seed: 1313 },
    ),
  );
  t.ok(indexed > 700 && matched > 300, `the index answered most q (${indexed}), and many matched rows (${matched})`);
  t.ok(exactMatched > 100, `ASCII q that matched rows, answered exactly by the index (${exactMatched})`);
});
