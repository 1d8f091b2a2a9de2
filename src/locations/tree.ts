import type { Page } from '../masterdata/list.js';
import type { TableMemo } from '../masterdata/tableMemo.js';
import type { LocationView } from './schemas.js';
import { MAX_DEPTH, type LocationRow, type LocationStatements, type TreeNode } from './store.js';
import { toView } from './view.js';

/**
 * The tree endpoints (ancestors, children, descendants). Each lists rows in a fixed order with the default list scope
 * (live and currently effective). The walk itself goes through every live node, so a location that is
 * not currently effective is hidden without hiding the live locations below it.
 */

interface Paging {
  limit: number;
  offset: number;
}

const isEffective = (n: { valid_from: number; valid_to: number | null }, now: number) =>
  n.valid_from <= now && (n.valid_to === null || n.valid_to > now);

/** Full rows for a page of ids, returned in the order of `ids`. */
function rowsInOrder(stmts: LocationStatements, orgId: number, ids: number[]): LocationRow[] {
  if (ids.length === 0) return [];
  const byId = new Map((stmts.byIds.all(orgId, JSON.stringify(ids)) as LocationRow[]).map((r) => [r.id, r]));
  return ids.map((id) => byId.get(id)!);
}

function page(stmts: LocationStatements, orgId: number, ids: number[], paging: Paging): Page<LocationView> {
  const slice = ids.slice(paging.offset, paging.offset + paging.limit);
  return { data: rowsInOrder(stmts, orgId, slice).map(toView), limit: paging.limit, offset: paging.offset, total_count: ids.length };
}

/** Root first, walking down the parent chain to the location's parent. */
export function ancestors(stmts: LocationStatements, orgId: number, id: number, now: number, paging: Paging): Page<LocationView> {
  const chain = stmts.ancestors.all({ org: orgId, id, limit: MAX_DEPTH }) as Array<
    TreeNode & { deleted_at: number | null; distance: number }
  >;
  const visible = chain
    .filter((n) => n.deleted_at === null && isEffective(n, now))
    .sort((a, b) => b.distance - a.distance || a.id - b.id)
    .map((n) => n.id);
  return page(stmts, orgId, visible, paging);
}

/** Immediate children by name, then id: straight off the (org_id, parent_id, name, id) index. */
export function children(stmts: LocationStatements, orgId: number, id: number, now: number, paging: Paging): Page<LocationView> {
  const params = { org: orgId, id, now, limit: paging.limit, offset: paging.offset };
  const rows = stmts.childrenPage.all(params) as LocationRow[];
  const total = stmts.childrenCount.get({ org: orgId, id, now }) as number;
  return { data: rows.map(toView), limit: paging.limit, offset: paging.offset, total_count: total };
}

/** Ids of the live subtree under `rootId` in depth-first preorder, siblings by id ascending. */
export function preorder(rootId: number, nodes: TreeNode[]): TreeNode[] {
  const kids = new Map<number, TreeNode[]>();
  for (const n of nodes) {
    const list = kids.get(n.parent_id!);
    if (list === undefined) kids.set(n.parent_id!, [n]);
    else list.push(n);
  }
  for (const list of kids.values()) list.sort((a, b) => a.id - b.id);
  const out: TreeNode[] = [];
  // An explicit stack (children pushed in reverse) keeps a 10,000-deep chain off the call stack.
  const stack: TreeNode[] = [...(kids.get(rootId) ?? [])].reverse();
  while (stack.length > 0) {
    const n = stack.pop()!;
    out.push(n);
    const list = kids.get(n.id);
    if (list !== undefined) for (let i = list.length - 1; i >= 0; i--) stack.push(list[i]!);
  }
  return out;
}

/** The visible subtree is walked once and kept (TableMemo) until a location write or validity boundary: every page reuses it. */
export function descendants(
  stmts: LocationStatements,
  orgId: number,
  id: number,
  now: number,
  paging: Paging,
  memo?: TableMemo<number[]>,
): Page<LocationView> {
  const walk = () =>
    preorder(id, stmts.subtree.all({ org: orgId, id }) as TreeNode[])
      .filter((n) => isEffective(n, now))
      .map((n) => n.id);
  return page(stmts, orgId, memo === undefined ? walk() : memo.get(`${orgId} ${id}`, now, walk), paging);
}
