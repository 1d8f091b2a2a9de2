/**
 * What an import's INSERT costs, piece by piece (issue 16): the import ceiling's rows (an asset
 * with one rfid tag, 1,000 per transaction, the q text index paused and rewritten per transaction
 * as a batch does) inserted into a fresh shard file once per variant, each variant taking one
 * thing away (an index, a trigger) or changing the statement's shape, in alternating rounds. CPU
 * microseconds per row of this process (one thread: better-sqlite3 is synchronous) and rows/s.
 *
 *   node dist/bench/probes/insertCost.js [--rows 20000] [--rounds 3] [--only a,b] [--out FILE]
 *
 * A variant's figure minus the baseline's of the same round is what the thing it removed costs.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { ControlPlane } from '../../src/control/controlPlane.js';
import { eventId, eventLogOf } from '../../src/events/log.js';
import { pauseTextIndex, resumeTextIndex } from '../../src/masterdata/textIndex.js';
import { scanPlacement } from '../../src/scans/placement.js';
import '../../src/shards/commandIndex.js';
import { ShardGenerations } from '../../src/shards/generations.js';
import { ShardWriter } from '../../src/shards/writer.js';
import { formatTimestamp } from '../../src/wire/timestamps.js';
import { machine } from '../lib/processes.js';

const { values } = parseArgs({
  options: { rows: { type: 'string' }, only: { type: 'string' }, out: { type: 'string' } },
});
const ROWS = Number(values.rows ?? 50_000);
const BATCH = 1000;

const tagValue = (i: number) => `E2${String(i).padStart(22, '0')}`;

interface Variant {
  /** Schema change on the fresh file before the rows (DROP INDEX / DROP TRIGGER). */
  setup?: string[];
  /** Inserts rows [from, to) in the open transaction. */
  rows?: (writer: ShardWriter, orgId: number, from: number, to: number) => void;
  /** Skip the per-transaction text index rewrite. */
  noRewrite?: boolean;
}

const ASSET_SQL =
  'INSERT INTO assets (id, org_id, external_key, name, description, is_active, metadata, valid_from, valid_to, created_at, updated_at) VALUES (?, ?, ?, ?, NULL, 1, ?, ?, NULL, ?, ?)';
const TAG_SQL = 'INSERT INTO tags (id, org_id, tag_type, value, asset_id, created_at) VALUES (?, ?, ?, ?, ?, ?)';

type EventPath = 'append' | 'head only' | 'insert only' | 'held';

function oneByOne(
  writer: ShardWriter,
  orgId: number,
  from: number,
  to: number,
  withEvent: EventPath | false = false,
  lookups = false,
): void {
  const db = writer.writer;
  const asset = db.prepare(ASSET_SQL);
  const tag = db.prepare(TAG_SQL);
  const byKey = db.prepare('SELECT id FROM assets WHERE org_id = ? AND external_key = ? AND deleted_at IS NULL');
  const holder = db.prepare('SELECT id FROM tags WHERE org_id = ? AND tag_type = ? AND value = ? AND deleted_at IS NULL');
  const head = db.prepare(
    'INSERT INTO event_heads (org_id, last_seq) VALUES (?, 1) ON CONFLICT (org_id) DO UPDATE SET last_seq = last_seq + 1 RETURNING last_seq',
  );
  const event = db.prepare('INSERT INTO events (org_id, seq, id, type, occurred_at, data) VALUES (?, ?, ?, ?, ?, ?)');
  const now = Date.now();
  const at = formatTimestamp(now);
  for (let i = from; i < to; i++) {
    if (lookups) {
      byKey.get(orgId, `BULK-${i}`);
      holder.get(orgId, 'rfid', tagValue(i));
    }
    asset.run(i, orgId, `BULK-${i}`, `Asset ${i}`, '{}', now, now, now);
    tag.run(i, orgId, 'rfid', tagValue(i), i, now);
    if (withEvent === 'held') continue;
    if (withEvent === 'head only') head.get(orgId);
    else if (withEvent === 'insert only') {
      const data = JSON.stringify({
        asset: { id: i, external_key: `BULK-${i}`, name: `Asset ${i}`, tags: [{ id: i, tag_type: 'rfid', value: tagValue(i) }] },
      });
      event.run(orgId, i, eventId(orgId, i, now), 'asset.created', now, data);
    } else if (withEvent === 'append') eventLogOf(writer).append(orgId, 'asset.created', createdEvent(i, at));
  }
}

/** An asset.created payload as an import row's (the asset as inserted, one tag). */
function createdEvent(i: number, at: string) {
  return {
    asset: {
      id: i,
      external_key: `BULK-${i}`,
      name: `Asset ${i}`,
      description: null,
      is_active: true,
      valid_from: at,
      valid_to: null,
      created_at: at,
      updated_at: at,
      deleted_at: null,
      tags: [{ id: i, tag_type: 'rfid', value: tagValue(i) }],
      metadata: {},
    },
  };
}

/** The rows with their events as an import batch appends them: the org's head held for the transaction (`withHeldHeads`). */
function heldEvents(writer: ShardWriter, orgId: number, from: number, to: number): void {
  const log = eventLogOf(writer);
  const at = formatTimestamp(Date.now());
  log.withHeldHeads(() => {
    oneByOne(writer, orgId, from, to, 'held');
    for (let i = from; i < to; i++) log.append(orgId, 'asset.created', createdEvent(i, at));
  });
}

/** One INSERT statement of `per` rows for the assets, another for their tags. */
function multiRow(per: number) {
  return (writer: ShardWriter, orgId: number, from: number, to: number) => {
    const db = writer.writer;
    const values = (n: number, shape: string) => Array.from({ length: n }, () => shape).join(', ');
    const head = ASSET_SQL.slice(0, ASSET_SQL.indexOf('VALUES'));
    const tagHead = TAG_SQL.slice(0, TAG_SQL.indexOf('VALUES'));
    const assetShape = '(?, ?, ?, ?, NULL, 1, ?, ?, NULL, ?, ?)';
    const tagShape = '(?, ?, ?, ?, ?, ?)';
    const now = Date.now();
    for (let start = from; start < to; start += per) {
      const n = Math.min(per, to - start);
      const a: unknown[] = [];
      const t: unknown[] = [];
      for (let i = start; i < start + n; i++) {
        a.push(i, orgId, `BULK-${i}`, `Asset ${i}`, '{}', now, now, now);
        t.push(i, orgId, 'rfid', tagValue(i), i, now);
      }
      db.prepare(`${head}VALUES ${values(n, assetShape)}`).run(...a);
      db.prepare(`${tagHead}VALUES ${values(n, tagShape)}`).run(...t);
    }
  };
}

const VARIANTS: Record<string, Variant> = {
  baseline: {},
  'no assets_live_key': { setup: ['DROP INDEX assets_live_key'] },
  'no assets_org_key': { setup: ['DROP INDEX assets_org_key'] },
  'no assets_live_window': { setup: ['DROP INDEX assets_live_window'] },
  'no assets_live_name': { setup: ['DROP INDEX assets_live_name'] },
  'no assets_live_created_at': { setup: ['DROP INDEX assets_live_created_at'] },
  'no assets_live_updated_at': { setup: ['DROP INDEX assets_live_updated_at'] },
  'no assets_live_valid_from': { setup: ['DROP INDEX assets_live_valid_from'] },
  'no assets_live_valid_to': { setup: ['DROP INDEX assets_live_valid_to'] },
  'no assets_live_count_insert trigger': { setup: ['DROP TRIGGER assets_live_count_insert'] },
  'no assets_text_insert_paused trigger': { setup: ['DROP TRIGGER assets_text_insert_paused'] },
  'no tags_live_natural_key': { setup: ['DROP INDEX tags_live_natural_key'] },
  'no scan_epoch_tags_insert trigger': { setup: ['DROP TRIGGER scan_epoch_tags_insert'] },
  'no assets_text_tag_insert_paused trigger': { setup: ['DROP TRIGGER assets_text_tag_insert_paused'] },
  'no per-transaction text rewrite': { noRewrite: true },
  'with the row lookups (key, tag holder)': { rows: (w, o, f, t) => oneByOne(w, o, f, t, false, true) },
  'with the event-log append': { rows: (w, o, f, t) => oneByOne(w, o, f, t, 'append') },
  'with the event head upsert alone': { rows: (w, o, f, t) => oneByOne(w, o, f, t, 'head only') },
  'with the event INSERT alone (id, short JSON)': { rows: (w, o, f, t) => oneByOne(w, o, f, t, 'insert only') },
  'with the event append of an import batch (head held)': { rows: heldEvents },
  'with the held event append, no events_org_seq': { rows: heldEvents, setup: ['DROP INDEX events_org_seq'] },
  'with the held event append, events.pos not AUTOINCREMENT': {
    rows: heldEvents,
    setup: [
      'DROP TABLE events',
      'CREATE TABLE events (pos INTEGER PRIMARY KEY, org_id INTEGER NOT NULL, seq INTEGER NOT NULL, id TEXT NOT NULL, type TEXT NOT NULL, occurred_at INTEGER NOT NULL, data TEXT NOT NULL)',
      'CREATE UNIQUE INDEX events_org_seq ON events (org_id, seq)',
    ],
  },
  'multi-row INSERT of 50': { rows: multiRow(50) },
  'multi-row INSERT of 200': { rows: multiRow(200) },
};

interface Open {
  name: string;
  variant: Variant;
  dir: string;
  control: ControlPlane;
  writer: ShardWriter;
  orgId: number;
  cpuUs: number;
}

async function open(name: string, variant: Variant): Promise<Open> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'trackd-insert-cost-'));
  const control = await ControlPlane.open(dir);
  const org = await control.createOrg('cost', 1);
  const writer = await ShardWriter.open(dir, 0, control, new ShardGenerations(), { placement: scanPlacement });
  for (const sql of variant.setup ?? []) writer.writer.exec(sql);
  return { name, variant, dir, control, writer, orgId: org.id, cpuUs: 0 };
}

/** One transaction of 1,000 rows into the variant's file; its CPU time added to the variant's. */
function block(o: Open, from: number): void {
  const insert = o.variant.rows ?? ((w, org, f, t) => oneByOne(w, org, f, t));
  const cpu = process.cpuUsage();
  o.writer.writer.transaction(() => {
    pauseTextIndex(o.writer);
    insert(o.writer, o.orgId, from, Math.min(from + BATCH, ROWS + 1));
    if (o.variant.noRewrite) o.writer.writer.exec('DELETE FROM text_index_stale; DELETE FROM text_index_paused');
    else resumeTextIndex(o.writer);
  })();
  const used = process.cpuUsage(cpu);
  o.cpuUs += used.user + used.system;
}

const only = values.only?.split(',');
const names = Object.keys(VARIANTS).filter((n) => only === undefined || only.some((o) => n.includes(o)) || n === 'baseline');
const opened: Open[] = [];
for (const name of names) opened.push(await open(name, VARIANTS[name]!));
const loadBefore = os.loadavg();
const started = performance.now();
try {
  for (let from = 1, turn = 0; from <= ROWS; from += BATCH, turn++) {
    for (let k = 0; k < opened.length; k++) block(opened[(k + turn) % opened.length]!, from);
  }
} finally {
  for (const o of opened) {
    o.writer.close();
    o.control.close();
    fs.rmSync(o.dir, { recursive: true, force: true });
  }
}
const base = opened[0]!.cpuUs / ROWS;
const figures = Object.fromEntries(
  opened.map((o) => [
    o.name,
    { cpu_us_per_row: Math.round((o.cpuUs / ROWS) * 10) / 10, minus_baseline_us: Math.round((o.cpuUs / ROWS - base) * 10) / 10 },
  ]),
);
const result = {
  generated_at: new Date().toISOString(),
  command: `node dist/bench/probes/insertCost.js ${process.argv.slice(2).join(' ')}`,
  machine: {
    ...machine(),
    load_average_before: loadBefore.map((x) => Math.round(x * 10) / 10),
    load_average_after: os.loadavg().map((x) => Math.round(x * 10) / 10),
  },
  rows_per_variant: ROWS,
  wall_seconds: Math.round((performance.now() - started) / 100) / 10,
  figures,
};
const text = JSON.stringify(result, null, 2);
if (values.out !== undefined) fs.writeFileSync(values.out, `${text}\n`);
process.stdout.write(`${text}\n`);
