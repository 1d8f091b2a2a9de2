/** Shard indexes the table covers: every index SHARDS (at most 256) or an org's recorded shard can take. */
const SHARD_SLOTS = 256;
const VERSION = SHARD_SLOTS;

/** Atomics.waitAsync (Node 16+; typed in lib es2024, which this project's target does not include). */
const waitAsync = (
  Atomics as unknown as {
    waitAsync(array: Int32Array, index: number, value: number, timeoutMs: number): { async: boolean; value: unknown };
  }
).waitAsync;

/**
 * Which shards this node owns now, in shared memory: the main thread (lease wiring) sets a shard
 * local once its actor serves it and clears it before it lets the shard go; every HTTP thread reads
 * it per request (forward or serve here) and follows its changes (subscribe to the shard's RPC
 * subject, or leave it) without a message between threads.
 */
export class OwnershipTable {
  private readonly slots: Int32Array;

  constructor(readonly buffer = new SharedArrayBuffer((SHARD_SLOTS + 1) * 4)) {
    this.slots = new Int32Array(buffer);
  }

  isLocal(shard: number): boolean {
    return shard >= 0 && shard < SHARD_SLOTS && Atomics.load(this.slots, shard) === 1;
  }

  set(shard: number, local: boolean): void {
    if (shard < 0 || shard >= SHARD_SLOTS) throw new RangeError(`shard ${shard} is outside 0..${SHARD_SLOTS - 1}`);
    if (Atomics.exchange(this.slots, shard, local ? 1 : 0) === (local ? 1 : 0)) return;
    Atomics.add(this.slots, VERSION, 1);
    Atomics.notify(this.slots, VERSION);
  }

  local(): number[] {
    const shards: number[] = [];
    for (let i = 0; i < SHARD_SLOTS; i++) if (Atomics.load(this.slots, i) === 1) shards.push(i);
    return shards;
  }

  /**
   * Calls `onChange` with the local shards now and after every change, until the returned stop is
   * called (Atomics.waitAsync: the waiting thread's event loop is free meanwhile).
   */
  follow(onChange: (local: number[]) => void): () => void {
    let stopped = false;
    let seen = Atomics.load(this.slots, VERSION);
    onChange(this.local());
    const loop = async () => {
      while (!stopped) {
        const wait = waitAsync(this.slots, VERSION, seen, 1000);
        if (wait.async) await wait.value;
        const now = Atomics.load(this.slots, VERSION);
        if (stopped || now === seen) continue;
        seen = now;
        onChange(this.local());
      }
    };
    void loop();
    return () => {
      stopped = true;
      Atomics.notify(this.slots, VERSION);
    };
  }
}
