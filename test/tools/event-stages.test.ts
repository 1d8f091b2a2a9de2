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
