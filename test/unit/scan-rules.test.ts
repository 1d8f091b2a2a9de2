/** The pure rules of scan ingest: batch sizes, gathering, settling outcomes, visits. */
import t from 'tap';
import { batchLength, keepGathering, type BatchLimits } from '../../src/scans/lanes.js';
import { settleOutcomes } from '../../src/scans/settle.js';
import { extendsEarlier, visitStep, type OpenVisit } from '../../src/scans/visits.js';
import type { ScanOutcome } from '../../src/scans/apply.js';

const limits: BatchLimits = { maxBatch: 10, maxBatchReads: 100, maxGatherMs: 200 };

t.test('a batch takes messages from the head within both limits, at least one', async (t) => {
  const m = (scans: number, reads: number) => ({ scans, reads });
  const cases: [string, { scans: number; reads: number }[], number][] = [
    ['empty queue', [], 0],
    ['all fit', [m(3, 30), m(3, 30), m(3, 30)], 3],
    ['scan limit reached exactly', [m(5, 1), m(5, 1), m(1, 1)], 2],
    ['read limit reached exactly', [m(1, 50), m(1, 50), m(1, 1)], 2],
    ['one message over both limits still goes alone', [m(50, 500), m(1, 1)], 1],
    ['stops at the first message that does not fit', [m(4, 4), m(7, 7), m(1, 1)], 1],
  ];
  for (const [name, queue, expected] of cases) t.equal(batchLength(queue, limits), expected, name);
});

t.test('a lane gathers only while a backlog keeps arriving below the limits and the wait bound', async (t) => {
  const lane = { queued: 5, gathered: 3, scans: 5, reads: 5, waitedMs: 10 };
  t.equal(keepGathering(lane, true, false, limits), true, 'backlog, arriving, small, fresh');
  t.equal(keepGathering(lane, false, false, limits), false, 'a live feed never waits');
  t.equal(keepGathering(lane, true, true, limits), false, 'not while stopping');
  t.equal(keepGathering({ ...lane, gathered: 5 }, true, false, limits), false, 'nothing arrived since the last check');
  t.equal(keepGathering({ ...lane, scans: 10 }, true, false, limits), false, 'scan limit');
  t.equal(keepGathering({ ...lane, reads: 100 }, true, false, limits), false, 'read limit');
  t.equal(keepGathering({ ...lane, waitedMs: 200 }, true, false, limits), false, 'waited long enough');
});

t.test('settling: redeliveries ack as a whole, unknown locations dead-letter once with every reason', async (t) => {
  const msg = (name: string, scans: number, labelKey = 'a') => ({
    name,
    items: new Array(scans).fill(0),
    labels: { source: labelKey },
    labelKey,
  });
  const applied = (reads: number, unknownTags = 0, locationTags = 0): ScanOutcome => ({
    kind: 'applied',
    readsApplied: reads,
    unknownTags,
    locationTags,
  });
  const dead = (detail: string): ScanOutcome => ({ kind: 'dead', reason: 'unknown_location', detail });
  const batch = [msg('re', 2), msg('ok', 1), msg('dup', 1), msg('mixed', 3, 'b'), msg('deadOnly', 1, 'b')];
  const outcomes: ScanOutcome[] = [
    { kind: 'redelivered' },
    applied(9),
    applied(2, 1, 1),
    { kind: 'duplicate' },
    applied(3),
    dead('X unknown'),
    dead('X unknown'),
    dead('Y unknown'),
  ];
  const s = settleOutcomes(batch, outcomes);
  t.same(
    s.ack.map((m) => m.name),
    ['re', 'ok', 'dup'],
  );
  t.same(
    s.redelivered.map((m) => m.name),
    ['re'],
    'the redeliveries among them (logged by the consumer)',
  );
  t.same(
    s.duplicates.map((m) => m.name),
    ['dup'],
    'the re-publishes among them (logged by the consumer)',
  );
  t.same(
    s.dead.map((d) => [d.message.name, d.detail]),
    [
      ['mixed', 'X unknown'],
      ['deadOnly', 'Y unknown'],
    ],
  );
  t.same(s.tallies, [
    { labels: { source: 'a' }, applied: 1, redelivered: 1, duplicate: 1, reads: 2, unknownTags: 1, locationTags: 1 },
    { labels: { source: 'b' }, applied: 1, redelivered: 0, duplicate: 0, reads: 3, unknownTags: 0, locationTags: 0 },
  ]);
});

t.test('visits: extend within the gap, move otherwise, late reads go to history only', async (t) => {
  const open: OpenVisit = { locationId: 1, visitStartedAt: 1_000, lastSeenAt: 2_000, visitReadCount: 3 };
  const gap = 300;
  const cases: [string, OpenVisit | undefined, number, number, number, string][] = [
    ['first read', undefined, 5_000, 1, gap, 'first'],
    ['same place within the gap', open, 2_300, 1, gap, 'extend'],
    ['same place just past the gap', open, 2_301, 1, gap, 'move'],
    ['same time elsewhere', open, 2_000, 2, gap, 'move'],
    ['gap 0: every read is its own visit', open, 2_001, 1, 0, 'move'],
    ['older, inside the open visit, same place', open, 1_500, 1, gap, 'countInOpen'],
    ['older, inside the open visit, elsewhere', open, 1_500, 2, gap, 'late'],
    ['older than the open visit', open, 900, 1, gap, 'late'],
    ['older with gap 0', open, 1_500, 1, 0, 'late'],
  ];
  for (const [name, visit, at, location, gapMs, kind] of cases) t.equal(visitStep(visit, at, location, gapMs).kind, kind, name);
  t.same(visitStep(open, 9_000, 2, gap), { kind: 'move', closeOpen: true }, 'an extended visit gets its figures written when it closes');
  t.same(
    visitStep({ ...open, visitReadCount: 1, lastSeenAt: 1_000 }, 9_000, 2, gap),
    { kind: 'move', closeOpen: false },
    'a single-read visit is already written',
  );

  const before = { id: 7, locationId: 2, lastSeenAt: 800 };
  t.equal(extendsEarlier(before, 9, 1_000, 2, gap), true, 'same place, within the gap after it');
  t.equal(extendsEarlier(before, 9, 1_101, 2, gap), false, 'past the gap');
  t.equal(extendsEarlier(before, 9, 1_000, 3, gap), false, 'elsewhere');
  t.equal(extendsEarlier(before, 7, 1_000, 2, gap), false, 'not the open visit itself');
  t.equal(extendsEarlier(before, 9, 1_000, 2, 0), false, 'gap 0');
  t.equal(extendsEarlier(undefined, 9, 1_000, 2, gap), false, 'no visit before it');
});
