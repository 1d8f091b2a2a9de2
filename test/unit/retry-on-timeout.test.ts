/**
 * Reads that create an ephemeral consumer are retried on a NATS timeout (src/scans/streams.ts
 * retryOnTimeout): nats-server before 2.12 may place such a consumer on a server that is down
 * (nats-io/nats-server#7165). A timeout is retried up to the attempts given; any other failure is not.
 */
import t from 'tap';
import { retryOnTimeout } from '../../src/scans/streams.js';

t.test('a read retried on a NATS timeout, and only on one', async (t) => {
  const timeout = () => Object.assign(new Error('timeout'), { name: 'TimeoutError' });
  let calls = 0;
  const value = await retryOnTimeout(async () => {
    if (++calls < 3) throw timeout();
    return 'read';
  });
  t.equal(value, 'read', 'two timeouts, then the answer');
  t.equal(calls, 3);

  calls = 0;
  await t.rejects(
    retryOnTimeout(async () => {
      calls++;
      throw timeout();
    }, 4),
    { name: 'TimeoutError' },
    'the last timeout is thrown after the attempts',
  );
  t.equal(calls, 4, 'four attempts in all');

  calls = 0;
  await t.rejects(
    retryOnTimeout(async () => {
      calls++;
      throw new Error('stream not found');
    }),
    { message: 'stream not found' },
  );
  t.equal(calls, 1, 'another failure is not retried');
});
