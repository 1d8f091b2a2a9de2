/** FNV-1a over a string: a stable 32-bit hash, the same on every node. */
function fnv1a(text: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash;
}

/**
 * MurmurHash3's 32-bit finalizer: FNV-1a alone barely separates `a/0` from `a/1` (the last byte is
 * mixed by one multiply), so one node won every shard of a two-node cluster; this spreads every bit.
 */
function mix(hash: number): number {
  let h = hash;
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
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
    const score = mix(fnv1a(`${node}/${shard}`));
    if (score > bestScore || (score === bestScore && best !== undefined && node < best)) {
      best = node;
      bestScore = score;
    }
  }
  return best;
}
