import os from 'node:os';
import path from 'node:path';
import { Type, type Static } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';
import { cidrListProblem } from './webhooks/addresses.js';
import { DEFAULT_BACKGROUND_NICE } from './runtime/threadPriority.js';

const IntString = (min: number, max: number) => Type.Integer({ minimum: min, maximum: max });

/**
 * The largest memory map SQLite accepts in better-sqlite3's build: SQLITE_MAX_MMAP_SIZE is left at
 * its Linux default, 0x7fff0000 bytes (just under 2 GiB); a larger `PRAGMA mmap_size` is cut to it.
 */
export const READ_MMAP_MAX_MB = Math.floor(0x7fff0000 / (1024 * 1024));

/**
 * SQLite's page cache of each shard's writing connection (SHARD_CACHE_MB), in MiB; filled only by
 * the pages the writer reads. The default is every connection's 64 MiB: 1,024 cut the probe's CPU
 * per scan batch at 1,000,000 assets 1.45x, but the bench's ingest-field at that size had a worse
 * publish-to-visible latency in both runs with it, cause not found (docs/field-rereads.md).
 */
export const DEFAULT_WRITER_CACHE_MB = 64;

/** The environment trackd reads: every variable optional, validated once at start. */
export const ConfigSchema = Type.Object({
  HOST: Type.String({ minLength: 1, default: '127.0.0.1' }),
  PORT: IntString(0, 65535),
  DATA_DIR: Type.String({ minLength: 1 }),
  NATS_URL: Type.Optional(Type.String({ minLength: 1 })),
  MQTT_PORT: Type.Optional(IntString(0, 65535)),
  TRACKD_ENV: Type.Union([Type.Literal('preview'), Type.Literal('production')]),
  SHARDS: IntString(1, 256),
  HTTP_THREADS: IntString(1, 256),
  RATE_LIMIT_PER_MIN: IntString(1, 100_000_000),
  LOG_LEVEL: Type.Union(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].map((l) => Type.Literal(l))),
  HISTORY_GAP_SECONDS: IntString(0, 31_536_000),
  EVENT_ID_RETENTION_SECONDS: IntString(1, 31_536_000),
  EVENT_RETENTION_SECONDS: IntString(1, 31_536_000),
  EVENT_STREAM_SLOW_SECONDS: IntString(1, 3600),
  EVENT_STREAM_MAX_LAG: IntString(1, 100_000_000),
  RESPONSE_CACHE_MB: IntString(0, 65_536),
  READ_MMAP_MB: IntString(0, READ_MMAP_MAX_MB),
  SHARD_CACHE_MB: IntString(2, 65_536),
  SHARD_JOURNAL: Type.Union([Type.Literal('on'), Type.Literal('off')]),
  JOURNAL_REPLICAS: IntString(1, 5),
  SNAPSHOT_EVERY_ENTRIES: IntString(1, 100_000_000),
  SNAPSHOT_EVERY_SECONDS: IntString(1, 31_536_000),
  WEBHOOK_ALLOWED_CIDRS: Type.Optional(Type.String()),
  WEBHOOK_RETRY_WINDOW_SECONDS: IntString(1, 31_536_000),
  WEBHOOK_RETRY_FIRST_MS: IntString(1, 86_400_000),
  WEBHOOK_RETRY_MAX_MS: IntString(1, 86_400_000),
  WEBHOOK_TIMEOUT_MS: IntString(100, 300_000),
  CLUSTER_NODE_ID: Type.Optional(Type.String({ pattern: '^[A-Za-z0-9_-]{1,64}$' })),
  CLUSTER_STATIC_SHARDS: Type.Optional(Type.String({ pattern: '^\\d{1,3}(,\\d{1,3})*$' })),
  LEASE_SECONDS: IntString(1, 3600),
  CLUSTER_STANDBYS: Type.Union([Type.Literal('on'), Type.Literal('off')]),
  CLUSTER_REBALANCE_SECONDS: IntString(0, 86_400),
  SCAN_SUBJECT_PARTITIONS: Type.Union([Type.Literal('on'), Type.Literal('off')]),
  SCAN_STALL_SECONDS: IntString(1, 3600),
  BACKGROUND_NICE: IntString(0, 19),
});

export type Config = Static<typeof ConfigSchema>;

export class ConfigError extends Error {}

const DEFAULTS: Record<string, string> = {
  HOST: '127.0.0.1',
  PORT: '8080',
  DATA_DIR: './data',
  TRACKD_ENV: 'preview',
  SHARDS: String(os.availableParallelism?.() ?? os.cpus().length),
  HTTP_THREADS: String(os.availableParallelism?.() ?? os.cpus().length),
  RATE_LIMIT_PER_MIN: '6000',
  LOG_LEVEL: 'info',
  HISTORY_GAP_SECONDS: '300',
  EVENT_ID_RETENTION_SECONDS: '86400',
  EVENT_RETENTION_SECONDS: '604800',
  EVENT_STREAM_SLOW_SECONDS: '10',
  EVENT_STREAM_MAX_LAG: '10000',
  RESPONSE_CACHE_MB: '64',
  READ_MMAP_MB: String(READ_MMAP_MAX_MB),
  SHARD_CACHE_MB: String(DEFAULT_WRITER_CACHE_MB),
  SHARD_JOURNAL: 'off',
  JOURNAL_REPLICAS: '1',
  SNAPSHOT_EVERY_ENTRIES: '10000',
  SNAPSHOT_EVERY_SECONDS: '3600',
  WEBHOOK_RETRY_WINDOW_SECONDS: '259200',
  WEBHOOK_RETRY_FIRST_MS: '5000',
  WEBHOOK_RETRY_MAX_MS: '3600000',
  WEBHOOK_TIMEOUT_MS: '10000',
  LEASE_SECONDS: '15',
  CLUSTER_STANDBYS: 'on',
  CLUSTER_REBALANCE_SECONDS: '0',
  SCAN_SUBJECT_PARTITIONS: 'off',
  SCAN_STALL_SECONDS: '20',
  BACKGROUND_NICE: String(DEFAULT_BACKGROUND_NICE),
};

/** Cluster mode's shard count when SHARDS is unset: fixed, since every node must have the same (not its CPU count). */
const CLUSTER_SHARDS_DEFAULT = 16;

const INTEGER_VARS = new Set([
  'PORT',
  'MQTT_PORT',
  'SHARDS',
  'HTTP_THREADS',
  'RATE_LIMIT_PER_MIN',
  'HISTORY_GAP_SECONDS',
  'EVENT_ID_RETENTION_SECONDS',
  'EVENT_RETENTION_SECONDS',
  'EVENT_STREAM_SLOW_SECONDS',
  'EVENT_STREAM_MAX_LAG',
  'RESPONSE_CACHE_MB',
  'READ_MMAP_MB',
  'SHARD_CACHE_MB',
  'JOURNAL_REPLICAS',
  'SNAPSHOT_EVERY_ENTRIES',
  'SNAPSHOT_EVERY_SECONDS',
  'WEBHOOK_RETRY_WINDOW_SECONDS',
  'WEBHOOK_RETRY_FIRST_MS',
  'WEBHOOK_RETRY_MAX_MS',
  'WEBHOOK_TIMEOUT_MS',
  'LEASE_SECONDS',
  'CLUSTER_REBALANCE_SECONDS',
  'SCAN_STALL_SECONDS',
  'BACKGROUND_NICE',
]);

/** Reads the configuration; a bad value throws a ConfigError whose one-line message names the variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const raw: Record<string, unknown> = {};
  for (const key of Object.keys(ConfigSchema.properties)) {
    const given = env[key];
    const value = given === undefined || given === '' ? DEFAULTS[key] : given;
    if (value === undefined) continue;
    if (INTEGER_VARS.has(key)) {
      if (!/^\d+$/.test(value)) throw new ConfigError(`${key}: must be a non-negative integer, got ${JSON.stringify(value)}`);
      raw[key] = Number(value);
    } else {
      raw[key] = value;
    }
  }
  const firstError = Value.Errors(ConfigSchema, raw).First();
  if (firstError) {
    const name = firstError.path.replace(/^\//, '') || 'configuration';
    const literals = (firstError.schema.anyOf as { const?: unknown }[] | undefined)?.map((m) => m.const);
    const message = literals
      ? `must be one of ${literals.join(', ')}`
      : firstError.schema.pattern !== undefined
        ? `must be 1 to 64 letters, digits, '-' or '_'`
        : firstError.message;
    throw new ConfigError(`${name}: ${message}, got ${JSON.stringify(raw[name])}`);
  }
  const config = raw as Config;
  if (config.WEBHOOK_ALLOWED_CIDRS !== undefined) {
    const problem = cidrListProblem(config.WEBHOOK_ALLOWED_CIDRS);
    if (problem !== undefined)
      throw new ConfigError(`WEBHOOK_ALLOWED_CIDRS: ${problem}, got ${JSON.stringify(config.WEBHOOK_ALLOWED_CIDRS)}`);
  }
  if (config.CLUSTER_NODE_ID !== undefined && config.NATS_URL === undefined)
    throw new ConfigError(
      `CLUSTER_NODE_ID: cluster mode needs NATS_URL (the nodes meet on a nats-server of their own, not an embedded one), got ${JSON.stringify(config.CLUSTER_NODE_ID)} without it`,
    );
  if (config.CLUSTER_STATIC_SHARDS !== undefined && config.CLUSTER_NODE_ID === undefined)
    throw new ConfigError('CLUSTER_STATIC_SHARDS: only in cluster mode (set CLUSTER_NODE_ID)');
  config.DATA_DIR = path.resolve(config.DATA_DIR);
  // Shards placed by lease (no static placement): journaled, the cluster's shard count.
  if (config.CLUSTER_NODE_ID !== undefined && config.CLUSTER_STATIC_SHARDS === undefined) clusterMode(config, env);
  return config;
}

/**
 * Cluster mode (CLUSTER_NODE_ID set; docs/cluster.md): the nodes share a NATS cluster (NATS_URL;
 * no embedded server), every shard is journaled (SHARD_JOURNAL on, an explicit off is refused), and
 * the shard count is the cluster's (16 unless SHARDS says otherwise; checked against the lease bucket).
 */
function clusterMode(config: Config, env: NodeJS.ProcessEnv): void {
  if (env.SHARD_JOURNAL === 'off') throw new ConfigError('SHARD_JOURNAL: cluster mode journals every shard, got "off"');
  config.SHARD_JOURNAL = 'on';
  if (env.SHARDS === undefined || env.SHARDS === '') config.SHARDS = CLUSTER_SHARDS_DEFAULT;
}
