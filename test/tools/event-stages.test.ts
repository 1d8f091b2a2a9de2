/**
 * The stage split of `npm run bench -- --stages` (bench/lib/eventStages.ts): trackd's debug lines
 * (one per scan batch, one per stream read) joined with the client's arrivals on the event time.
 */
import t from 'tap';
import { StageLog } from '../../bench/lib/eventStages.js';

const batch = (now: number, accepted: number, started: number) =>
  JSON.stringify({
    level: 20,
    msg: 'scan batch applied',
    seqs: [1],
    now,
    accepted_at: accepted,
    started_at: started,
    applied_at: started + 99,
  });
const streamed = (written: number, committed: number, occurred: [number, number][]) =>
  JSON.stringify({ level: 20, msg: 'events streamed', org: 1, written_at: written, committed_at: committed, occurred });

t.test('each event splits into delivery, lane, shard, poll and socket that add up to its total', async (t) => {
  const log = new StageLog();
  // Two batches (times 1000 and 2000); the second one's events written in two reads, in pieces across chunks.
  const text = [
    '{"level":30,"msg":"something else"}',
    batch(1000, 1010, 1030),
    streamed(1100, 1090, [[1000, 2]]),
    batch(2000, 2005, 2010),
    streamed(2300, 2250, [[2000, 500]]),
    streamed(2320, 2250, [[2000, 100]]),
    '',
  ].join('\n');
  log.take(text.slice(0, 100));
  log.take(text.slice(100));
  const figures = log.stages([
    [1000, 1105, 2],
    [2000, 2310, 600],
    [3000, 3100, 5], // no line for it: unmatched
  ]);
  t.equal(figures.stage_events, 602);
  t.equal(figures.stage_unmatched_events, 5);
  // p50 and p99 over 602 events: the second batch's 600 dominate both.
  t.same(
    [
      figures.stage_delivery_p50_ms,
      figures.stage_lane_p50_ms,
      figures.stage_shard_p50_ms,
      figures.stage_poll_p50_ms,
      figures.stage_socket_p50_ms,
      figures.stage_total_p50_ms,
    ],
    [5, 5, 240, 50, 10, 310],
    'the second batch: stored 2000, taken 2005, sent 2010, committed 2250, first written 2300, received 2310',
  );
  t.equal(figures.stage_lane_p99_ms, 5);
  t.same(log.lines.length, 5, 'only the two kinds of lines are kept');
});

t.test("a batch line with its own commit time splits shard and poll at it, not at the poll's older commit", async (t) => {
  const log = new StageLog();
  const withCommit = (now: number, started: number, committed: number, applied: number, messages: number) =>
    JSON.stringify({
      level: 20,
      msg: 'scan batch applied',
      seqs: Array.from({ length: messages }, (_, i) => i + 1),
      now,
      accepted_at: started - 5,
      started_at: started,
      committed_at: committed,
      applied_at: applied,
    });
  log.take(
    [
      // The poll that wrote batch 2000's events had read the commit marker of an earlier batch (1900).
      withCommit(2000, 2010, 2250, 2400, 30),
      streamed(2300, 1900, [[2000, 10]]),
      // A batch that made no events: its line's commit time is an older batch's, so the poll's counts.
      withCommit(3000, 3010, 2250, 3100, 2),
      streamed(3200, 3090, [[3000, 30]]),
      '',
    ].join('\n'),
  );
  const figures = log.stages([
    [2000, 2310, 10],
    [3000, 3210, 30],
  ]);
  // p50 over 40 events: the second batch's 30; p99: the larger.
  t.same([figures.stage_shard_p50_ms, figures.stage_poll_p50_ms], [80, 110], 'the second batch: committed as the poll saw, 3090');
  t.equal(figures.stage_shard_p99_ms, 240, 'the first batch: sent 2010, its own commit 2250 (the poll saw 1900)');
  t.same([figures.stage_answer_ms_p50, figures.stage_answer_ms_p99], [150, 150], 'answered 150 ms after its commit');
  t.same([figures.batches, figures.batch_messages_p99, figures.batch_ms_p99], [2, 30, 390]);
});
