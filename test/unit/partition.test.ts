import t from 'tap';
import { fnv1a32, misplacedOrgs, partitionFilter, partitionOfOrg, splitPartition } from '../../src/scans/partition.js';

t.test('FNV-1a 32 as nats-server computes partition()', async (t) => {
  // Published test vectors of FNV-1a 32.
  for (const [text, hash] of [
    ['', 0x811c9dc5],
    ['a', 0xe40c292c],
    ['foobar', 0xbf9cf968],
  ] as const)
    t.equal(fnv1a32(text), hash, JSON.stringify(text));
  t.same(
    [1, 2, 3, 4].map((id) => partitionOfOrg(id, 2)),
    [0, 1, 0, 1],
    'org ids 1-4 on 2 partitions (what the cluster test saw nats-server append)',
  );
});

t.test('a stored subject split into the published one and its partition', async (t) => {
  const table: [string, { subject: string; partition: number | undefined }][] = [
    ['scans.7.fixed.3', { subject: 'scans.7.fixed', partition: 3 }],
    ['readers.7.cs463.dock-1.0', { subject: 'readers.7.cs463.dock-1', partition: 0 }],
    ['scans.7.fixed', { subject: 'scans.7.fixed', partition: undefined }],
    ['scans.7.fixed.x', { subject: 'scans.7.fixed.x', partition: undefined }],
    ['scans.acme', { subject: 'scans.acme', partition: undefined }],
    ['scans.7.fixed.3.4', { subject: 'scans.7.fixed.3.4', partition: undefined }],
    ['readers.7.cs463.3', { subject: 'readers.7.cs463.3', partition: undefined }],
    ['other.7.fixed.3', { subject: 'other.7.fixed.3', partition: undefined }],
  ];
  for (const [stored, expected] of table) t.same(splitPartition(stored), expected, stored);
});

t.test('filters and misplaced orgs', async (t) => {
  t.equal(partitionFilter('scans', 5), 'scans.*.*.5');
  t.equal(partitionFilter('readers', 0), 'readers.*.*.*.0');
  t.same(
    misplacedOrgs(
      [
        { id: 1, shard: 0 },
        { id: 2, shard: 1 },
        { id: 3, shard: 2 },
      ],
      2,
    ),
    [3],
  );
});
