import t from 'tap';
import { assetsClient } from '../helpers/assets.js';
import { drained, natsClient, publish, scanBody } from '../helpers/scans.js';
import { iso, loggedEntries, shardDb, sqlVisits } from '../helpers/shardTruth.js';
import { startTrackd } from '../helpers/trackd.js';

/**
 * A small shard (scan_positions' asset ids span a few ids, far below a quarter of the default fold
 * slice): a re-read that extends its open visit writes its scan_positions row in its batch instead
 * of logging it (src/scans/rereadLog.ts logsRereads). The log stays empty, the rows carry the
 * latest figures themselves, and the report and history answer them, batch after batch, a move
 * among them.
 */
t.test('re-reads on a small shard write their positions directly; the answers follow every batch', async (t) => {
  const trackd = await startTrackd(t, { env: { SHARDS: '1', HISTORY_GAP_SECONDS: '3600' } });
  const api = await assetsClient(trackd, 'WF');
  const nc = await natsClient(t, trackd.natsUrl);
  const db = shardDb(t, trackd.dataDir);
  const locations = ['WF-L0', 'WF-L1'];
  for (const key of locations) t.equal((await api.req('POST', '/api/v1/locations', { external_key: key, name: key })).status, 201);
  const assets: { id: number; tag: string; home: number; lastSeen: number; reads: number }[] = [];
  for (let i = 0; i < 6; i++) {
    const a = await api.create({ external_key: `WF-A${i}`, name: `A${i}`, tags: [{ tag_type: 'rfid', value: `wfx${i}` }] });
    assets.push({ id: a.id, tag: `wfx${i}`, home: i % 2, lastSeen: 0, reads: 0 });
  }
  let at = Date.now() - 3_600_000;
  for (let batch = 0; batch < 6; batch++) {
    // Batch 3 moves an asset (a new visit elsewhere: its row is written, as it always was).
    if (batch === 3) {
      assets[0]!.home = 1 - assets[0]!.home;
      assets[0]!.reads = 0;
    }
    for (const home of [0, 1]) {
      at += 1000;
      const here = assets.filter((a) => a.home === home);
      await publish(
        nc,
        `scans.${api.orgId}.fixed`,
        scanBody(
          locations[home]!,
          here.map((a) => `rfid:${a.tag}`),
          new Date(at),
        ),
      );
      for (const a of here) {
        a.lastSeen = at;
        a.reads++;
      }
      await drained(nc);
    }
    t.equal(loggedEntries(db), 0, `batch ${batch}: nothing logged`);
    const rows = db.prepare('SELECT asset_id, last_seen_at, visit_read_count FROM scan_positions ORDER BY asset_id').all();
    t.same(
      rows,
      assets.map((a) => ({ asset_id: a.id, last_seen_at: a.lastSeen, visit_read_count: a.reads })),
      `batch ${batch}: every row holds its latest read and its open visit's count`,
    );
    const report = await api.req('GET', '/api/v1/reports/asset-locations?limit=100&sort=asset_external_key');
    t.same(
      (report.json.data as { asset_id: number; asset_last_seen: string }[]).map((r) => [r.asset_id, r.asset_last_seen]),
      assets.map((a) => [a.id, iso(a.lastSeen)]),
      `batch ${batch}: the report answers the latest reads`,
    );
    const history = await api.req('GET', `/api/v1/assets/${assets[1]!.id}/history?limit=100`);
    t.same(
      (history.json.data as { read_count: number; last_seen_at: string }[])[0],
      { ...(history.json.data as object[])[0], read_count: assets[1]!.reads, last_seen_at: iso(assets[1]!.lastSeen) },
      `batch ${batch}: the open visit's history counts every re-read`,
    );
    t.equal(sqlVisits(db, assets[1]!.id, true)[0]!.read_count, assets[1]!.reads);
  }
});
