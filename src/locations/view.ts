import { masterView } from '../masterdata/view.js';
import type { LocationView } from './schemas.js';
import type { LocationRow } from './store.js';

/** LocationView in the field order the interface publishes. */
export function toView(row: LocationRow): LocationView {
  const { id, external_key, name, description, ...rest } = masterView(row);
  return {
    id,
    external_key,
    name,
    description,
    parent_id: row.parent_id,
    parent_external_key: row.parent_id === null ? null : row.parent_external_key,
    ...rest,
  };
}
