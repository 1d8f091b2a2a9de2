/**
 * The journal's encodings (docs/cluster.md): a scan batch's message sequences as runs from `first`
 * give back the same sequences, and a round's records grouped into entries keep their order, stay
 * under the size limit and are split only between records.
 */
import fc from 'fast-check';
import t from 'tap';
import { runsOf, seqsOf } from '../../src/scans/journalForm.js';
import { entryGroups, entryPayload, fitsOneEntry } from '../../src/shards/journalEntry.js';
import { sameJournalStream } from '../../src/shards/journal.js';

t.test('runs of sequences', async (t) => {
  const cases: [number[], number[]][] = [
    [[5], [1]],
    [[5, 6, 7], [3]],
    [
      [5, 7],
      [1, 1, 1],
    ],
    [
      [1, 2, 3, 6, 7, 10],
      [3, 2, 2, 2, 1],
    ],
  ];
  for (const [seqs, runs] of cases) {
    t.same(runsOf(seqs), runs, `${JSON.stringify(seqs)} -> ${JSON.stringify(runs)}`);
    t.same(seqsOf(seqs[0]!, runs), seqs, `${JSON.stringify(runs)} from ${seqs[0]} -> ${JSON.stringify(seqs)}`);
  }
  t.doesNotThrow(
    () =>
      fc.assert(
        fc.property(
          fc.integer({ min: 1, max: 1e9 }),
          fc.array(fc.integer({ min: 1, max: 5 }), { minLength: 1, maxLength: 200 }),
          (first, gaps) => {
            const seqs = [first];
            for (const gap of gaps) seqs.push(seqs.at(-1)! + gap);
            const runs = runsOf(seqs);
            return JSON.stringify(seqsOf(first, runs)) === JSON.stringify(seqs) && runs.length % 2 === 1;
          },
        ),
      ),
    'any ascending sequences survive the round trip',
  );
});

t.test('entries of a round', async (t) => {
  const record = (n: number, size: number) => JSON.stringify({ name: `r${n}`, pad: 'x'.repeat(size) });
  const records = Array.from({ length: 50 }, (_, n) => record(n, 10 + ((n * 37) % 300)));
  const max = 2_000;
  const groups = entryGroups(records, max);
  t.same(groups.flat(), records, 'every record once, in order');
  t.ok(groups.length > 1, `split into ${groups.length} entries`);
  t.ok(
    groups.every((g) => entryPayload(7, Number.MAX_SAFE_INTEGER, g).length <= max),
    'each entry (with the largest prev) fits the limit',
  );
  t.ok(
    groups.slice(0, -1).every((g, i) => entryPayload(7, Number.MAX_SAFE_INTEGER, [...g, groups[i + 1]![0]!]).length > max - 16),
    'an entry is closed only when the next record would not fit',
  );
  t.same(
    entryGroups([record(1, 5_000)], max),
    [[record(1, 5_000)]],
    'a record over the limit stays whole (refused before, by its command)',
  );
  t.notOk(fitsOneEntry(record(1, 5_000), max), 'and fitsOneEntry says so');
  t.ok(fitsOneEntry(record(1, 100), max), 'a small record fits');
  const entry = JSON.parse(new TextDecoder().decode(entryPayload(3, 41, [record(1, 1), record(2, 1)])));
  t.same(
    { v: entry.v, shard: entry.shard, prev: entry.prev, names: entry.records.map((r: { name: string }) => r.name) },
    {
      v: 1,
      shard: 3,
      prev: 41,
      names: ['r1', 'r2'],
    },
  );
});

t.test('the same journal stream, as different replicas report its creation time', async (t) => {
  const cases: [string, string, boolean, string][] = [
    ['2026-11-26T16:05:13.888412641Z', '2026-11-26T16:05:13.888412641Z', true, 'the same text'],
    ['2026-11-26T16:05:13.888412641Z', '2026-11-26T16:05:13.876662494Z', true, 'two replicas, 12 ms apart (seen)'],
    ['2026-11-26T16:05:13.888Z', '2026-11-26T16:06:14.000Z', false, 'created again a minute later'],
    ['', '2026-11-26T16:05:13.888Z', false, 'no journal recorded yet'],
    ['not a time', '2026-11-26T16:05:13.888Z', false, 'unreadable'],
  ];
  for (const [a, b, same, why] of cases) t.equal(sameJournalStream(a, b), same, why);
});
