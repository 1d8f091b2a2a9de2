/**
 * Input subjects partitioned by shard (cluster mode, `SCAN_SUBJECT_PARTITIONS=on`): the nats-server
 * accounts map every publish on `scans.<org>.<source>` to `scans.<org>.<source>.<p>` (and
 * `readers.<org>.<format>.<reader>` to `…<reader>.<p>`), `p` being `partition(SHARDS, org)`, so
 * that shard p's consumers take only their own messages (README, "Running a cluster"). trackd places
 * each org on shard p too: the same FNV-1a hash nats-server computes (server/accounts.go,
 * getHashPartition, v2.9.10: fnv.New32a over the token's bytes, modulo the partition count).
 */

/** Whether this process runs with partitioned input subjects (cluster mode only). */
export const partitionedSubjects = (config: { SCAN_SUBJECT_PARTITIONS: 'on' | 'off'; CLUSTER_NODE_ID?: string }) =>
  config.SCAN_SUBJECT_PARTITIONS === 'on' && config.CLUSTER_NODE_ID !== undefined && config.CLUSTER_NODE_ID !== '';

/** FNV-1a, 32 bits, of a string's UTF-8 bytes. */
export function fnv1a32(text: string): number {
  let hash = 0x811c9dc5;
  for (const byte of Buffer.from(text, 'utf8')) {
    hash ^= byte;
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash >>> 0;
}

/** The partition nats-server's `partition(count, 1)` maps an org's subjects to: its shard. */
export const partitionOfOrg = (orgId: number, count: number) => fnv1a32(String(orgId)) % count;

/** The orgs (ids) placed on another shard than their partition: created before partitioned subjects were on. */
export const misplacedOrgs = (orgs: { id: number; shard: number }[], shards: number): number[] =>
  orgs.filter((org) => org.shard !== partitionOfOrg(org.id, shards)).map((org) => org.id);

/** Tokens of a subject as publishers send it, per input stream prefix. */
const PUBLISHED_TOKENS: Record<string, number> = { scans: 3, readers: 4 };

/**
 * A stored subject and the partition token the mapping appended; the subject without it is the
 * one the publisher sent. A subject the mapping did not touch (too few or many tokens: an invalid
 * one, dead-lettered as such) comes back whole, without a partition.
 */
export function splitPartition(subject: string): { subject: string; partition: number | undefined } {
  const tokens = subject.split('.');
  const published = PUBLISHED_TOKENS[tokens[0] ?? ''];
  const last = tokens.at(-1) ?? '';
  if (published === undefined || tokens.length !== published + 1 || !/^\d{1,9}$/.test(last)) return { subject, partition: undefined };
  return { subject: tokens.slice(0, -1).join('.'), partition: Number(last) };
}

/** The filter of shard `index`'s consumer of a stream whose subjects start with `prefix` (`scans`, `readers`). */
export function partitionFilter(prefix: string, index: number): string {
  const published = PUBLISHED_TOKENS[prefix];
  if (published === undefined) throw new Error(`no partitioned subjects for ${prefix}`);
  return `${[prefix, ...Array.from({ length: published - 1 }, () => '*')].join('.')}.${index}`;
}

/** The accounts' mappings for nats-server's configuration (`mappings = { … }`), for `shards` shards. */
export function partitionMappings(shards: number): Record<string, string> {
  return {
    'scans.*.*': `scans.{{wildcard(1)}}.{{wildcard(2)}}.{{partition(${shards},1)}}`,
    'readers.*.*.*': `readers.{{wildcard(1)}}.{{wildcard(2)}}.{{wildcard(3)}}.{{partition(${shards},1)}}`,
  };
}
