/**
 * A shard's tables compared row by row, and a mixed workload that touches every kind of shard
 * state change (every master-data command, scans on SCANS and READERS with every outcome): what
 * the replay tests (deterministic apply, the journal) run and compare.
 */
import Database from 'better-sqlite3';
import { jetstream } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { settledJob } from './bulk.js';
import { drained, publish, scanBody } from './scans.js';
import type { HttpResult, Trackd } from './trackd.js';

type Rows = Record<string, unknown>[];

/** Every table of a shard file (not SQLite's own, nor knex's bookkeeping with its wall-clock times), each row in full. */
export function tables(file: string): { schema: string[]; migrations: string[]; rows: Map<string, Rows> } {
  const db = new Database(file, { readonly: true });
  try {
    const master = db.prepare("SELECT type, name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name").all() as {
      type: string;
      name: string;
      sql: string | null;
    }[];
    const rows = new Map<string, Rows>();
    for (const { type, name } of master) {
      if (type !== 'table' || name.startsWith('knex_')) continue;
      const columns = (db.prepare(`PRAGMA table_info("${name}")`).all() as unknown[]).length;
      const order = Array.from({ length: columns }, (_, i) => i + 1).join(', ');
      rows.set(name, db.prepare(`SELECT * FROM "${name}" ORDER BY ${order}`).all() as Rows);
    }
    const migrations = (db.prepare('SELECT name FROM knex_migrations ORDER BY id').all() as { name: string }[]).map((r) => r.name);
    return { schema: master.map((m) => `${m.type} ${m.name}: ${m.sql}`), migrations, rows };
  } finally {
    db.close();
  }
}

/** The first difference between two shard files' tables, or undefined when they are equal. */
export function firstDifference(a: ReturnType<typeof tables>, b: ReturnType<typeof tables>): string | undefined {
  if (JSON.stringify(a.schema) !== JSON.stringify(b.schema)) return 'schemas differ';
  if (JSON.stringify(a.migrations) !== JSON.stringify(b.migrations)) return 'migrations differ';
  for (const [name, rows] of a.rows) {
    const other = b.rows.get(name) ?? [];
    for (let i = 0; i < Math.max(rows.length, other.length); i++) {
      const x = JSON.stringify(rows[i]);
      const y = JSON.stringify(other[i]);
      if (x !== y) return `${name} row ${i}: ${x} against ${y} (${rows.length} rows against ${other.length})`;
    }
  }
  return undefined;
}

const ok = (res: HttpResult, status: number, what: string) => {
  if (res.status !== status) throw new Error(`${what}: ${res.status} ${res.text}`);
  return res.json?.data;
};

/** Master data of one org over the wire, with every kind of command (and a few refused ones). */
export async function masterData(trackd: Trackd, token: string, tag: string) {
  const call = (method: string, url: string, body?: unknown) => trackd.http(method, url, { token, body });
  const root = ok(await call('POST', '/api/v1/locations', { external_key: `${tag}-SITE`, name: 'Site' }), 201, 'root');
  const dock = ok(
    await call('POST', '/api/v1/locations', {
      external_key: `${tag}-DOCK`,
      name: 'Dock',
      parent_id: root.id,
      tags: [{ tag_type: 'barcode', value: `${tag}-DOCK-BC` }],
    }),
    201,
    'dock',
  );
  const shelf = ok(await call('POST', '/api/v1/locations', { name: 'Shelf', parent_id: dock.id }), 201, 'shelf (minted key)');
  const yard = ok(await call('POST', '/api/v1/locations', { external_key: `${tag}-YARD`, name: 'Yard', parent_id: root.id }), 201, 'yard');
  const later = new Date(Date.now() + 3_600_000).toISOString();
  ok(await call('POST', '/api/v1/locations', { external_key: `${tag}-FUTURE`, name: 'Future', valid_from: later }), 201, 'future');
  ok(await call('PATCH', `/api/v1/locations/${shelf.id}`, { parent_id: yard.id, description: 'moved' }), 200, 'move shelf');
  ok(await call('POST', `/api/v1/locations/${yard.id}/rename`, { external_key: `${tag}-YARD-2` }), 200, 'rename yard');
  const gone = ok(await call('POST', '/api/v1/locations', { name: 'Gone', parent_id: root.id }), 201, 'gone');
  ok(await call('DELETE', `/api/v1/locations/${gone.id}`), 204, 'delete gone');
  const refused = await call('DELETE', `/api/v1/locations/${root.id}`);
  if (refused.status !== 409) throw new Error(`delete of a location with children: ${refused.status}`);

  const assets: { id: number; tag: string }[] = [];
  for (let i = 0; i < 6; i++) {
    const body: Record<string, unknown> = { name: `Asset ${i}`, metadata: { i }, tags: [{ tag_type: 'rfid', value: `${tag}-A${i}` }] };
    if (i % 2 === 0) body.external_key = `${tag}-ASSET-${i}`;
    assets.push({ id: ok(await call('POST', '/api/v1/assets', body), 201, `asset ${i}`).id, tag: `${tag}-A${i}` });
  }
  // A create that fails after drawing ids (the tag is taken): nothing committed, nothing recorded.
  const clash = await call('POST', '/api/v1/assets', { name: 'Clash', tags: [{ tag_type: 'rfid', value: `${tag}-A0` }] });
  if (clash.status !== 409) throw new Error(`tag clash: ${clash.status}`);
  ok(await call('PATCH', `/api/v1/assets/${assets[1]!.id}`, { name: 'Renamed 1', metadata: { i: 1, x: true } }), 200, 'patch 1');
  ok(await call('PATCH', `/api/v1/assets/${assets[2]!.id}`, { valid_to: later }), 200, 'window 2');
  ok(await call('POST', `/api/v1/assets/${assets[3]!.id}/rename`, { external_key: `${tag}-RENAMED-3` }), 200, 'rename 3');
  const extra = ok(await call('POST', `/api/v1/assets/${assets[4]!.id}/tags`, { tag_type: 'ble', value: `${tag}-BLE-4` }), 201, 'attach');
  ok(await call('DELETE', `/api/v1/assets/${assets[4]!.id}/tags/${extra.id}`), 204, 'detach');
  ok(await call('POST', `/api/v1/assets/${assets[4]!.id}/tags`, { tag_type: 'ble', value: `${tag}-BLE-4` }), 201, 'attach again');
  ok(await call('DELETE', `/api/v1/assets/${assets[5]!.id}`), 204, 'delete 5');
  // Bulk imports: batches, job bookkeeping and a dry run are recorded state changes like any other.
  const csv = (text: string) => ({ token, body: text, contentType: 'text/csv' });
  const imports = [
    ['assets', 'mode=upsert', `external_key,name,tags\n${tag}-BULK-1,Bulk 1,rfid:${tag}-BT1\n${tag}-ASSET-0,Asset 0 renamed,\n`],
    ['assets', 'dry_run=true', `name\nDry\n`],
    [
      'locations',
      'mode=create',
      `external_key,name,parent_external_key\n${tag}-LB-CHILD,Child,${tag}-LB-ROOT\n${tag}-LB-ROOT,Root,${tag}-SITE\n`,
    ],
  ];
  for (const [kind, query, body] of imports as ['assets' | 'locations', string, string][]) {
    const res = await trackd.http('POST', `/api/v1/${kind}/bulk?${query}`, csv(body));
    if (res.status !== 202) throw new Error(`import ${kind}: ${res.status} ${res.text}`);
    const job = await settledJob(trackd, token, kind, res.json.job_id);
    if (job.failed_rows !== 0 || job.status !== 'completed') throw new Error(`import ${kind}: ${JSON.stringify(job)}`);
  }
  return { dock, shelf, yard, assets, call };
}

/**
 * One org's share of the mixed workload: master data over the wire, scans in order, late, re-read,
 * duplicate, with unknown and location tags, dead on the consumer and in the shard, a fixed
 * reader's payload on READERS, master data after the scans, and scans past the event-id horizon
 * (EVENT_ID_RETENTION_SECONDS=2). `tag` keeps its keys apart from other orgs'.
 */
export async function mixedWorkload(trackd: Trackd, nc: NatsConnection, org: { id: number }, token: string, tag: string): Promise<void> {
  const js = jetstream(nc);
  const { dock, shelf, assets, call } = await masterData(trackd, token, tag);
  const subject = `scans.${org.id}.fixed`;
  const base = Date.now() - 3_600_000;
  const at = (minutes: number) => new Date(base + minutes * 60_000);
  const rfid = (i: number) => `rfid:${assets[i]!.tag}`;

  // In order, late, a re-read within the gap, a duplicate event id, unknown and location tags,
  // a future observed_at (dead on the consumer), an unknown location (dead in the shard).
  await publish(nc, subject, scanBody(`${tag}-DOCK`, [rfid(0), rfid(1), rfid(2)], at(10)));
  await publish(nc, subject, scanBody(shelf.external_key, [rfid(0)], at(20)));
  await publish(nc, subject, scanBody(`${tag}-DOCK`, [rfid(0), rfid(3)], at(5)));
  await publish(nc, subject, scanBody(shelf.external_key, [rfid(0), rfid(0)], at(21)));
  const repeat = scanBody(`${tag}-DOCK`, [rfid(1)], at(30));
  await publish(nc, subject, repeat);
  await publish(nc, subject, repeat, `${repeat.event_id}-again`);
  await publish(nc, subject, scanBody(`${tag}-DOCK`, ['rfid:UNKNOWN', `barcode:${tag}-DOCK-BC`, rfid(5)], at(31)));
  await publish(nc, subject, scanBody(`${tag}-DOCK`, [rfid(2)], new Date(Date.now() + 86_400_000)));
  await publish(nc, subject, scanBody('NO-SUCH-PLACE', [rfid(2)], at(32)));
  await publish(nc, subject, { ...scanBody('', [rfid(1)], at(33)), location: { tag_type: 'barcode', value: `${tag}-DOCK-BC` } });

  // A fixed reader's own payload on READERS: capture point = a location key, then a location tag value.
  const reads = [
    { epc: assets[3]!.tag, antennaPort: 1, timeStampOfRead: (base + 40 * 60_000) * 1000, capturePointName: `${tag}-DOCK-BC` },
    { epc: assets[1]!.tag, antennaPort: 2, timeStampOfRead: (base + 41 * 60_000) * 1000, capturePointName: shelf.external_key },
    { epc: assets[0]!.tag, antennaPort: 2, timeStampOfRead: (base + 2 * 60_000) * 1000, capturePointName: shelf.external_key },
  ];
  await js.publish(`readers.${org.id}.cs463.dock-reader`, JSON.stringify({ rfidReaderName: 'dock-reader', tags: reads }));
  await drained(nc);
  await drained(nc, 'READERS', 'trackd-readers');

  // Master data after scans: scanned assets deleted and re-windowed, a location with assets refused.
  ok(await call('DELETE', `/api/v1/assets/${assets[2]!.id}`), 204, 'delete scanned 2');
  ok(await call('PATCH', `/api/v1/assets/${assets[0]!.id}`, { valid_from: at(0).toISOString() }), 200, 'window 0');
  const held = await call('DELETE', `/api/v1/locations/${dock.id}`);
  if (held.status !== 409) throw new Error(`delete of a location with assets: ${held.status} ${held.text}`);
  // Past the event-id horizon (the broker's clock, which scans take their time from): ids are pruned.
  await new Promise((r) => setTimeout(r, 2_300));
  await publish(nc, subject, scanBody(`${tag}-DOCK`, [rfid(3)], at(50)));
  await publish(nc, subject, repeat, `${repeat.event_id}-late`);
  await drained(nc);
}
