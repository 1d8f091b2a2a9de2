/**
 * Partitioned input subjects (SCAN_SUBJECT_PARTITIONS=on, docs/cluster.md): the nats-server's
 * account mapping appends `partition(SHARDS, org)` to every scan subject, trackd places orgs on that
 * same shard, and each shard's consumer filters its own partition, so it reads only its own
 * messages (shard 0's reads everything, to dead-letter what the mapping did not touch).
 */
import fs from 'node:fs';
import path from 'node:path';
import { jetstreamManager } from '@nats-io/jetstream';
import t from 'tap';
import { partitionMappings, partitionOfOrg } from '../../src/scans/partition.js';
import { rebuildShard } from '../../src/shards/replay.js';
import { shardFile } from '../../src/shards/writer.js';
import { served } from '../helpers/cluster.js';
import { seed } from '../helpers/masterdata.js';
import { deadLetters, drained, natsClient, publish, scanBody } from '../helpers/scans.js';
import { firstDifference, tables } from '../helpers/shardWorkload.js';
import { eventually, spawnTrackd, startNats, tempDir } from '../helpers/trackd.js';

// 3 shards: orgs 1-4 go to partitions 1, 1, 2, 1, where `(id - 1) % 3` would put them on 0, 1, 2, 0.
const SHARDS = 3;
const PER_ORG = 6;

t.test('each shard consumes its own partition; invalid and misrouted subjects are dead-lettered', async (t) => {
  const mappings = Object.entries(partitionMappings(SHARDS)).map(([from, to]) => `  "${from}": "${to}"`);
  const nats = await startNats(t, { extraConfig: ['mappings = {', ...mappings, '}'] });
  const env = {
    SHARDS: String(SHARDS),
    LEASE_SECONDS: '10',
    HTTP_THREADS: '1',
    CLUSTER_NODE_ID: 'node-a',
    SCAN_SUBJECT_PARTITIONS: 'on',
    HISTORY_GAP_SECONDS: '0',
  };
  const trackd = await spawnTrackd(t, { natsUrl: nats.url, env });
  await eventually(async () => (await served(trackd)).length === SHARDS, 60_000);

  // Four orgs: their shards are their partitions.
  const orgs: { id: number; token: string; assetId: number; tag: string }[] = [];
  for (let i = 0; i < 4; i++) {
    const org = await trackd.createOrg(`Partitioned ${i}`);
    const token = (await trackd.createKey(org.id)).token;
    const tag = `rfid:PART-${org.id}`;
    const ids = await seed(trackd, token, {
      locations: [{ external_key: 'L1' }, { external_key: 'L2' }],
      assets: [{ external_key: 'A-1', tags: [tag] }],
    });
    orgs.push({ id: org.id, token, assetId: ids.assets['A-1']!, tag });
  }
  const onShard = (shard: number) => orgs.filter((o) => partitionOfOrg(o.id, SHARDS) === shard);
  t.ok(
    onShard(1).length > 1 && onShard(2).length > 0,
    `orgs on shards 1 and 2 (${orgs.map((o) => `${o.id}:${partitionOfOrg(o.id, SHARDS)}`).join(' ')})`,
  );

  const nc = await natsClient(t, nats.url);
  const at = Date.now() - 600_000;
  const stored: { org: number; seq: number }[] = [];
  for (let k = 0; k < PER_ORG; k++)
    for (const org of orgs) {
      const { seq } = await publish(nc, `scans.${org.id}.fixed`, scanBody(k % 2 ? 'L2' : 'L1', [org.tag], new Date(at + k * 1000)));
      stored.push({ org: org.id, seq });
    }
  const jsm = await jetstreamManager(nc);
  const subjects = await Promise.all(
    stored.slice(0, orgs.length).map(async ({ seq }) => (await jsm.streams.getMessage('SCANS', { seq }))!.subject),
  );
  t.same(
    subjects,
    orgs.map((o) => `scans.${o.id}.fixed.${partitionOfOrg(o.id, SHARDS)}`),
    'the server appended the partition trackd computes (FNV-1a of the org id, as nats-server hashes)',
  );

  // Invalid subjects (the mapping leaves them alone) and a partition token not the org's own.
  const misrouted = onShard(1)[0]!;
  await publish(nc, 'scans.acme', scanBody('L1', [misrouted.tag]), null);
  await publish(nc, `scans.${misrouted.id}.fixed.0`, scanBody('L1', [misrouted.tag], new Date(at + 99_000)), null);

  for (const org of orgs) {
    const visits = await eventually(async () => {
      const res = await trackd.request('GET', `/api/v1/assets/${org.assetId}/history?limit=1`, { token: org.token });
      return res.json?.total_count === PER_ORG && res.json.total_count;
    }, 30_000).catch(() => 'not all');
    t.equal(visits, PER_ORG, `org ${org.id} (shard ${partitionOfOrg(org.id, SHARDS)}): every scan applied once`);
  }
  for (let shard = 0; shard < SHARDS; shard++) await drained(nc, 'SCANS', `trackd-scans-s${shard}`);
  const s1 = await jsm.consumers.info('SCANS', 'trackd-scans-s1');
  t.equal(s1.config.filter_subject, 'scans.*.*.1', "shard 1's consumer filters its partition");
  t.equal(s1.delivered.consumer_seq, onShard(1).length * PER_ORG, "and was delivered only its own orgs' messages");
  const s0 = await jsm.consumers.info('SCANS', 'trackd-scans-s0');
  t.notOk(s0.config.filter_subject, "shard 0's consumer takes every message (to dead-letter invalid subjects)");

  // A replay reads the stored subjects (with their partition) and routes them as published.
  const rebuildDir = tempDir('trackd-part-rebuild-');
  t.teardown(() => fs.rmSync(rebuildDir, { recursive: true, force: true }));
  for (let shard = 0; shard < SHARDS; shard++) {
    const file = path.join(rebuildDir, `rebuilt-${shard}.sqlite`);
    const rebuilt = await rebuildShard(file, { natsUrl: nats.url, replicas: 1 }, shard, { fromSnapshot: false });
    t.equal(
      firstDifference(tables(shardFile(trackd.dataDir, shard)), tables(file)),
      undefined,
      `shard ${shard}: a rebuild from its journal (${rebuilt.replayed} entries) equals the owner's file`,
    );
  }

  const dead = await eventually(async () => {
    const letters = await deadLetters(nc);
    return letters.length >= 2 && letters;
  }, 20_000);
  t.same(
    dead.map((d) => [d.originalSubject, d.reason]).sort(),
    [
      ['scans.acme', 'invalid_subject'],
      [`scans.${misrouted.id}.fixed.0`, 'invalid_subject'],
    ].sort(),
    'the subject the mapping did not touch and the one with a partition token not its org’s are dead-lettered',
  );
});

t.test('a node refuses partitioned subjects while an org lives off its partition', async (t) => {
  const nats = await startNats(t);
  const dataDir = tempDir();
  t.teardown(() => fs.rmSync(dataDir, { recursive: true, force: true }));
  const env = { SHARDS: '6', LEASE_SECONDS: '10', HTTP_THREADS: '1', CLUSTER_NODE_ID: 'node-a' };
  const before = await spawnTrackd(t, { natsUrl: nats.url, dataDir, env });
  const org = await before.createOrg('Placed by number'); // org 1 on shard 0; partition(6, "1") is 4
  t.equal(partitionOfOrg(org.id, 6), 4);
  await before.stop();
  await t.rejects(
    spawnTrackd(t, { natsUrl: nats.url, dataDir, env: { ...env, SCAN_SUBJECT_PARTITIONS: 'on' } }),
    /SCAN_SUBJECT_PARTITIONS=on: org\(s\) 1 live on another shard than partition\(6, org\)/,
  );
});
