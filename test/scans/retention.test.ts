import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import t from 'tap';
import { eventually, startTrackd } from '../helpers/trackd.js';
import { seed } from '../helpers/masterdata.js';
import { metric, natsClient, publish, scanBody } from '../helpers/scans.js';

/** Event ids remembered across every shard file (read-only). */
function storedEventIds(dataDir: string): number {
  const dir = path.join(dataDir, 'shards');
  let total = 0;
  for (const file of fs.readdirSync(dir).filter((f) => f.endsWith('.sqlite'))) {
    const db = new Database(path.join(dir, file), { readonly: true });
    total += (db.prepare('SELECT count(*) AS n FROM scan_events').get() as { n: number }).n;
    db.close();
  }
  return total;
}

t.test('a parked tag read again and again keeps the event-id table bounded by EVENT_ID_RETENTION_SECONDS', async (t) => {
  const trackd = await startTrackd(t, { env: { EVENT_ID_RETENTION_SECONDS: '1' } });
  const org = await trackd.createOrg('Retention Org');
  const admin = (await trackd.createKey(org.id)).token;
  const ids = await seed(trackd, admin, {
    locations: [{ external_key: 'SHELF-1' }],
    assets: [{ external_key: 'PARKED', tags: ['rfid:P1'] }],
  });
  const nc = await natsClient(t, trackd.natsUrl);
  const subject = `scans.${org.id}.fixed`;
  const applied = () => metric(trackd, 'trackd_scans_applied_total');
  const base = await applied();

  const start = Date.now() - 60_000;
  for (let i = 0; i < 40; i++) await publish(nc, subject, scanBody('SHELF-1', ['rfid:P1'], new Date(start + i * 1000)));
  await eventually(async () => (await applied()) >= base + 40, 10_000);
  t.ok(storedEventIds(trackd.dataDir) >= 1, 'recent event ids are remembered');

  // A batch's time is when JetStream stored its messages (not trackd's clock, which a test could
  // move): the horizon passes only as the broker's clock does, so the wait is the condition itself.
  await new Promise((resolve) => setTimeout(resolve, 1_500));
  const repeat = scanBody('SHELF-1', ['rfid:P1'], new Date(start + 41_000));
  await publish(nc, subject, repeat);
  await eventually(async () => (await applied()) >= base + 41, 10_000);
  t.equal(storedEventIds(trackd.dataDir), 1, 'ids older than the horizon were forgotten: only the newest remains');

  const history = await trackd.request('GET', `/api/v1/assets/${ids.assets.PARKED}/history`, { token: admin });
  t.equal(history.status, 200);
  t.equal(history.json.total_count, 1, 'the re-reads are one visit');
  t.equal(history.json.data[0].read_count, 41, 'every read counted once');

  const duplicate = await publish(nc, subject, repeat, `${repeat.event_id}-again`);
  t.equal(duplicate.duplicate, false, 'a re-publish under a new Nats-Msg-Id reaches trackd');
  const duplicates = () => metric(trackd, 'trackd_scans_duplicate_total');
  await eventually(async () => (await duplicates()) >= 1, 10_000);
  const after = await trackd.request('GET', `/api/v1/assets/${ids.assets.PARKED}/history`, { token: admin });
  t.equal(after.json.data[0].read_count, 41, 'within the horizon a re-published event id changes nothing');
});
