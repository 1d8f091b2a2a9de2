/** Readiness inputs for /readyz, in shared memory: each part sets its own flag on whatever thread it runs, every HTTP thread reads them. */
export class Readiness {
  private readonly flags: Int32Array;

  constructor(readonly buffer: SharedArrayBuffer = new SharedArrayBuffer(8)) {
    this.flags = new Int32Array(buffer);
  }

  static initial(parts: { storage: boolean; consumer: boolean }): Readiness {
    const readiness = new Readiness();
    readiness.storage = parts.storage;
    readiness.consumer = parts.consumer;
    return readiness;
  }

  get storage(): boolean {
    return Atomics.load(this.flags, 0) === 1;
  }

  set storage(ready: boolean) {
    Atomics.store(this.flags, 0, ready ? 1 : 0);
  }

  get consumer(): boolean {
    return Atomics.load(this.flags, 1) === 1;
  }

  set consumer(ready: boolean) {
    Atomics.store(this.flags, 1, ready ? 1 : 0);
  }
}
