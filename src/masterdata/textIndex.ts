import type { ShardWriter } from '../shards/writer.js';
import { shardState } from '../shards/state.js';
import { writerStatements, type KeyedTable } from './keys.js';

/**
 * The text index of `q` (migration 013): per master-data table, an FTS5 table of trigrams,
 * `<table>_text`, one row per owner (rowid = its id) holding its name, external key, description
 * and live tag values, each after a char(1). It answers which rows match a `q`, so that a count or
 * a page of a rare match reads those rows instead of testing every row of the org.
 *
 * The trigram tokenizer folds case one code point at a time (F below), and a row matches `q` when
 * - q is ASCII: one field of the row holds q up to ASCII case (LIKE). The index is asked for the
 *   phrase q and its answer is exact: a stretch of the row holds F(q) (ASCII) exactly when each of
 *   its code points is ASCII equal to q's up to case, since the only code points beyond ASCII that
 *   F makes ASCII (U+017F, U+212A) are indexed as U+FFFD, and no q spans two fields (q has no
 *   control characters).
 * - otherwise: JavaScript's lowercase of a field holds q's. JavaScript lowercases per code point
 *   into one code point with the same F as the indexed one, except the code points whose
 *   lowercase has a code point of `UNFOLDED` (U+0130 to "i" + U+0307; letters newer than SQLite's
 *   case tables, such as Cherokee or Georgian Mtavruli, which JavaScript lowercases and F leaves;
 *   U+017F and U+212A, indexed as U+FFFD). A stretch of q's lowercase without those code points
 *   therefore comes from code points of the text one for one with equal F: the index is asked for
 *   the longest such stretch, which finds every matching row, and the exact test (substringMatch)
 *   drops the others. (Sigma's context-dependent lowercase is σ or ς; F gives σ for Σ, σ and ς.)
 * test/unit/text-index.test.ts recomputes `UNFOLDED` and the code points indexed as U+FFFD from
 * the running Node and SQLite, so an upgrade of either that changes them fails the suite.
 *
 * A q whose stretch is shorter than 3 code points (a trigram) cannot use the index.
 */
// biome-ignore format: one code point or range per entry, as test/unit/text-index.test.ts recomputes them
// biome-ignore lint/suspicious/noMisleadingCharacterClass: U+0307 is matched on its own, as a code point (flag u)
const UNFOLDED = /[\u{69}\u{6b}\u{17f}\u{19b}\u{25c}\u{261}\u{264}\u{26a}\u{26c}\u{282}\u{287}\u{29d}\u{29e}\u{307}\u{3f3}\u{529}\u{52b}\u{52d}\u{52f}\u{10d0}-\u{10fa}\u{10fd}-\u{10ff}\u{13f8}-\u{13fd}\u{1c8a}\u{1d8e}\u{2c5f}\u{a699}\u{a69b}\u{a794}\u{a797}\u{a799}\u{a79b}\u{a79d}\u{a79f}\u{a7b5}\u{a7b7}\u{a7b9}\u{a7bb}\u{a7bd}\u{a7bf}\u{a7c1}\u{a7c3}\u{a7c8}\u{a7ca}\u{a7cd}\u{a7cf}\u{a7d1}\u{a7d3}\u{a7d5}\u{a7d7}\u{a7d9}\u{a7db}\u{a7f6}\u{ab53}\u{ab70}-\u{abbf}\u{104d8}-\u{104fb}\u{10597}-\u{105a1}\u{105a3}-\u{105b1}\u{105b3}-\u{105b9}\u{105bb}\u{105bc}\u{10cc0}-\u{10cf2}\u{10d70}-\u{10d85}\u{118c0}-\u{118df}\u{16e60}-\u{16e7f}\u{16ebb}-\u{16ed3}\u{1e922}-\u{1e943}]/u;

/** The code points `UNFOLDED` names, for the test that recomputes them. */
export const UNFOLDED_PATTERN = UNFOLDED;

/** The FTS5 table that indexes `table`'s text. */
export function textIndexTable(table: KeyedTable): string {
  return `${table}_text`;
}

/** What the text index answers for a q: the rows of `match`, all of them matching when `exact`. */
export interface TextIndexQuery {
  match: string;
  exact: boolean;
}

/** The text index's query for `q`, or undefined when it cannot answer (no stretch of 3 code points). */
export function textIndexQuery(q: string): TextIndexQuery | undefined {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: the index's field separator is a control character
  if (/[\x00-\x1f]/.test(q)) return undefined;
  // biome-ignore lint/suspicious/noControlCharactersInRegex: the whole ASCII range is what LIKE folds (as substringMatch)
  const ascii = /^[\x00-\x7f]*$/.test(q);
  const stretches = ascii ? [q] : q.toLowerCase().split(new RegExp(UNFOLDED.source, 'gu'));
  const codePoints = (s: string) => [...s].length;
  let longest = '';
  for (const stretch of stretches) if (codePoints(stretch) > codePoints(longest)) longest = stretch;
  if (codePoints(longest) < 3) return undefined;
  return { match: `"${longest.replaceAll('"', '""')}"`, exact: ascii };
}

/** Whether the writer's transaction holds the text index paused (the pause row is never committed). */
const pauses = shardState((_shard: ShardWriter) => ({ paused: false }));

/**
 * Marks the shard's text index paused (migration 016): its triggers only mark the owners they would
 * rewrite, in a plain table, until `resumeTextIndex` rewrites them. The shard writer pauses it for
 * each round it opens (shards/deferred.ts), so that FTS5 writes and flushes the index once per
 * round: it flushes its pending terms at every savepoint (each command of a round has one) and at
 * every statement that opens a statement journal (an upsert, an insert whose trigger writes), so
 * row-by-row triggers wrote a segment per command. Must run in a transaction.
 */
export function pauseTextIndex(shard: ShardWriter): void {
  writerStatements(shard).get('INSERT INTO text_index_paused (paused) VALUES (1)').run();
  pauses(shard).paused = true;
}

/**
 * Rewrites the index rows of the owners marked since `pauseTextIndex`, in two set-based statements
 * per table, and ends the pause: the index is then what the row-by-row triggers would have left.
 * Must run in the transaction that paused it (the pause is never committed).
 */
export function resumeTextIndex(shard: ShardWriter): void {
  const statements = writerStatements(shard);
  pauses(shard).paused = false;
  if (statements.get('SELECT EXISTS (SELECT 1 FROM text_index_stale)').pluck().get() === 1) {
    for (const table of ['assets', 'locations'] as const) {
      const text = textIndexTable(table);
      statements
        .get(`DELETE FROM ${text} WHERE rowid IN (SELECT id FROM text_index_stale WHERE owner = '${table}' AND inserted = 0)`)
        .run();
      statements
        .get(
          `INSERT INTO ${text} (rowid, body) SELECT s.id, s.body FROM text_index_stale x JOIN ${text}_source s ON s.id = x.id WHERE x.owner = '${table}'`,
        )
        .run();
    }
    statements.get('DELETE FROM text_index_stale').run();
  }
  statements.get('DELETE FROM text_index_paused').run();
}

/** After a rollback of the transaction that paused the index: the pause went with it. */
export function textIndexRolledBack(shard: ShardWriter): void {
  pauses(shard).paused = false;
}

/**
 * Runs `fn` with the text index paused and rewrites the owners it marked when it returns (a bulk
 * batch); inside a transaction that holds it paused already, `fn` just runs, and its owners are
 * rewritten with the rest of that transaction's. `fn` must run inside a transaction that a throw
 * out of it rolls back (its marks and the pause go with it).
 */
export function withTextIndexPaused<T>(shard: ShardWriter, fn: () => T): T {
  if (pauses(shard).paused) return fn();
  pauseTextIndex(shard);
  let resumed = false;
  try {
    const value = fn();
    resumeTextIndex(shard);
    resumed = true;
    return value;
  } finally {
    if (!resumed) textIndexRolledBack(shard);
  }
}
