import { rowErrors } from './batch.js';
import type { JudgedRow } from './judge.js';

/**
 * A location file in tree order: a row that names its parent by `parent_external_key` comes after
 * the row of the file that creates that parent, wherever the parent stood in the file; rows whose
 * parent is not in the file keep their file order (their parent is looked up in the shard). Rows
 * whose parents run in a circle within the file fail with `conflict` on parent_external_key, and so
 * (at the shard, fk_not_found) do the rows below them.
 */
export function orderTree(rows: JudgedRow[]): JudgedRow[] {
  const byKey = new Map<string, number>();
  rows.forEach((row, i) => {
    if (!('errors' in row) && typeof row.body.external_key === 'string') byKey.set(row.body.external_key, i);
  });
  const parentOf = (i: number): number | undefined => {
    const row = rows[i]!;
    if ('errors' in row) return undefined;
    const key = row.body.parent_external_key;
    if (typeof key !== 'string' || row.body.parent_id !== undefined) return undefined;
    const parent = byKey.get(key);
    return parent === i ? undefined : parent;
  };
  const children = new Map<number, number[]>();
  const roots: number[] = [];
  rows.forEach((_, i) => {
    const parent = parentOf(i);
    if (parent === undefined) roots.push(i);
    else {
      const list = children.get(parent);
      if (list === undefined) children.set(parent, [i]);
      else list.push(i);
    }
  });
  const placed = new Uint8Array(rows.length);
  const out: JudgedRow[] = [];
  // Breadth first from the rows whose parent is outside the file: every parent precedes its children.
  for (let head = 0, queue = roots; head < queue.length; head++) {
    const i = queue[head]!;
    placed[i] = 1;
    out.push(rows[i]!);
    for (const child of children.get(i) ?? []) queue.push(child);
  }
  rows.forEach((row, i) => {
    if (placed[i] === 1) return;
    // Not reachable from outside the file: its chain of parents in the file is a circle (or hangs below one).
    const chain = cycleThrough(i, parentOf);
    out.push({
      row: row.row,
      errors: rowErrors(row.row, [
        {
          field: 'parent_external_key',
          code: chain !== undefined ? 'conflict' : 'fk_not_found',
          message:
            chain !== undefined
              ? `parent cycle within the file: rows ${chain.map((r) => rows[r]!.row).join(' -> ')}`
              : `parent_external_key '${String((row as { body: Record<string, unknown> }).body.parent_external_key)}' hangs below a parent cycle of this file`,
        },
      ]),
    });
  });
  return out;
}

/** The circle `i` lies on, following parents within the file, or undefined when `i` only hangs below one. */
function cycleThrough(i: number, parentOf: (i: number) => number | undefined): number[] | undefined {
  const chain: number[] = [i];
  const seen = new Set<number>([i]);
  for (let at = parentOf(i); at !== undefined; at = parentOf(at)) {
    if (at === i) return [...chain, i];
    if (seen.has(at)) return undefined;
    seen.add(at);
    chain.push(at);
  }
  return undefined;
}
