import t from 'tap';
import { jetstreamManager } from '@nats-io/jetstream';
import { seed } from '../helpers/masterdata.js';
import { deadLetters, drained, natsClient, publish, scanBody } from '../helpers/scans.js';
import { expectedOutcome, historyCounts, planMix, publishPlan } from '../helpers/scanMix.js';
import { eventually, startTrackd } from '../helpers/trackd.js';

const SEED = Number(process.env.HARDENING_SEED ?? 20261122);
const MESSAGES = Number(process.env.HARDENING_SCANS ?? 800);

t.test(
  'a generated stream of valid and hostile scans: valid ones applied exactly once, the rest dead-lettered with a reason',
  async (t) => {
    const trackd = await startTrackd(t, { env: { HISTORY_GAP_SECONDS: '0' } });
    const orgA = await trackd.createOrg('Scans A');
    const orgB = await trackd.createOrg('Scans B');
    const tokenA = (await trackd.createKey(orgA.id)).token;
    const tokenB = (await trackd.createKey(orgB.id)).token;
    const seededA = await seed(trackd, tokenA, {
      locations: [{ external_key: 'DOCK-A1' }, { external_key: 'DOCK-A2', tags: ['barcode:LOC-A2'] }, { external_key: 'YARD-A3' }],
      assets: [1, 2, 3, 4, 5].map((n) => ({ external_key: `PALLET-A${n}`, tags: [`rfid:EPC-A${n}`] })),
    });
    const seededB = await seed(trackd, tokenB, {
      locations: [{ external_key: 'DOCK-B1' }],
      assets: [{ external_key: 'PALLET-B1', tags: ['rfid:EPC-B1'] }],
    });
    const nc = await natsClient(t, trackd.natsUrl);
    const base = Date.now() - 3_600_000;
    const plan = planMix(
      {
        orgA: orgA.id,
        orgB: orgB.id,
        locationsA: ['DOCK-A1', 'DOCK-A2', 'YARD-A3'],
        locationIdsA: Object.values(seededA.locations),
        tagsA: Object.fromEntries([1, 2, 3, 4, 5].map((n) => [`EPC-A${n}`, `PALLET-A${n}`])),
        base,
      },
      MESSAGES,
      SEED,
    );
    const expected = expectedOutcome(plan);
    const deadExpected = Object.values(expected.deadByReason).reduce((a, b) => a + b, 0);
    t.ok(
      expected.applied > MESSAGES / 4 && deadExpected > MESSAGES / 4,
      `plan: ${expected.applied} valid, ${deadExpected} invalid, ${plan.filter((p) => p.expect.kind === 'noop').length} repeated event ids`,
    );

    const started = Date.now();
    await publishPlan(nc, plan);
    // The consumer must not stall behind any of them: a scan published last is applied promptly.
    const sentinel = scanBody('DOCK-B1', ['rfid:EPC-B1'], new Date(), { event_id: 'after-the-storm' });
    await publish(nc, `scans.${orgB.id}.fixed`, sentinel);
    await eventually(
      async () =>
        (await trackd.request('GET', `/api/v1/assets/${seededB.assets['PALLET-B1']}/history`, { token: tokenB })).json?.total_count === 1,
      20_000,
      100,
    );
    t.comment(`published ${plan.length + 1} messages; the last one was applied ${Date.now() - started} ms after the first was published`);

    await eventually(async () => (await deadLetters(nc)).length >= deadExpected, 20_000, 200);
    await drained(nc);
    const history = await historyCounts(trackd, tokenA, seededA.assets);
    t.same(
      history,
      Object.fromEntries(Object.keys(seededA.assets).map((k) => [k, expected.historyByAsset[k] ?? 0])),
      'every valid scan applied exactly once (history events per asset)',
    );
    const applied = Object.values(history).reduce((a, b) => a + b, 0);
    t.comment(
      `scans published (valid): ${expected.applied}; history events applied: ${applied}; expected: ${Object.values(expected.historyByAsset).reduce((a, b) => a + b, 0)}`,
    );

    const dead = await deadLetters(nc);
    const byReason: Record<string, number> = {};
    for (const d of dead) byReason[d.reason ?? 'none'] = (byReason[d.reason ?? 'none'] ?? 0) + 1;
    t.same(byReason, expected.deadByReason, `every invalid message dead-lettered once with its reason (${dead.length})`);
    t.ok(
      dead.every((d) => typeof d.detail === 'string' && d.detail.length > 0),
      'every dead letter says why',
    );
    const crossOrg = dead.filter((d) => d.subject === `scans_dead.${orgB.id}`);
    t.equal(
      crossOrg.length,
      (expected.deadByReason.unknown_location ?? 0) - plan.filter((p) => p.label === 'unknown-location').length,
      "cross-organization scans land in B's dead letters",
    );

    // The report of A reflects the greatest observed_at per asset among the valid scans only.
    const lastSeen: Record<string, number> = {};
    for (const p of plan)
      if (p.expect.kind === 'apply') for (const a of p.expect.assets) lastSeen[a] = Math.max(lastSeen[a] ?? 0, p.expect.observedAt);
    const report = await trackd.request('GET', '/api/v1/reports/asset-locations?limit=200', { token: tokenA });
    t.same(
      Object.fromEntries(report.json.data.map((r: any) => [r.asset_external_key, r.asset_last_seen])),
      Object.fromEntries(Object.entries(lastSeen).map(([k, v]) => [k, new Date(v).toISOString()])),
      'report: last seen is the latest valid scan (no future or hostile scan moved it)',
    );
    const reportB = await trackd.request('GET', '/api/v1/reports/asset-locations', { token: tokenB });
    t.same(
      reportB.json.data.map((r: any) => r.asset_external_key),
      ['PALLET-B1'],
      "B's report holds only B's asset",
    );

    const jsm = await jetstreamManager(nc);
    const consumers = [];
    for await (const c of jsm.consumers.list('SCANS')) consumers.push(c);
    t.ok(consumers.length >= 1, 'the SCANS consumer exists');
    t.ok(
      consumers.every((c) => c.num_pending === 0 && c.num_ack_pending === 0),
      'nothing pending or unacked: the consumer never stalled',
    );
  },
);
