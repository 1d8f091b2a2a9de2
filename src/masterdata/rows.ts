import { conflict as conflictError, notFound as notFoundError, type DomainError } from '../errors/domain.js';
import type { ShardWriter } from '../shards/writer.js';
import { keyTaken, mintExternalKey, releaseKeySlot, writerStatements, type KeyedTable } from './keys.js';
import { nextUpdatedAt } from './rules.js';

/** The noun used in details for a keyed table. */
const NOUN: Record<KeyedTable, string> = { assets: 'asset', locations: 'location' };

export function notFound(table: KeyedTable, id: number): DomainError {
  return notFoundError(`${NOUN[table]} ${id} not found`);
}

export function keyConflict(table: KeyedTable, key: string): DomainError {
  return conflictError(`external_key '${key}' is already used by another live ${NOUN[table]} in this organization`);
}

/** 409 unless `key` is free among the organization's live rows (other than `exceptId`). Writer side. */
export function assertKeyFree(shard: ShardWriter, table: KeyedTable, orgId: number, key: string, exceptId = 0): void {
  if (keyTaken(shard, table, orgId, key, exceptId)) throw keyConflict(table, key);
}

/** The key a create stores: the caller's (409 when a live row holds it) or the lowest free minted slot. */
export function claimExternalKey(shard: ShardWriter, table: KeyedTable, orgId: number, requested: string | undefined): string {
  if (requested === undefined) return mintExternalKey(shard, table, orgId);
  assertKeyFree(shard, table, orgId, requested);
  return requested;
}

export interface LiveKeyRow {
  id: number;
  external_key: string;
  updated_at: number;
}

/** The live row's key and updated_at, or 404 (missing, soft-deleted or another organization's). Writer side. */
export function liveRowForWrite(shard: ShardWriter, table: KeyedTable, orgId: number, id: number): LiveKeyRow {
  const sql = `SELECT id, external_key, updated_at FROM ${table} WHERE id = ? AND org_id = ? AND deleted_at IS NULL`;
  const row = writerStatements(shard).get(sql).get(id, orgId) as LiveKeyRow | undefined;
  if (row === undefined) throw notFound(table, id);
  return row;
}

/**
 * Renames a live row's external_key: the same key is a no-op (updated_at unchanged);
 * a key held by another live row is 409. Writer side, inside a shard command. Returns whether it changed.
 */
export function renameRow(shard: ShardWriter, table: KeyedTable, orgId: number, id: number, newKey: string, now: number): boolean {
  const row = liveRowForWrite(shard, table, orgId, id);
  if (row.external_key === newKey) return false;
  assertKeyFree(shard, table, orgId, newKey, id);
  const sql = `UPDATE ${table} SET external_key = ?, updated_at = ? WHERE id = ? AND org_id = ?`;
  writerStatements(shard).get(sql).run(newKey, nextUpdatedAt(row.updated_at, now), id, orgId);
  releaseKeySlot(shard, table, orgId, row.external_key);
  return true;
}

/** Soft-deletes a live row (frees its key); 404 when it is not live. Writer side, inside a shard command. Returns the key it held. */
export function softDeleteRow(shard: ShardWriter, table: KeyedTable, orgId: number, id: number, now: number): string {
  const row = liveRowForWrite(shard, table, orgId, id);
  writerStatements(shard).get(`UPDATE ${table} SET deleted_at = ? WHERE id = ? AND org_id = ?`).run(now, id, orgId);
  releaseKeySlot(shard, table, orgId, row.external_key);
  return row.external_key;
}
