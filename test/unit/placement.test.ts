/** Rendezvous placement of shards on nodes (src/cluster/placement.ts): balanced, and a node leaving moves only its own shards. */
import t from 'tap';
import { rendezvous } from '../../src/cluster/placement.js';

const SHARDS = Array.from({ length: 64 }, (_, i) => i);
const placed = (nodes: string[]) => SHARDS.map((shard) => rendezvous(shard, nodes)!);

t.test('every node of a cluster wins a fair part of the shards', async (t) => {
  for (const nodes of [
    ['node-a', 'node-b'],
    ['a', 'b'],
    ['n1', 'n2', 'n3'],
    ['trackd-1', 'trackd-2', 'trackd-3', 'trackd-4'],
  ]) {
    const counts = new Map(nodes.map((n) => [n, 0]));
    for (const node of placed(nodes)) counts.set(node, counts.get(node)! + 1);
    const fair = SHARDS.length / nodes.length;
    t.ok(
      [...counts.values()].every((c) => c >= fair / 2 && c <= fair * 1.5),
      `${nodes.join(', ')}: ${JSON.stringify(Object.fromEntries(counts))} (fair ${fair})`,
    );
  }
});

t.test('the same winner on every node, and a node leaving moves only the shards it won', async (t) => {
  const three = ['n1', 'n2', 'n3'];
  t.same(placed(three), placed(['n3', 'n1', 'n2']), 'the order the nodes are listed in does not matter');
  const before = placed(three);
  const after = placed(['n1', 'n3']);
  t.ok(
    SHARDS.every((s) => before[s] === 'n2' || after[s] === before[s]),
    'every shard not won by the node that left keeps its node',
  );
  t.equal(rendezvous(0, []), undefined, 'no node: no winner');
});
