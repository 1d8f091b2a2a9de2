import type { ShardWriter } from '../shards/writer.js';
import { StatementCache } from '../storage/sqlite.js';
import { shardState } from '../shards/state.js';

/** Master-data tables that carry an external_key. */
export type KeyedTable = 'assets' | 'locations';

export const KEY_PREFIX: Record<KeyedTable, string> = { assets: 'ASSET', locations: 'LOC' };

/** The key of slot `n`: `ASSET-0001` ... `ASSET-9999`, `ASSET-10000`, ... */
export function slotKey(table: KeyedTable, n: number): string {
  return `${KEY_PREFIX[table]}-${String(n).padStart(4, '0')}`;
}

/** The slot a key occupies, or undefined when it is not exactly a minted-form key. */
export function slotOf(table: KeyedTable, key: string): number | undefined {
  const prefix = `${KEY_PREFIX[table]}-`;
  if (!key.startsWith(prefix)) return undefined;
  const digits = key.slice(prefix.length);
  if (!/^\d{4,}$/.test(digits)) return undefined;
  const n = Number(digits);
  return n >= 1 && slotKey(table, n) === key ? n : undefined;
}

/** Statements on the shard's writer connection (used only inside shard commands), cached by SQL text. */
export const writerStatements = shardState((shard: ShardWriter) => new StatementCache(shard.writer));

/**
 * Per org and table, a slot number below which every slot is known to be held by a live row.
 * It only ever errs low: minting probes upward from it, and freeing a slot (delete, rename) lowers it.
 */
const slotFloors = shardState((_shard: ShardWriter) => new Map<string, number>());

/** True when a live row of the organization holds `key` (optionally other than row `exceptId`). */
export function keyTaken(shard: ShardWriter, table: KeyedTable, orgId: number, key: string, exceptId = 0): boolean {
  const sql = `SELECT 1 FROM ${table} WHERE org_id = ? AND external_key = ? AND deleted_at IS NULL AND id <> ?`;
  return writerStatements(shard).get(sql).get(orgId, key, exceptId) !== undefined;
}

/**
 * The lowest unused slot key among live rows (not a counter). Must run inside the shard mailbox
 * (a shard command), which serialises every write of the shard: concurrent creates cannot mint the same slot.
 */
export function mintExternalKey(shard: ShardWriter, table: KeyedTable, orgId: number): string {
  const floors = slotFloors(shard);
  const floorKey = `${table}:${orgId}`;
  let n = floors.get(floorKey) ?? 1;
  while (keyTaken(shard, table, orgId, slotKey(table, n))) n++;
  // Not n + 1: the caller's transaction may still roll back and leave slot n free.
  floors.set(floorKey, n);
  return slotKey(table, n);
}

/** Call when a live row stops holding `key` (soft delete, rename): its slot may be minted again. */
export function releaseKeySlot(shard: ShardWriter, table: KeyedTable, orgId: number, key: string): void {
  const n = slotOf(table, key);
  if (n === undefined) return;
  const floors = slotFloors(shard);
  const floorKey = `${table}:${orgId}`;
  const floor = floors.get(floorKey);
  if (floor !== undefined && n < floor) floors.set(floorKey, n);
}
