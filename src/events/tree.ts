/** A location as an event names it. */
export interface NodeRef {
  id: number;
  external_key: string;
}

/**
 * The locations a move enters and leaves along the tree, given the chains (root first, the location
 * itself last) of where the asset was and where it is now: whatever lies above or at one location and
 * not above or at the other. A move between two rooms of building A enters the one room, leaves the
 * other and neither enters nor leaves A. Entered: outermost first (as one walks in); left: innermost
 * first (as one walks out).
 */
export function enteredAndLeft<Node extends NodeRef>(from: readonly Node[], to: readonly Node[]): { entered: Node[]; left: Node[] } {
  // Chains share a prefix (the common ancestors): the first position where they differ splits them.
  let common = 0;
  while (common < from.length && common < to.length && from[common]!.id === to[common]!.id) common++;
  return { entered: to.slice(common), left: from.slice(common).reverse() };
}
