/** How often a thread polls the log for its streams: every 20 ms with few, up to 100 ms with many (fewer sends per client). */
import t from 'tap';
import { DEFAULT_HUB_OPTIONS, pollInterval } from '../../src/events/hub.js';

t.test('the poll interval grows with the streams a thread holds, between pollMs and busyPollMs', async (t) => {
  const cases: [number, number][] = [
    [0, 20],
    [1, 20],
    [64, 20],
    [65, 20],
    [100, 31],
    [200, 63],
    [320, 100],
    [500, 100],
    [10_000, 100],
  ];
  for (const [streams, ms] of cases) t.equal(pollInterval(streams, DEFAULT_HUB_OPTIONS), ms, `${streams} streams: every ${ms} ms`);
  t.equal(pollInterval(1000, { pollMs: 50, fewStreams: 10, busyPollMs: 30 }), 50, 'never shorter than pollMs');
});
