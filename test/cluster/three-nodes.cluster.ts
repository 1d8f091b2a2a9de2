/**
 * The cluster test of issue 12: three nats-servers (clustered, JetStream, every stream and bucket
 * with 3 copies) and three trackd nodes, scans published and assets written through every live node
 * the whole time, while
 *   1. node C is killed -9 (its shards move to A and B),
 *   2. node B is SIGSTOPped past the lease (A takes its shards) and resumed (it gives them up),
 *   3. the nats-server leading the journal stream is killed -9.
 * Afterwards: every published scan applied exactly once (one visit per scan, scans alternate between
 * two locations), every acknowledged write present, each shard's tables on its owner equal to a
 * fresh rebuild from its latest snapshot plus the journal and to its standby's file, and the writes to the shards that never
 * moved were never refused outside the broker's own election.
 *
 * Run by `npm run test:cluster`, not by `npm test`: about 3 minutes of three nats-servers and three
 * trackd nodes on this 2-core machine (README, "Running a cluster").
 */
import fs from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import Database from 'better-sqlite3';
import { jetstreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import t from 'tap';
import { shardFile } from '../../src/shards/writer.js';
import { JOURNAL_STREAM } from '../../src/shards/journalEntry.js';
import { rebuildShard } from '../../src/shards/replay.js';
import { LEASE_BUCKET } from '../../src/cluster/leaseBucket.js';
import { quietBeforeClaim, served, standbyShards, watchLeases } from '../helpers/cluster.js';
import { startNatsCluster } from '../helpers/natsCluster.js';
import { drained, natsClient, publish, scanBody } from '../helpers/scans.js';
import { firstDifference, tables } from '../helpers/shardWorkload.js';
import { eventually, spawnTrackd, tempDir, type Trackd } from '../helpers/trackd.js';

const SHARDS = 6;
// CLUSTER_TEST_LEASE_SECONDS: to try other lease periods (README, "Running a cluster").
const LEASE_SECONDS = Number(process.env.CLUSTER_TEST_LEASE_SECONDS ?? 10);
const ALL = Array.from({ length: SHARDS }, (_, i) => i);

interface Org {
  id: number;
  shard: number;
  token: string;
  assetId: number;
  tag: string;
  /** Scans acknowledged by JetStream (each a new visit: they alternate between L1 and L2). */
  published: number;
  clock: number;
  /** Each acknowledged scan: its SCANS sequence, its observed time (ms), its event id and whether JetStream called it a duplicate. */
  scans: { seq: number; at: number; eventId: string; duplicate: boolean }[];
}

t.test(
  'three nodes on three nats-servers: a node killed, a node paused, the journal leader killed; nothing lost or applied twice',
  async (t) => {
    const cluster = await startNatsCluster(t, 3);
    const nc = await natsClient(t, cluster.url);
    const env = {
      SHARDS: String(SHARDS),
      LEASE_SECONDS: String(LEASE_SECONDS),
      JOURNAL_REPLICAS: '3',
      HTTP_THREADS: '1',
      SNAPSHOT_EVERY_ENTRIES: '10',
      // With the logs kept, each scan batch's sequences and outcomes too (what a lost scan is traced by).
      ...(process.env.CLUSTER_TEST_LOGS ? { LOG_LEVEL: 'debug' } : {}),
    };
    const names = ['node-a', 'node-b', 'node-c'];
    const nodes = await Promise.all(
      names.map((name) => spawnTrackd(t, { natsUrl: cluster.url, dataDir: tempDir(), env: { ...env, CLUSTER_NODE_ID: name } })),
    );
    const nameOf = (node: Trackd) => node.env.CLUSTER_NODE_ID;
    const leaseMovesSince = (since: number) =>
      nodes
        .flatMap((node) => node.logs())
        .filter((l) => l.msg === 'cluster shard lease acquired: starting its actor' && l.from && Date.parse(l.time) >= since);
    t.teardown(() => {
      for (const node of nodes) node.process.kill('SIGCONT');
    });
    if (process.env.CLUSTER_TEST_LOGS)
      t.teardown(() => {
        // A teardown that throws leaves the nodes running until the file's timeout.
        fs.mkdirSync(process.env.CLUSTER_TEST_LOGS!, { recursive: true });
        for (const [i, node] of nodes.entries())
          fs.writeFileSync(
            path.join(process.env.CLUSTER_TEST_LOGS!, `3n-${names[i]}.log`),
            node
              .logs()
              .map((l) => JSON.stringify(l))
              .join('\n'),
          );
      });

    const split = await eventually(
      async () => {
        const each = await Promise.all(nodes.map(served));
        return each.flat().length === SHARDS && each;
      },
      120_000,
      200,
    );
    t.same(split.flat().sort(), ALL, `the three nodes split the ${SHARDS} shards (${split.map((s) => s.join(',')).join(' / ')})`);
    // Roles: the node with the most shards is killed; of the two left, one that serves shards then is
    // paused, preferably the one that started with fewer (the other's first shards never move).
    const initial = new Map(nodes.map((node, i) => [node, split[i]!]));
    const [killed, ...rest] = [...nodes].sort((x, y) => initial.get(y)!.length - initial.get(x)!.length) as [Trackd, Trackd, Trackd];

    // One org per shard (org ids are numbered onto shards), made through the CLI of one node.
    const orgs: Org[] = [];
    for (let i = 0; i < SHARDS; i++) {
      const org = await nodes[0]!.createOrg(`Org ${i}`);
      const key = await nodes[0]!.createKey(org.id, ['assets:read', 'assets:write', 'locations:read', 'locations:write', 'tracking:read']);
      orgs.push({
        id: org.id,
        shard: (org.id - 1) % SHARDS,
        token: key.token,
        assetId: 0,
        tag: `rfid:EPC3N-${i}`,
        published: 0,
        clock: Date.now() - 3_600_000,
        scans: [],
      });
    }
    t.same(orgs.map((o) => o.shard).sort(), ALL, 'one org on each shard');
    // Through every node: the owner serves, the others forward.
    for (const [i, org] of orgs.entries()) {
      const node = nodes[i % 3]!;
      for (const key of ['L1', 'L2']) {
        const res = await eventually(async () => {
          const r = await node.http('POST', '/api/v1/locations', { token: org.token, body: { external_key: key, name: key } });
          return r.status !== 401 && r;
        }, 5000);
        t.equal(res.status, 201, `org ${org.id}: location ${key} created through ${names[i % 3]}`);
      }
      const asset = await node.http('POST', '/api/v1/assets', {
        token: org.token,
        body: { name: `Tracked ${org.id}`, tags: [{ tag_type: 'rfid', value: org.tag.slice(5) }] },
      });
      t.equal(asset.status, 201, `org ${org.id}: asset created`);
      org.assetId = asset.json.data.id;
    }

    // The load: scans for every org, asset writes through every live node, until told to stop.
    const live = new Set<Trackd>(nodes);
    let loading = true;
    const scanLoad = (async () => {
      while (loading) {
        for (const org of orgs) {
          org.clock += 1000;
          const body = scanBody((org.published + 1) % 2 ? 'L1' : 'L2', [org.tag], new Date(org.clock));
          // Retried with the same event id (and Nats-Msg-Id) until acknowledged: a duplicate is dropped by both.
          for (;;) {
            try {
              const { seq, duplicate } = await publish(nc, `scans.${org.id}.fixed`, body);
              org.scans.push({ seq, at: org.clock, eventId: body.event_id!, duplicate });
              break;
            } catch {
              await sleep(250);
            }
          }
          org.published++;
        }
        await sleep(100);
      }
    })();
    const acked: { org: Org; id: number; at: number }[] = [];
    const refused: { org: Org; status: number; at: number; sentAt: number; node: Trackd; detail: string }[] = [];
    let sent = 0;
    const writeLoad = (async () => {
      while (loading) {
        const nodes = [...live];
        const node = nodes[sent % nodes.length]!;
        const org = orgs[sent % orgs.length]!;
        sent++;
        const sentAt = Date.now();
        const res = await node.http('POST', '/api/v1/assets', { token: org.token, body: { name: `W${sent}` } }).catch(() => undefined);
        if (res?.status === 201) acked.push({ org, id: res.json.data.id, at: Date.now() });
        else if (res !== undefined)
          refused.push({ org, status: res.status, at: Date.now(), sentAt, node, detail: res.json?.error?.detail ?? res.text });
        await sleep(50);
      }
    })();
    await sleep(3000);

    // 1. The node with the most shards killed -9.
    live.delete(killed);
    killed.process.kill('SIGKILL');
    const killedAt = Date.now();
    const after = await eventually(
      async () => {
        const each = await Promise.all(rest.map(served));
        return each.flat().length === SHARDS && each;
      },
      120_000,
      200,
    );
    t.comment(
      `kill -9 of ${nameOf(killed)}: its shards ${initial.get(killed)!.join(',')} served again by the others ${Date.now() - killedAt} ms later (lease ${LEASE_SECONDS} s)`,
    );

    // 2. A node serving shards paused past its lease, then resumed: the last one takes everything.
    const candidates = rest.filter((_, i) => after[i]!.length > 0);
    const paused = candidates.sort((x, y) => initial.get(x)!.length - initial.get(y)!.length)[0]!;
    const survivor = rest.find((node) => node !== paused)!;
    const held = await served(paused);
    live.delete(paused);
    // "Not before a lease period" counts from the paused node's last renewal, which the pause may follow by a renewal interval.
    const leaseWrites = await watchLeases(t, nc);
    await eventually(() => held.every((shard) => leaseWrites.some((w) => w.shard === shard && w.node === nameOf(paused))), 60_000, 50);
    paused.process.kill('SIGSTOP');
    const pausedAt = Date.now();
    await eventually(async () => (await served(survivor)).length === SHARDS, 120_000, 200);
    const afterPause = Date.now() - pausedAt;
    t.comment(`SIGSTOP of ${nameOf(paused)}: its shards ${held.join(',')} served by ${nameOf(survivor)} ${afterPause} ms later`);
    for (const shard of held) {
      const quiet = quietBeforeClaim(leaseWrites, shard, nameOf(paused)!, nameOf(survivor)!);
      // 250 ms for the two writes' trips to this client through the servers' routes, which need not take the same time.
      t.ok(
        quiet >= LEASE_SECONDS * 1000 - 250,
        `shard ${shard}: claimed ${quiet} ms after the paused node's last renewal, not before a lease period`,
      );
    }
    paused.process.kill('SIGCONT');
    const resumedAt = Date.now();
    const resumedServes = await eventually(
      async () => {
        const shards = await served(paused);
        return shards.length === 0 && shards;
      },
      60_000,
      200,
    );
    t.same(resumedServes, [], `the resumed ${nameOf(paused)} serves no shard`);
    live.add(paused);

    // 3. The nats-server that leads the journal stream killed -9.
    const jsm = await jetstreamManager(nc);
    const leader = (await jsm.streams.info(JOURNAL_STREAM)).cluster?.leader;
    const victim = cluster.servers.find((s) => s.name === leader);
    t.ok(victim, `the journal's leader is one of the three servers (${leader})`);
    // The lease bucket's leader moved onto the same server first (each step-down elects one of the
    // other two), so that its kill also stops every renewal and heartbeat until an election.
    const leasesStream = `KV_${LEASE_BUCKET}`;
    let leasesLeader = (await jsm.streams.info(leasesStream)).cluster?.leader;
    for (let i = 0; i < 8 && leasesLeader !== leader; i++) {
      await nc.request(`$JS.API.STREAM.LEADER.STEPDOWN.${leasesStream}`, undefined, { timeout: 10_000 }).catch(() => undefined);
      leasesLeader = await eventually(async () => (await jsm.streams.info(leasesStream)).cluster?.leader, 60_000, 200);
    }
    t.comment(`the lease bucket's leader: ${leasesLeader} (the journal's: ${leader})`);
    victim!.kill('SIGKILL');
    const brokerKilledAt = Date.now();
    const beforeBroker = acked.length;
    await eventually(() => acked.length > beforeBroker + 5, 120_000, 100);
    t.comment(`kill -9 of nats-server ${leader} (journal leader): writes acknowledged again ${Date.now() - brokerKilledAt} ms later`);
    const newLeader = await eventually(async () => (await jsm.streams.info(JOURNAL_STREAM)).cluster?.leader, 60_000, 200);
    t.not(newLeader, leader, `the journal has a new leader (${newLeader})`);
    t.comment(
      `leases taken from a holder after the broker's kill: ${
        leaseMovesSince(brokerKilledAt)
          .map((l) => `shard ${l.shard} from ${l.from}`)
          .join(', ') || 'none'
      }`,
    );
    await sleep(2000);

    loading = false;
    await Promise.all([scanLoad, writeLoad]);
    // The resumed node may take a shard back that was given up meanwhile (fenced during the broker's election).
    const owners = await eventually(
      async () => {
        const owner = new Map<number, Trackd>();
        for (const node of [survivor, paused]) for (const shard of await served(node)) owner.set(shard, node);
        return owner.size === SHARDS && owner;
      },
      60_000,
      200,
    );
    t.same([...owners.keys()].sort(), ALL, 'every shard is served by a live node at the end');
    for (const shard of ALL) await drained(nc, 'SCANS', `trackd-scans-s${shard}`);

    // Every published scan applied exactly once.
    for (const org of orgs) {
      const res = await survivor.http('GET', `/api/v1/assets/${org.assetId}/history?limit=1`, { token: org.token });
      t.equal(
        res.json?.total_count,
        org.published,
        `org ${org.id}: its ${org.published} scans made ${org.published} visits${res.json?.total_count === org.published ? '' : await missingScans(survivor, org, nodes, nc)}`,
      );
    }
    // Every acknowledged write present, read through either live node.
    let missing = 0;
    for (const [i, write] of acked.entries()) {
      const res = await [survivor, paused][i % 2]!.http('GET', `/api/v1/assets/${write.id}`, { token: write.org.token });
      if (res.status !== 200) missing++;
    }
    t.equal(missing, 0, `every acknowledged write is there (${acked.length} acknowledged, ${refused.length} refused)`);
    t.ok(
      refused.every((r) => r.status === 503),
      `a refused write is a 503, nothing else (${[...new Set(refused.map((r) => `${r.status} ${r.detail}`))].slice(0, 3).join('; ')})`,
    );
    // The shards that never moved: refused only while the broker elected a leader.
    const unmoved = initial.get(survivor)!;
    // A request sent to the node that was then paused waited past its forwarding deadline: its 503 is the pause's.
    const unmovedRefusals = refused.filter(
      (r) => unmoved.includes(r.org.shard) && r.at < brokerKilledAt && !(r.node === paused && r.sentAt < resumedAt),
    );
    t.same(
      unmovedRefusals.map((r) => `${nameOf(r.node)}: ${r.status} ${r.detail}`),
      [],
      `no write to a shard that never moved (${unmoved.join(',')}) refused before the broker was killed, but for one caught in the pause`,
    );
    t.comment(
      `refusals on unmoved shards during the broker's election: ${refused.filter((r) => unmoved.includes(r.org.shard) && r.at >= brokerKilledAt).length}`,
    );

    // Each shard on its owner equals a fresh rebuild from its latest snapshot plus the journal.
    const dir = tempDir('trackd-3n-rebuild-');
    t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
    for (const shard of ALL) {
      const difference = await eventually(
        async () => {
          const file = path.join(dir, `rebuilt-${shard}-${Date.now()}.sqlite`);
          const rebuilt = await rebuildShard(file, { natsUrl: cluster.url, replicas: 3 }, shard, { fromSnapshot: true });
          const diff = firstDifference(tables(shardFile(owners.get(shard)!.dataDir, shard)), tables(file));
          return diff === undefined ? { rebuilt } : undefined;
        },
        // Retried: on nats-server before 2.12 an ephemeral consumer (the object store's reader, the
        // journal's) may be placed on the killed server and its creation times out (nats-server#7165).
        180_000,
        500,
      ).then(
        (ok) => `equal (snapshot ${ok.rebuilt.snapshot ? 'restored' : 'none'}, ${ok.rebuilt.replayed} entries replayed)`,
        (err: Error) => err.message,
      );
      t.match(difference, /^equal/, `shard ${shard}: the owner's tables equal a rebuild from snapshot plus journal: ${difference}`);
    }
    // ... and the standby's file: with two live nodes, each follows the other's shards.
    for (const shard of ALL) {
      const owner = owners.get(shard)!;
      const standby = owner === survivor ? paused : survivor;
      const equal = await eventually(
        async () =>
          (await standbyShards(standby)).includes(shard) &&
          firstDifference(tables(shardFile(owner.dataDir, shard)), tables(shardFile(standby.dataDir, shard))) === undefined,
        60_000,
        500,
      ).catch(() => false);
      t.ok(equal, `shard ${shard}: ${nameOf(standby)} is its standby, and its file equals the owner's (${nameOf(owner)}), table by table`);
    }
  },
);

/**
 * The acknowledged scans of an org that no visit starts at: their SCANS sequences, and for each what
 * every node's shard file says of it (the killed node's file included: whether its live apply made
 * the visit tells a live-apply fault from a replay fault), and whether it was dead-lettered.
 */
async function missingScans(node: Trackd, org: Org, nodes: Trackd[], nc: NatsConnection): Promise<string> {
  const seen = new Set<number>();
  for (let offset = 0; ; offset += 200) {
    const page = await node.http('GET', `/api/v1/assets/${org.assetId}/history?limit=200&offset=${offset}`, { token: org.token });
    const rows = (page.json?.data ?? []) as { event_observed_at: string }[];
    for (const row of rows) seen.add(Date.parse(row.event_observed_at));
    if (rows.length < 200) break;
  }
  const missing = org.scans.filter((s) => !seen.has(s.at));
  const dead = await deadLetteredSeqs(nc);
  const lines = missing.map((scan) => {
    const files = nodes.map((n) => `${n.env.CLUSTER_NODE_ID}: ${shardFileSays(shardFile(n.dataDir, org.shard), org.id, scan)}`);
    return `${scan.seq}${scan.duplicate ? ' (publish ack: duplicate)' : ''}${dead.has(scan.seq) ? ` dead-lettered: ${dead.get(scan.seq)}` : ''} [${files.join('; ')}]`;
  });
  return ` (no visit starts at the scan of SCANS sequence ${missing.map((s) => s.seq).join(', ') || 'none'}: ${lines.join(' | ')})`;
}

/** What one shard file holds of a scan: its event id remembered, a visit at its time, the file's applied SCANS sequence. */
function shardFileSays(file: string, orgId: number, scan: { at: number; eventId: string }): string {
  if (!fs.existsSync(file)) return 'no file';
  const db = new Database(file, { readonly: true, fileMustExist: true });
  try {
    const event = db.prepare('SELECT 1 FROM scan_events WHERE org_id = ? AND event_id = ?').get(orgId, scan.eventId) !== undefined;
    const visit = db.prepare('SELECT location_id FROM scan_history WHERE event_observed_at = ?').get(scan.at) as
      | { location_id: number }
      | undefined;
    const applied = db.prepare("SELECT applied_seq FROM scan_ingest_state WHERE stream = 'SCANS'").get() as
      | { applied_seq: number }
      | undefined;
    return `event id ${event ? 'seen' : 'unseen'}, visit ${visit === undefined ? 'none' : `at location ${visit.location_id}`}, SCANS applied ${applied?.applied_seq ?? 0}`;
  } catch (err) {
    return `unreadable (${(err as Error).message})`;
  } finally {
    db.close();
  }
}

/** SCANS sequences copied to scans_dead, with their reasons. */
async function deadLetteredSeqs(nc: NatsConnection): Promise<Map<number, string>> {
  const out = new Map<number, string>();
  const jsm = await jetstreamManager(nc);
  const { state } = await jsm.streams.info('SCANS_DEAD').catch(() => ({ state: { first_seq: 0, last_seq: 0 } }));
  for (let seq = state.first_seq; seq > 0 && seq <= state.last_seq; seq++) {
    const msg = await jsm.streams.getMessage('SCANS_DEAD', { seq }).catch(() => undefined);
    const original = Number(msg?.header?.get('Trackd-Original-Seq'));
    if (original > 0) out.set(original, msg!.header!.get('Trackd-Dead-Reason'));
  }
  return out;
}
