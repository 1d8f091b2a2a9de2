import fs from 'node:fs';
import t from 'tap';
import { eventually, spawnTrackd } from '../helpers/trackd.js';

/**
 * Threads are named `trackd-<role>` and the background ones (the event relays) run
 * BACKGROUND_NICE (default 10) lower than the process, the others at the process's own nice: read from /proc, per thread.
 */

interface ThreadInfo {
  name: string;
  nice: number;
}

function threadsOf(pid: number): ThreadInfo[] {
  const dir = `/proc/${pid}/task`;
  return fs.readdirSync(dir).flatMap((tid) => {
    try {
      const name = fs.readFileSync(`${dir}/${tid}/comm`, 'utf8').trim();
      // Field 19 of stat is the nice value; the name (field 2) may hold spaces, so count after its ')'.
      const stat = fs.readFileSync(`${dir}/${tid}/stat`, 'utf8');
      const nice = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16]);
      return [{ name, nice }];
    } catch {
      return []; // a thread that ended meanwhile
    }
  });
}

/** The main thread's nice (the process's as started): the others are relative to it. */
function processNice(pid: number): number {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16]);
}

const NAMED = ['trackd-shard-0', 'trackd-shard-1', 'trackd-http-0', 'trackd-http-1', 'trackd-relay-0', 'trackd-relay-1', 'trackd-ckpt'];

async function niceByName(pid: number): Promise<Record<string, number>> {
  // The relays start once the shards are up and the broker answers.
  const threads = await eventually(() => {
    const all = threadsOf(pid);
    return NAMED.every((n) => all.some((th) => th.name === n)) ? all : undefined;
  }, 20_000);
  return Object.fromEntries(NAMED.map((n) => [n, threads.find((th) => th.name === n)!.nice]));
}

const skip = process.platform !== 'linux' ? 'per-thread nice values are Linux only' : false;

t.test('relays at BACKGROUND_NICE (default 10), shards, HTTP threads and checkpointer at the process nice', { skip }, async (t) => {
  const trackd = await spawnTrackd(t);
  const nice = await niceByName(trackd.process.pid!);
  const own = processNice(trackd.process.pid!);
  t.same(nice, {
    'trackd-shard-0': own,
    'trackd-shard-1': own,
    'trackd-http-0': own,
    'trackd-http-1': own,
    'trackd-relay-0': Math.min(19, own + 10),
    'trackd-relay-1': Math.min(19, own + 10),
    'trackd-ckpt': own,
  });
});

t.test('BACKGROUND_NICE=19 and BACKGROUND_NICE=0', { skip }, async (t) => {
  for (const [value, lower] of [
    ['19', 19],
    ['0', 0],
  ] as const) {
    const trackd = await spawnTrackd(t, { env: { BACKGROUND_NICE: value } });
    const nice = await niceByName(trackd.process.pid!);
    const own = processNice(trackd.process.pid!);
    const relays = Math.min(19, own + lower);
    t.equal(nice['trackd-relay-0'], relays, `BACKGROUND_NICE=${value}: relay-0`);
    t.equal(nice['trackd-relay-1'], relays, `BACKGROUND_NICE=${value}: relay-1`);
    t.equal(nice['trackd-shard-0'], own, `BACKGROUND_NICE=${value}: shard-0`);
    await trackd.stop();
  }
});
