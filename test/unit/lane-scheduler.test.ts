/**
 * The lane scheduler through its hooks (the seam it takes from the consumer): stream order per shard,
 * a full batch sent behind the one in flight (at most two), lanes independent, binding once per
 * session, a failed batch retried whole (with the one behind it), given up only when stopping.
 */
import t from 'tap';
import type { ScanOutcome } from '../../src/scans/apply.js';
import type { BatchLimits } from '../../src/scans/lanes.js';
import { LaneScheduler, type LaneHooks } from '../../src/scans/laneScheduler.js';
import { eventually } from '../helpers/trackd.js';

interface Message {
  id: number;
  scans: number;
  reads: number;
  msg: { working(): void };
  worked: number;
}

const LIMITS: BatchLimits = { maxBatch: 3, maxBatchReads: 100, maxGatherMs: 50 };

function message(id: number, scans = 1, reads = 1): Message {
  const m: Message = { id, scans, reads, worked: 0, msg: { working: () => m.worked++ } };
  return m;
}

/** Hooks that record what the scheduler asks for; `apply` resolves when the test says so. */
function recorder(options: { backlog?: () => boolean; stopping?: () => boolean } = {}) {
  const applied: { shard: number; ids: number[] }[] = [];
  const settled: number[][] = [];
  const bound: number[] = [];
  const failures: { shard: number; ids: number[] }[] = [];
  const running = new Map<number, number>();
  let overlap = false;
  let duplicated = false;
  const appliedIds = new Set<number>();
  /** Per apply call: the ids of the batch it was sent behind (undefined: none in flight). */
  const sentBehind: (number[] | undefined)[] = [];
  let failNext = 0;
  const gates: (() => void)[] = [];
  let holding = false;
  const hooks: LaneHooks<Message> = {
    bind: async (index) => {
      bound.push(index);
    },
    apply: async (index, batch, previous) => {
      if ((running.get(index) ?? 0) > 0) overlap = true;
      running.set(index, (running.get(index) ?? 0) + 1);
      sentBehind.push(previous?.map((m) => m.id));
      try {
        if (holding) await new Promise<void>((r) => gates.push(r));
        if (failNext > 0) {
          failNext--;
          throw new Error('SQLITE_BUSY');
        }
        // As the shard does (ApplyOptions.afterSeq): the batch behind one not applied is refused.
        if (previous !== undefined && !previous.every((m) => appliedIds.has(m.id))) throw new Error('the batch before is not applied');
        for (const m of batch) {
          if (appliedIds.has(m.id)) duplicated = true;
          appliedIds.add(m.id);
        }
        applied.push({ shard: index, ids: batch.map((m) => m.id) });
        return batch.map((): ScanOutcome => ({ kind: 'applied' }) as unknown as ScanOutcome);
      } finally {
        running.set(index, (running.get(index) ?? 0) - 1);
      }
    },
    settle: async (batch) => {
      settled.push(batch.map((m) => m.id));
    },
    failed: (index, batch) => {
      failures.push({ shard: index, ids: batch.map((m) => m.id) });
    },
    backlog: options.backlog ?? (() => false),
    stopping: options.stopping ?? (() => false),
  };
  return {
    hooks,
    applied,
    settled,
    bound,
    failures,
    overlap: () => overlap,
    duplicated: () => duplicated,
    sentBehind,
    failTimes: (n: number) => {
      failNext = n;
    },
    hold: () => {
      holding = true;
    },
    releaseAll: () => {
      holding = false;
      for (const g of gates.splice(0)) g();
    },
  };
}

t.test('a live feed: messages applied in stream order, in batches within the limit, each settled after its commit', async (t) => {
  const r = recorder();
  const lanes = new LaneScheduler<Message>(LIMITS, r.hooks);
  for (let i = 1; i <= 7; i++) lanes.enqueue(0, message(i));
  await eventually(() => r.settled.flat().length === 7, 2000, 5);
  t.same(
    r.applied.flatMap((b) => b.ids),
    [1, 2, 3, 4, 5, 6, 7],
    'stream order',
  );
  t.ok(
    r.applied.every((b) => b.ids.length <= LIMITS.maxBatch),
    `batches within maxBatch: ${JSON.stringify(r.applied.map((b) => b.ids))}`,
  );
  t.same(
    r.settled,
    r.applied.map((b) => b.ids),
    'each batch settled once, in order',
  );
  t.same(r.bound, [0], 'bound once');
  t.notOk(lanes.busy(), 'idle afterwards');
});

t.test(
  'a batch short of the limits waits for the one in flight while the stream has more; shards do not wait for each other',
  async (t) => {
    const r = recorder({ backlog: () => true });
    const lanes = new LaneScheduler<Message>(LIMITS, r.hooks);
    r.hold();
    for (let i = 1; i <= 4; i++) lanes.enqueue(0, message(i));
    lanes.enqueue(1, message(100));
    await eventually(() => lanes.active(), 1000, 5);
    // Shard 1 is applied while shard 0's first batch is still held.
    setTimeout(() => r.releaseAll(), 20);
    await eventually(() => r.settled.flat().length === 5, 2000, 5);
    t.notOk(r.overlap(), 'never two batches of one shard at once ([4] is not full)');
    t.same(
      r.applied.filter((b) => b.shard === 0).flatMap((b) => b.ids),
      [1, 2, 3, 4],
    );
    t.same(
      r.applied.filter((b) => b.shard === 1).flatMap((b) => b.ids),
      [100],
    );
    t.same([...r.bound].sort(), [0, 1], 'each shard bound once');
  },
);

t.test('a failed batch is retried whole after a backoff, its messages kept in progress', async (t) => {
  const r = recorder();
  const lanes = new LaneScheduler<Message>(LIMITS, r.hooks);
  r.failTimes(2);
  const queued = [message(1), message(2)];
  for (const m of queued) lanes.enqueue(0, m);
  await eventually(() => r.settled.flat().length === 2, 5000, 10);
  t.same(
    r.failures.map((f) => f.ids),
    [
      [1, 2],
      [1, 2],
    ],
    'the same batch failed twice',
  );
  t.same(
    r.applied.map((b) => b.ids),
    [[1, 2]],
    'then applied once',
  );
  t.same(
    queued.map((m) => m.worked),
    [2, 2],
    'each message told "working" once per failure (no redelivery meanwhile)',
  );
});

t.test('when stopping, a failed batch is given up and left for redelivery', async (t) => {
  let stopping = false;
  const r = recorder({ stopping: () => stopping });
  const lanes = new LaneScheduler<Message>(LIMITS, r.hooks);
  r.failTimes(1);
  stopping = true;
  const m = message(1);
  lanes.enqueue(0, m);
  await eventually(() => r.failures.length === 1, 2000, 5);
  await new Promise((resolve) => setImmediate(resolve));
  t.equal(m.worked, 0, 'not kept in progress: no retry is coming');
  t.notOk(lanes.active(), 'no batch pending');
  t.same(r.applied, [], 'not applied');
  t.same(r.settled, [], 'not settled (nor acked)');
  t.ok(lanes.busy(), 'the message stays queued');
});

t.test('a new session binds every lane again before its next batch', async (t) => {
  const r = recorder();
  const lanes = new LaneScheduler<Message>(LIMITS, r.hooks);
  lanes.enqueue(0, message(1));
  await eventually(() => r.settled.length === 1, 2000, 5);
  lanes.unbindAll();
  lanes.enqueue(0, message(2));
  await eventually(() => r.settled.length === 2, 2000, 5);
  t.same(r.bound, [0, 0]);
});

t.test('with a backlog, a lane gathers arriving messages into one batch', async (t) => {
  const r = recorder({ backlog: () => true });
  const lanes = new LaneScheduler<Message>({ maxBatch: 1000, maxBatchReads: 1000, maxGatherMs: 200 }, r.hooks);
  let sent = 0;
  await new Promise<void>((resolve) => {
    const tick = () => {
      for (let k = 0; k < 5; k++) lanes.enqueue(0, message(++sent));
      if (sent < 50) setImmediate(tick);
      else resolve();
    };
    tick();
  });
  await eventually(() => r.settled.flat().length === 50, 2000, 5);
  t.ok(r.applied.length < 10, `50 messages arriving in bursts of 5 applied in ${r.applied.length} batches`);
  t.same(
    r.applied.flatMap((b) => b.ids),
    Array.from({ length: 50 }, (_, i) => i + 1),
    'in order',
  );
});

t.test('a full batch is sent behind the one in flight, at most two, settled in order', async (t) => {
  const r = recorder();
  const lanes = new LaneScheduler<Message>(LIMITS, r.hooks);
  r.hold();
  for (let i = 1; i <= 8; i++) lanes.enqueue(0, message(i));
  await eventually(() => r.sentBehind.length === 2, 1000, 5);
  await new Promise((resolve) => setTimeout(resolve, 30));
  t.same(r.sentBehind, [undefined, [1, 2, 3]], 'the second (full) batch sent behind the first before its answer; no third');
  r.releaseAll();
  await eventually(() => r.settled.flat().length === 8, 2000, 5);
  t.ok(r.overlap(), 'two batches of the shard were in flight at once');
  t.same(r.settled, [
    [1, 2, 3],
    [4, 5, 6],
    [7, 8],
  ]);
  t.same(r.sentBehind.length, 3);
  t.same(r.sentBehind[2], [4, 5, 6], 'the last, short batch sent behind the second (full) once the first settled: the stream has no more');
  t.notOk(r.duplicated(), 'each message applied once');
});

t.test('when the first of two batches in flight fails, the second is refused and both are retried in order', async (t) => {
  const r = recorder();
  const lanes = new LaneScheduler<Message>(LIMITS, r.hooks);
  r.hold();
  r.failTimes(1);
  const queued = Array.from({ length: 6 }, (_, i) => message(i + 1));
  for (const m of queued) lanes.enqueue(0, m);
  await eventually(() => r.sentBehind.length === 2, 1000, 5);
  r.releaseAll();
  await eventually(() => r.settled.flat().length === 6, 5000, 10);
  t.same(
    r.failures.map((f) => f.ids),
    [
      [1, 2, 3],
      [4, 5, 6],
    ],
    'the first failed, and the second was refused behind it',
  );
  t.same(
    r.applied.map((b) => b.ids),
    [
      [1, 2, 3],
      [4, 5, 6],
    ],
    'then both applied once, in order',
  );
  t.same(r.settled, [
    [1, 2, 3],
    [4, 5, 6],
  ]);
  t.notOk(r.duplicated(), 'no message applied twice');
  t.same(
    queued.map((m) => m.worked),
    [1, 1, 1, 1, 1, 1],
    'both batches kept in progress for their retry',
  );
});

t.test('the next full batch is sent before the one answered is settled', async (t) => {
  const events: string[] = [];
  const hooks: LaneHooks<Message> = {
    bind: async () => undefined,
    apply: async (_index, batch) => {
      events.push(`apply ${batch.map((m) => m.id).join(',')}`);
      await new Promise((resolve) => setTimeout(resolve, 5));
      return batch.map((): ScanOutcome => ({ kind: 'applied' }) as unknown as ScanOutcome);
    },
    settle: async (batch) => {
      events.push(`settle ${batch.map((m) => m.id).join(',')}`);
    },
    failed: () => undefined,
    backlog: () => true,
    stopping: () => false,
  };
  const lanes = new LaneScheduler<Message>(LIMITS, hooks);
  for (let i = 1; i <= 9; i++) lanes.enqueue(0, message(i));
  await eventually(() => events.filter((e) => e.startsWith('settle')).length === 3, 2000, 5);
  t.same(events, ['apply 1,2,3', 'apply 4,5,6', 'apply 7,8,9', 'settle 1,2,3', 'settle 4,5,6', 'settle 7,8,9']);
});

t.test('with more in the stream, the rest of the queue short of the limits is not sent behind a full batch', async (t) => {
  let backlog = true;
  const r = recorder({ backlog: () => backlog });
  const lanes = new LaneScheduler<Message>(LIMITS, r.hooks);
  r.hold();
  for (let i = 1; i <= 5; i++) lanes.enqueue(0, message(i));
  await eventually(() => r.sentBehind.length === 1, 1000, 5);
  await new Promise((resolve) => setTimeout(resolve, 30));
  t.same(r.sentBehind, [undefined], 'only [1, 2, 3] in flight: [4, 5] gathers more');
  backlog = false;
  r.releaseAll();
  await eventually(() => r.settled.flat().length === 5, 2000, 5);
  t.same(r.settled, [
    [1, 2, 3],
    [4, 5],
  ]);
});
