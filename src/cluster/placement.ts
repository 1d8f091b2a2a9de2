/** FNV-1a over a string: a stable 32-bit score, the same on every node. */
function fnv1a(text: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash;
}

/**
 * Rendezvous (highest random weight) placement: the node whose score for the shard is highest.
 * Every node computes the same winner from the same set of live nodes, and a node joining or
 * leaving moves only the shards it wins or won.
 */
export function rendezvous(shard: number, nodes: Iterable<string>): string | undefined {
  let best: string | undefined;
  let bestScore = -1;
  for (const node of nodes) {
    const score = fnv1a(`${node}/${shard}`);
    if (score > bestScore || (score === bestScore && best !== undefined && node < best)) {
      best = node;
      bestScore = score;
    }
  }
  return best;
}
