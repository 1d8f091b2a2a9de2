import type { TagView } from './fields.js';
import { formatNullableTimestamp, formatTimestamp } from '../wire/timestamps.js';
import { parseTagsJson } from './tags.js';

/** The columns every master-data row shares (assets and locations), times as epoch ms. */
export interface MasterRow {
  id: number;
  external_key: string;
  name: string;
  description: string | null;
  is_active: number;
  valid_from: number;
  valid_to: number | null;
  created_at: number;
  updated_at: number;
  deleted_at: number | null;
  /** From `tagsJsonColumn`. */
  tags_json: string | null;
}

export const MASTER_COLUMNS = [
  'id',
  'external_key',
  'name',
  'description',
  'is_active',
  'valid_from',
  'valid_to',
  'created_at',
  'updated_at',
  'deleted_at',
] as const;

/** `a.id, a.external_key, ...` for SQL text. */
export function masterColumns(alias: string): string[] {
  return MASTER_COLUMNS.map((c) => `${alias}.${c}`);
}

export interface MasterView {
  id: number;
  external_key: string;
  name: string;
  description: string | null;
  is_active: boolean;
  valid_from: string;
  valid_to: string | null;
  created_at: string;
  updated_at: string;
  deleted_at: string | null;
  tags: TagView[];
}

/** The shared part of AssetView / LocationView, timestamps in the outbound `.NNNZ` form. */
export function masterView(row: MasterRow): MasterView {
  return {
    id: row.id,
    external_key: row.external_key,
    name: row.name,
    description: row.description,
    is_active: row.is_active === 1,
    valid_from: formatTimestamp(row.valid_from),
    valid_to: formatNullableTimestamp(row.valid_to),
    created_at: formatTimestamp(row.created_at),
    updated_at: formatTimestamp(row.updated_at),
    deleted_at: formatNullableTimestamp(row.deleted_at),
    tags: parseTagsJson(row.tags_json),
  };
}
