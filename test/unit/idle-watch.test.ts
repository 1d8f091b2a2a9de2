import t from 'tap';
import { IdleWatch } from '../../src/shards/idleWatch.js';

t.test('an idle watch fires once nothing touched it for its time, and not while touched or stopped', async (t) => {
  let fired!: () => void;
  const idle = new Promise<void>((resolve) => (fired = resolve));
  const started = Date.now();
  const watch = new IdleWatch(50, () => fired());
  for (let i = 0; i < 4; i++) {
    await new Promise((resolve) => setTimeout(resolve, 30));
    watch.touch();
  }
  t.notOk(watch.fired, 'touched every 30 ms: not fired');
  await idle;
  t.ok(watch.fired);
  t.ok(Date.now() - started >= 120 + 50 - 5, 'fired only after the last touch plus its time');
  const err = watch.timeout('reading SCANS from 7');
  t.equal(err.name, 'TimeoutError', 'the readers retry a TimeoutError');
  t.equal(err.message, 'reading SCANS from 7: nothing came for 0.05 s');

  let late = false;
  const stopped = new IdleWatch(20, () => {
    late = true;
  });
  stopped.stop();
  await new Promise((resolve) => setTimeout(resolve, 60));
  t.notOk(late, 'a stopped watch does not fire');
});
