import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { createRequire } from 'node:module';
import type { Knex } from 'knex';

export type Db = Database.Database;

export interface Migration {
  name: string;
  up(knex: Knex): Promise<void>;
  down?(knex: Knex): Promise<void>;
}

/** The page cache of every connection, in KiB (64 MiB); a bulk job raises its shard writer's (bulk/writerCache.ts). */
export const DEFAULT_CACHE_KIB = 65_536;

/** The memory map of every connection unless told otherwise (`mmapBytes`). */
export const DEFAULT_MMAP_BYTES = 268_435_456;

/**
 * Opens a SQLite file with the pragmas every trackd database uses (WAL, NORMAL sync, busy wait).
 * `mmapBytes`: how much of the file the connection reads through a memory map instead of read()
 * into its page cache (SQLite cuts it to its build's maximum, READ_MMAP_MAX_MB).
 */
export function openDatabase(file: string, options: { readonly?: boolean; mmapBytes?: number } = {}): Db {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  const db = new Database(file, { readonly: options.readonly ?? false, fileMustExist: options.readonly ?? false });
  db.pragma('busy_timeout = 5000');
  if (!options.readonly) {
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = NORMAL');
    db.pragma('foreign_keys = ON');
  }
  db.pragma(`cache_size = -${DEFAULT_CACHE_KIB}`);
  db.pragma('temp_store = MEMORY');
  db.pragma(`mmap_size = ${Math.trunc(options.mmapBytes ?? DEFAULT_MMAP_BYTES)}`);
  return db;
}

/**
 * knex is loaded on first use: loading it costs about half a second, which every CLI command and
 * every start of an already migrated database would otherwise pay without using it.
 */
const requireModule = createRequire(import.meta.url);
let knexFactory: typeof import('knex').knex | undefined;
const loadKnex = () => (knexFactory ??= requireModule('knex') as typeof import('knex').knex);

/** True when knex has already applied every migration of the list to this file. */
function isMigrated(file: string, migrations: Migration[]): boolean {
  if (!fs.existsSync(file)) return false;
  const db = new Database(file, { readonly: true, fileMustExist: true });
  try {
    db.pragma('busy_timeout = 5000');
    const table = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'knex_migrations'").get();
    if (table === undefined) return false;
    const applied = new Set((db.prepare('SELECT name FROM knex_migrations').all() as { name: string }[]).map((r) => r.name));
    return migrations.every((m) => applied.has(m.name));
  } finally {
    db.close();
  }
}

/** Applies knex migrations from a fixed list (compiled modules, no directory scanning). */
export async function migrate(file: string, migrations: Migration[]): Promise<void> {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  if (isMigrated(file, migrations)) return;
  const knex = loadKnex()({ client: 'better-sqlite3', connection: { filename: file }, useNullAsDefault: true });
  try {
    await knex.raw('PRAGMA journal_mode = WAL');
    await knex.migrate.latest({
      migrationSource: {
        getMigrations: async () => migrations,
        getMigrationName: (m: Migration) => m.name,
        getMigration: async (m: Migration) => ({ up: m.up, down: m.down ?? (async () => undefined) }),
      },
    });
  } finally {
    await knex.destroy();
  }
}

let builder: Knex | undefined;
const realBuilder = () => (builder ??= loadKnex()({ client: 'better-sqlite3', useNullAsDefault: true }));

/**
 * Loads the SQL builder now. A serving thread calls it before it is ready: loaded on the thread's
 * first report or export instead, it held that request and every event stream of the thread for
 * 100-300 ms of CPU (the first seconds after a start, bench/results/pause9-diagnosis.json).
 */
export function loadSqlBuilder(): void {
  realBuilder();
}

/** A knex instance used only to build SQL text; statements run through better-sqlite3. Created on first use. */
export const sqlBuilder: Knex = new Proxy(function sqlBuilder() {} as unknown as Knex, {
  apply: (_target, _this, args: unknown[]) => (realBuilder() as unknown as (...a: unknown[]) => unknown)(...args),
  get: (_target, property) => Reflect.get(realBuilder(), property),
});

/** Caches prepared statements by SQL text, so knex-built dynamic queries are prepared once. */
export class StatementCache {
  private readonly cache = new Map<string, Database.Statement>();
  constructor(
    private readonly db: Db,
    private readonly max = 512,
  ) {}

  get(sql: string): Database.Statement {
    let stmt = this.cache.get(sql);
    if (stmt === undefined) {
      stmt = this.db.prepare(sql);
      if (this.cache.size >= this.max) this.cache.delete(this.cache.keys().next().value as string);
      this.cache.set(sql, stmt);
    }
    return stmt;
  }
}
