import { conflict as conflictError } from '../errors/domain.js';
import { fieldError, type FieldError } from '../errors/catalog.js';
import { MAX_DEPTH, type LocationRow, type LocationStatements } from './store.js';

/**
 * The parent rules of a location write: a body names the parent by `parent_id`, by
 * `parent_external_key`, or by both (then they must agree, else ambiguous_fields); null on either
 * means root; a missing or deleted parent is fk_not_found on the form sent; a parent inside the
 * location's own subtree is a 409 cycle.
 */

type Side =
  | { field: 'parent_id' | 'parent_external_key'; resolved: true; target: number | null }
  | { field: 'parent_id' | 'parent_external_key'; resolved: false };

export type ParentDecision = { change: false } | { change: true; parentId: number | null };

function resolveSide(
  stmts: LocationStatements,
  orgId: number,
  field: 'parent_id' | 'parent_external_key',
  value: unknown,
  current: LocationRow | undefined,
): Side {
  if (value === null) return { field, resolved: true, target: null };
  if (field === 'parent_id') {
    // Rule 3: on PATCH a value equal to the current state is accepted before resolution.
    if (current !== undefined && value === current.parent_id) return { field, resolved: true, target: current.parent_id };
    const row = stmts.liveById.get(orgId, value) as LocationRow | undefined;
    return row === undefined ? { field, resolved: false } : { field, resolved: true, target: row.id };
  }
  if (current !== undefined && current.parent_id !== null && value === current.parent_external_key) {
    return { field, resolved: true, target: current.parent_id };
  }
  const id = stmts.liveIdByKey.get(orgId, value) as number | undefined;
  return id === undefined ? { field, resolved: false } : { field, resolved: true, target: id };
}

function notFound(side: Side, value: unknown): FieldError {
  const shown = side.field === 'parent_id' ? String(value) : `'${String(value)}'`;
  return fieldError(side.field, 'fk_not_found', `${side.field} ${shown} does not name a live location of this organization`);
}

/**
 * Resolves the parent named by a body. Field failures are appended to `errors` (fk_not_found on the
 * form that failed, ambiguous_fields on both forms when they disagree) so they are reported with the
 * request's other failures.
 */
export function resolveParent(
  stmts: LocationStatements,
  orgId: number,
  body: Record<string, unknown>,
  current: LocationRow | undefined,
  errors: FieldError[],
): ParentDecision {
  const fields = (['parent_id', 'parent_external_key'] as const).filter((f) => Object.hasOwn(body, f));
  if (fields.length === 0) return { change: false };
  const sides = fields.map((f) => resolveSide(stmts, orgId, f, body[f], current));
  const [byId, byKey] = sides;
  if (byId === undefined) return { change: false };
  if (byKey === undefined) {
    if (byId.resolved) return { change: true, parentId: byId.target };
    errors.push(notFound(byId, body[byId.field]));
    return { change: false };
  }
  if (byId.resolved && byKey.resolved && byId.target === byKey.target) return { change: true, parentId: byId.target };
  for (const side of sides) {
    if (!side.resolved) errors.push(notFound(side, body[side.field]));
    else
      errors.push(
        fieldError(
          side.field,
          'ambiguous_fields',
          'parent_id and parent_external_key name different parents; send one of them, or both naming the same parent',
        ),
      );
  }
  return { change: false };
}

/** Rule 4: a new parent may not be the location itself or lie in its subtree (409). Root is always fine. */
export function assertNoCycle(stmts: LocationStatements, orgId: number, locationId: number, parentId: number | null): void {
  if (parentId === null) return;
  if (parentId === locationId) {
    throw conflictError(`parent cycle: location ${locationId} cannot be its own parent`);
  }
  if (stmts.isInChainOf.get({ org: orgId, node: parentId, ancestor: locationId, limit: MAX_DEPTH }) === 1) {
    throw conflictError(`parent cycle: location ${parentId} is a descendant of location ${locationId}, so it cannot become its parent`);
  }
}
