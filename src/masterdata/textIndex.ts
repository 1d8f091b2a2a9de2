import type { KeyedTable } from './keys.js';

/**
 * The text index of `q` (migration 013): per master-data table, an FTS5 table of trigrams,
 * `<table>_text`, one row per owner (rowid = its id) holding its name, external key, description
 * and live tag values. It answers which rows may match a `q`, so that a count or a page of a rare
 * match reads those rows instead of testing every row of the org; the exact test (`substringMatch`)
 * then runs on those rows only. So the index must never miss a match; a false candidate only costs
 * its test.
 *
 * Why it never misses: the trigram tokenizer folds case one code point at a time (F below), and a
 * row matches `q` when
 * - q is ASCII: the row's text holds q up to ASCII case (LIKE). Every code point of that stretch is
 *   ASCII, F lowercases ASCII, so F(text) holds F(q).
 * - otherwise: JavaScript's lowercase of the text holds q's. JavaScript lowercases per code point
 *   into one code point with the same F for all but the code points whose lowercase has a code point
 *   of `UNFOLDED` (U+0130 to "i" + U+0307; letters newer than SQLite's case tables, such as Cherokee
 *   or Georgian Mtavruli, which JavaScript lowercases and F leaves). A stretch of q's lowercase
 *   without those code points therefore comes from code points of the text one for one with equal
 *   F, and that stretch is what the index is asked for. (Sigma's context-dependent lowercase is
 *   either σ or ς; F gives σ for Σ, σ and ς.) test/unit/text-index.test.ts recomputes `UNFOLDED`
 *   from the running Node and SQLite, so an upgrade of either that changes it fails the suite.
 *
 * A q whose longest such stretch is shorter than 3 code points (a trigram) cannot use the index.
 */
// biome-ignore format: one code point or range per entry, as test/unit/text-index.test.ts recomputes them
// biome-ignore lint/suspicious/noMisleadingCharacterClass: U+0307 is matched on its own, as a code point (flag u)
const UNFOLDED = /[\u{69}\u{19b}\u{25c}\u{261}\u{264}\u{26a}\u{26c}\u{282}\u{287}\u{29d}\u{29e}\u{307}\u{3f3}\u{529}\u{52b}\u{52d}\u{52f}\u{10d0}-\u{10fa}\u{10fd}-\u{10ff}\u{13f8}-\u{13fd}\u{1c8a}\u{1d8e}\u{2c5f}\u{a699}\u{a69b}\u{a794}\u{a797}\u{a799}\u{a79b}\u{a79d}\u{a79f}\u{a7b5}\u{a7b7}\u{a7b9}\u{a7bb}\u{a7bd}\u{a7bf}\u{a7c1}\u{a7c3}\u{a7c8}\u{a7ca}\u{a7cd}\u{a7cf}\u{a7d1}\u{a7d3}\u{a7d5}\u{a7d7}\u{a7d9}\u{a7db}\u{a7f6}\u{ab53}\u{ab70}-\u{abbf}\u{104d8}-\u{104fb}\u{10597}-\u{105a1}\u{105a3}-\u{105b1}\u{105b3}-\u{105b9}\u{105bb}\u{105bc}\u{10cc0}-\u{10cf2}\u{10d70}-\u{10d85}\u{118c0}-\u{118df}\u{16e60}-\u{16e7f}\u{16ebb}-\u{16ed3}\u{1e922}-\u{1e943}]/u;

/** The code points `UNFOLDED` names, for the test that recomputes them. */
export const UNFOLDED_PATTERN = UNFOLDED;

/** The FTS5 table that indexes `table`'s text. */
export function textIndexTable(table: KeyedTable): string {
  return `${table}_text`;
}

/**
 * The FTS5 MATCH expression whose rows include every row `q` matches (each trigram of the stretch of
 * q the index can answer, all required), or undefined when no stretch of 3 code points can.
 */
export function textIndexQuery(q: string): string | undefined {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: the whole ASCII range is what LIKE folds (as substringMatch)
  const ascii = /^[\x00-\x7f]*$/.test(q);
  const stretches = ascii
    ? [[...q]]
    : q
        .toLowerCase()
        .split(new RegExp(UNFOLDED.source, 'gu'))
        .map((s) => [...s]);
  const longest = stretches.reduce((a, b) => (b.length > a.length ? b : a), []);
  if (longest.length < 3) return undefined;
  const trigrams = new Set<string>();
  for (let i = 0; i + 3 <= longest.length; i++) trigrams.add(longest.slice(i, i + 3).join(''));
  return [...trigrams].map((t) => `"${t.replaceAll('"', '""')}"`).join(' AND ');
}
