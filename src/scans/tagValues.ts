/** Bytes of one slot: the id (int32), the key's length + 1 (0: a free slot), the key's characters. */
const SLOT_BYTES = 32;
const ID_BYTES = 4;
const KEY_AT = ID_BYTES + 1;
/** Longest key kept in a slot (an EPC-96 in hex is 24 characters); longer ones, or any with a character past U+00FF, go to a Map. */
export const MAX_SLOT_KEY = SLOT_BYTES - KEY_AT;
const INITIAL_BITS = 10;

/**
 * Tag values to ids (an asset id, or a negative or zero marker), by open addressing over one byte
 * array: each slot holds its id and its key's characters, so a lookup reads one or two adjacent
 * cache lines. A `Map` of 1,000,000 string keys cost about 1.5 us a lookup of a value just
 * received (its hash table, then the key string elsewhere in the heap: each a cache miss), against
 * 0.3 us here (docs/field-rereads.md). No deletion: the scan writer's caches only grow or start over.
 */
export class TagValues {
  private bits = INITIAL_BITS;
  private slots = new Uint8Array(SLOT_BYTES << INITIAL_BITS);
  private ids = new Int32Array(this.slots.buffer);
  private inSlots = 0;
  private readonly others = new Map<string, number>();

  get size(): number {
    return this.inSlots + this.others.size;
  }

  get(value: string): number | undefined {
    const n = value.length;
    const home = this.home(value);
    if (home < 0) return this.others.get(value);
    const { slots } = this;
    const mask = (1 << this.bits) - 1;
    for (let i = home; ; i = (i + 1) & mask) {
      const at = i * SLOT_BYTES;
      const stored = slots[at + ID_BYTES]!;
      if (stored === 0) return undefined;
      if (stored === n + 1 && sameKey(slots, at, value)) return this.ids[at >> 2]!;
    }
  }

  /** Adds or replaces. */
  set(value: string, id: number): void {
    if (this.home(value) < 0) {
      this.others.set(value, id);
      return;
    }
    if ((this.inSlots + 1) * 4 > 3 << this.bits) this.grow();
    this.place(value, id);
  }

  /** Puts a key that fits a slot. */
  private place(value: string, id: number): void {
    const { slots } = this;
    const n = value.length;
    const mask = (1 << this.bits) - 1;
    for (let i = this.home(value); ; i = (i + 1) & mask) {
      const at = i * SLOT_BYTES;
      const stored = slots[at + ID_BYTES]!;
      if (stored === n + 1 && sameKey(slots, at, value)) {
        this.ids[at >> 2] = id;
        return;
      }
      if (stored === 0) {
        this.ids[at >> 2] = id;
        slots[at + ID_BYTES] = n + 1;
        for (let k = 0; k < n; k++) slots[at + KEY_AT + k] = value.charCodeAt(k);
        this.inSlots++;
        return;
      }
    }
  }

  private grow(): void {
    const old = this.slots;
    const oldIds = this.ids;
    this.bits++;
    this.slots = new Uint8Array(SLOT_BYTES << this.bits);
    this.ids = new Int32Array(this.slots.buffer);
    this.inSlots = 0;
    for (let at = 0; at < old.length; at += SLOT_BYTES) {
      const stored = old[at + ID_BYTES]!;
      if (stored !== 0) this.place(String.fromCharCode(...old.subarray(at + KEY_AT, at + KEY_AT + stored - 1)), oldIds[at >> 2]!);
    }
  }

  /** The key's first slot (FNV-1a over its characters, spread by Fibonacci hashing), or -1 when it does not fit a slot. */
  private home(value: string): number {
    if (value.length > MAX_SLOT_KEY) return -1;
    let h = 0x811c9dc5;
    for (let k = 0; k < value.length; k++) {
      const c = value.charCodeAt(k);
      if (c > 0xff) return -1;
      h = Math.imul(h ^ c, 0x01000193);
    }
    return Math.imul(h, 0x9e3779b1) >>> (32 - this.bits);
  }
}

function sameKey(slots: Uint8Array, at: number, value: string): boolean {
  for (let k = 0; k < value.length; k++) if (slots[at + KEY_AT + k] !== value.charCodeAt(k)) return false;
  return true;
}
