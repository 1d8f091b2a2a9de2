/**
 * The asset export's statement and cheaper shapes of it (issue 16), in process on one shard file:
 * `--rows` assets with one rfid tag each (and every 10th with metadata and a description), each
 * variant's NDJSON lines built by SQLite in one read transaction, in alternating rounds; rows/s,
 * CPU microseconds per row, and whether its bytes equal the current statement's (sha256).
 *
 *   node dist/bench/probes/exportStatement.js [--rows 100000] [--rounds 4] [--out FILE]
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import Database from 'better-sqlite3';
import { assetExportSql, walksTable } from '../../src/bulk/export.js';
import { ControlPlane } from '../../src/control/controlPlane.js';
import { addLowerFunction } from '../../src/masterdata/filters.js';
import { pauseTextIndex, resumeTextIndex } from '../../src/masterdata/textIndex.js';
import { scanPlacement } from '../../src/scans/placement.js';
import '../../src/shards/commandIndex.js';
import { ShardGenerations } from '../../src/shards/generations.js';
import { ShardWriter, shardFile } from '../../src/shards/writer.js';
import { machine } from '../lib/processes.js';

const { values } = parseArgs({ options: { rows: { type: 'string' }, rounds: { type: 'string' }, out: { type: 'string' } } });
const ROWS = Number(values.rows ?? 100_000);
const ROUNDS = Number(values.rounds ?? 4);

async function load(dir: string): Promise<{ file: string; orgId: number }> {
  const control = await ControlPlane.open(dir);
  const org = await control.createOrg('export', 1);
  const writer = await ShardWriter.open(dir, 0, control, new ShardGenerations(), { placement: scanPlacement });
  try {
    const db = writer.writer;
    const asset = db.prepare(
      'INSERT INTO assets (id, org_id, external_key, name, description, is_active, metadata, valid_from, valid_to, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
    );
    const tag = db.prepare('INSERT INTO tags (id, org_id, tag_type, value, asset_id, created_at) VALUES (?, ?, ?, ?, ?, ?)');
    const now = Date.now();
    for (let from = 1; from <= ROWS; from += 1000) {
      db.transaction(() => {
        pauseTextIndex(writer);
        for (let i = from; i < from + 1000 && i <= ROWS; i++) {
          const odd = i % 10 === 0;
          asset.run(
            i,
            org.id,
            `BULK-${i}`,
            odd ? `Asset "${i}" \u00e9\u2028` : `Asset ${i}`,
            odd ? 'line\nbreak' : null,
            i % 7 === 0 ? 0 : 1,
            odd ? JSON.stringify({ n: i, f: i / 3, s: 'x\u0001"\\', nested: [1, { b: null }] }) : '{}',
            now - i * 1001,
            odd ? now + i : null,
            now - i,
            now + (odd ? 17 : 0),
          );
          tag.run(i, org.id, 'rfid', `E2${String(i).padStart(22, '0')}`, i, now);
          if (odd) tag.run(ROWS + i, org.id, 'ble', `B-${i}`, i, now);
        }
        resumeTextIndex(writer);
      })();
    }
  } finally {
    writer.close();
    control.close();
  }
  return { file: shardFile(dir, 0), orgId: org.id };
}

function isoSql(column: string): string {
  const ms = `((${column} % 1000) + 1000) % 1000`;
  return `strftime('%Y-%m-%dT%H:%M:%S', (${column} - ${ms}) / 1000, 'unixepoch') || printf('.%03dZ', ${ms})`;
}

const nullableIso = (column: string) => `CASE WHEN ${column} IS NULL THEN 'null' ELSE '"' || ${isoSql(column)} || '"' END`;

/** The line as text concatenation: json_quote for strings, the metadata as stored, the tags by group_concat in id order. */
function concatLine(tags: 'group_concat' | 'json_group_array'): string {
  const tagList =
    tags === 'group_concat'
      ? `'[' || coalesce((SELECT group_concat('{"id":' || t.id || ',"tag_type":' || json_quote(t.tag_type) || ',"value":' || json_quote(t.value) || '}', ',' ORDER BY t.id)
           FROM tags t WHERE t.asset_id = a.id AND t.org_id = a.org_id AND t.deleted_at IS NULL), '') || ']'`
      : `(SELECT json_group_array(json_object('id', s.id, 'tag_type', s.tag_type, 'value', s.value))
           FROM (SELECT t.id, t.tag_type, t.value FROM tags t WHERE t.asset_id = a.id AND t.org_id = a.org_id AND t.deleted_at IS NULL ORDER BY t.id) s)`;
  return `'{"id":' || a.id || ',"external_key":' || json_quote(a.external_key) || ',"name":' || json_quote(a.name)
    || ',"description":' || json_quote(a.description)
    || ',"is_active":' || CASE a.is_active WHEN 1 THEN 'true' ELSE 'false' END
    || ',"valid_from":"' || ${isoSql('a.valid_from')} || '","valid_to":' || ${nullableIso('a.valid_to')}
    || ',"created_at":"' || ${isoSql('a.created_at')} || '","updated_at":"' || ${isoSql('a.updated_at')}
    || '","deleted_at":' || ${nullableIso('a.deleted_at')}
    || ',"tags":' || ${tagList} || ',"metadata":' || a.metadata || '}' AS line`;
}

interface Run {
  rows: number;
  seconds: number;
  cpuUs: number;
  hash: string;
}

interface SplitRow {
  head: string;
  valid_from: number;
  valid_to: number | null;
  created_at: number;
  updated_at: number;
  deleted_at: number | null;
  tail: string;
}

/** The line in three pieces: SQLite the JSON before and after the timestamps, JavaScript the timestamps, remembering the last few (an import gives most rows the same). */
const SPLIT_SQL = `'{"id":' || a.id || ',"external_key":' || json_quote(a.external_key) || ',"name":' || json_quote(a.name)
    || ',"description":' || json_quote(a.description) || ',"is_active":' || CASE a.is_active WHEN 1 THEN 'true' ELSE 'false' END AS head,
  a.valid_from, a.valid_to, a.created_at, a.updated_at, a.deleted_at,
  ',"tags":' || (SELECT json_group_array(json_object('id', s.id, 'tag_type', s.tag_type, 'value', s.value))
           FROM (SELECT t.id, t.tag_type, t.value FROM tags t WHERE t.asset_id = a.id AND t.org_id = a.org_id AND t.deleted_at IS NULL ORDER BY t.id) s)
    || ',"metadata":' || a.metadata || '}' AS tail`;

function isoMemo(): (ms: number) => string {
  const seen = new Map<number, string>();
  return (ms) => {
    let text = seen.get(ms);
    if (text === undefined) {
      if (seen.size >= 64) seen.clear();
      text = new Date(ms).toISOString();
      seen.set(ms, text);
    }
    return text;
  };
}

function splitLine(): (row: SplitRow) => string {
  const iso = isoMemo();
  const nullable = (ms: number | null) => (ms === null ? 'null' : `"${iso(ms)}"`);
  return (r) =>
    `${r.head},"valid_from":"${iso(r.valid_from)}","valid_to":${nullable(r.valid_to)},"created_at":"${iso(r.created_at)}","updated_at":"${iso(r.updated_at)}","deleted_at":${nullable(r.deleted_at)}${r.tail}`;
}

/** How the lines come out of SQLite: a row object per line (`{ line }`), the line alone (`pluck`), or CHUNK lines at a time joined by SQLite. */
type Iteration = 'rows' | 'pluck' | 'chunks';
const CHUNK = 256;

/**
 * The statement as chunks: CHUNK lines after the last id, joined with newlines by SQLite, so one
 * step of the statement and one string cross into JavaScript per CHUNK lines. `sql`: the
 * statement's first `where` gains `a.id > ?` (bound first).
 */
function chunked(sql: string): string {
  const inner = sql.replace(/ where /, ' where a.id > ? and ').replace(/AS line/, 'AS line, a.id AS id');
  return `SELECT group_concat(line, char(10) ORDER BY id) || char(10) AS lines, max(id) AS last, count(*) AS n FROM (${inner} limit ${CHUNK})`;
}

function runSql(file: string, sql: string, bindings: unknown[], build?: (row: any) => string, iteration: Iteration = 'rows'): Run {
  const db = new Database(file, { readonly: true, fileMustExist: true });
  addLowerFunction(db);
  try {
    const hash = createHash('sha256');
    const cpu = process.cpuUsage();
    const started = performance.now();
    db.exec('BEGIN');
    let rows = 0;
    let piece = '';
    const add = (text: string) => {
      piece += text;
      if (piece.length >= 64 * 1024) {
        hash.update(piece);
        piece = '';
      }
    };
    if (iteration === 'chunks') {
      const next = db.prepare(chunked(sql));
      for (let last = 0; ; ) {
        const chunk = next.get(last, ...bindings) as { lines: string | null; last: number; n: number };
        if (chunk.n === 0) break;
        add(chunk.lines!);
        rows += chunk.n;
        last = chunk.last;
      }
    } else if (iteration === 'pluck') {
      for (const line of db
        .prepare(sql)
        .pluck()
        .iterate(...bindings) as IterableIterator<string>) {
        add(`${line}\n`);
        rows++;
      }
    } else {
      for (const row of db.prepare(sql).iterate(...bindings) as IterableIterator<{ line: string }>) {
        add(`${build === undefined ? row.line : build(row)}\n`);
        rows++;
      }
    }
    hash.update(piece);
    db.exec('COMMIT');
    const seconds = (performance.now() - started) / 1000;
    const used = process.cpuUsage(cpu);
    return { rows, seconds, cpuUs: used.user + used.system, hash: hash.digest('hex') };
  } finally {
    db.close();
  }
}

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'trackd-export-stmt-'));
try {
  const { file, orgId } = await load(dir);
  const probe = new Database(file, { readonly: true });
  const walk = walksTable(probe, orgId, {});
  probe.close();
  const current = assetExportSql(orgId, {}, 'ndjson', Date.now(), walk).toSQL().toNative();
  if (process.env.EXPLAIN === '1') {
    const db = new Database(file, { readonly: true });
    for (const r of db.prepare(`EXPLAIN QUERY PLAN ${current.sql}`).all(...(current.bindings as unknown[]))) console.error(r);
    db.close();
  }
  const lineOf = (sql: string) => current.sql.replace(/json_object\('id', a\.id[\s\S]*AS line/, sql);
  const variants: Record<string, string> = {
    current: current.sql,
    'covering tags index (a migration; current statement)': current.sql.replace(
      'FROM tags t WHERE',
      'FROM tags t INDEXED BY tags_asset_live_covering WHERE',
    ),
    'split: timestamps in JavaScript (memo)': lineOf(SPLIT_SQL),
    'concat, tags by json_group_array': lineOf(concatLine('json_group_array')),
    'concat, tags by group_concat': lineOf(concatLine('group_concat')),
    'tags by group_concat': current.sql.replace(
      /json\(\(SELECT json_group_array[\s\S]*ORDER BY t\.id\) s\)\)/,
      `json('[' || coalesce((SELECT group_concat('{"id":' || t.id || ',"tag_type":' || json_quote(t.tag_type) || ',"value":' || json_quote(t.value) || '}', ',' ORDER BY t.id)
           FROM tags t WHERE t.asset_id = a.id AND t.org_id = a.org_id AND t.deleted_at IS NULL), '') || ']')`,
    ),
    'timestamps by %f': ['valid_from', 'valid_to', 'created_at', 'updated_at', 'deleted_at'].reduce(
      (sql, column) => sql.split(isoSql(`a.${column}`)).join(`strftime('%Y-%m-%dT%H:%M:%fZ', a.${column} / 1000.0, 'unixepoch')`),
      current.sql,
    ),
    'current without the tags (what they cost)': current.sql.replace(
      /json\(\(SELECT json_group_array[\s\S]*ORDER BY t\.id\) s\)\)/,
      "json('[]')",
    ),
    'current, pluck (the line without a row object)': current.sql,
    [`current, ${CHUNK} lines a step joined by SQLite (keyset on id)`]: current.sql,
    'current without the timestamps (what they cost)': ['valid_from', 'valid_to', 'created_at', 'updated_at', 'deleted_at'].reduce(
      (sql, column) => sql.split(isoSql(`a.${column}`)).join("'t'"),
      current.sql,
    ),
  };
  const figures: Record<string, { rows_per_s: number[]; cpu_us_per_row: number[]; same_bytes_as_current: boolean[] }> = {};
  // A covering index of the live tags by owner (not in the schema: what a migration adding it would give the export).
  const covered = path.join(dir, 'covered.sqlite');
  const source = new Database(file, { readonly: true });
  await source.backup(covered);
  source.close();
  const coveredDb = new Database(covered);
  coveredDb.exec(
    'CREATE INDEX tags_asset_live_covering ON tags (asset_id, id, tag_type, value, org_id, deleted_at) WHERE asset_id IS NOT NULL AND deleted_at IS NULL',
  );
  if (process.env.EXPLAIN === '1') {
    const sql = current.sql.replace('FROM tags t WHERE', 'FROM tags t INDEXED BY tags_asset_live_covering WHERE');
    for (const r of coveredDb.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(...(current.bindings as unknown[]))) console.error(r);
  }
  coveredDb.close();
  const reference = runSql(file, current.sql, current.bindings as unknown[]).hash;
  const loadBefore = os.loadavg();
  for (let round = 0; round < ROUNDS; round++) {
    const names = Object.keys(variants).map((_, k, all) => all[(k + round) % all.length]!);
    for (const name of names) {
      const r = runSql(
        name.startsWith('covering') ? covered : file,
        variants[name]!,
        current.bindings as unknown[],
        name.startsWith('split') ? splitLine() : undefined,
        name.includes('pluck') ? 'pluck' : name.includes('joined by SQLite') ? 'chunks' : 'rows',
      );
      const f = (figures[name] ??= { rows_per_s: [], cpu_us_per_row: [], same_bytes_as_current: [] });
      f.rows_per_s.push(Math.round(r.rows / r.seconds));
      f.cpu_us_per_row.push(Math.round((r.cpuUs / r.rows) * 100) / 100);
      f.same_bytes_as_current.push(r.hash === reference);
    }
    process.stderr.write(`round ${round + 1} done\n`);
  }
  const result = {
    generated_at: new Date().toISOString(),
    command: `node dist/bench/probes/exportStatement.js ${process.argv.slice(2).join(' ')}`,
    machine: { ...machine(), load_average_before: loadBefore.map((x) => Math.round(x * 10) / 10) },
    rows: ROWS,
    walks_table: walk,
    figures,
  };
  const text = JSON.stringify(result, null, 2);
  if (values.out !== undefined) fs.writeFileSync(values.out, `${text}\n`);
  process.stdout.write(`${text}\n`);
} finally {
  fs.rmSync(dir, { recursive: true, force: true });
}
