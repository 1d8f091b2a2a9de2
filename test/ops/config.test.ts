import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import t from 'tap';
import { BIN, tempDir } from '../helpers/trackd.js';

t.test('configuration is validated at start: a bad value stops it with one line naming the variable', async (t) => {
  const dataDir = tempDir();
  t.teardown(() => fs.rmSync(dataDir, { recursive: true, force: true }));
  const cases: [Record<string, string>, string][] = [
    [{ PORT: 'eighty' }, 'PORT'],
    [{ PORT: '70000' }, 'PORT'],
    [{ TRACKD_ENV: 'staging' }, 'TRACKD_ENV'],
    [{ SHARDS: '0' }, 'SHARDS'],
    [{ RATE_LIMIT_PER_MIN: '-1' }, 'RATE_LIMIT_PER_MIN'],
    [{ RATE_LIMIT_PER_MIN: '0' }, 'RATE_LIMIT_PER_MIN'],
    [{ LOG_LEVEL: 'loud' }, 'LOG_LEVEL'],
    [{ HISTORY_GAP_SECONDS: '1.5' }, 'HISTORY_GAP_SECONDS'],
    [{ MQTT_PORT: 'x' }, 'MQTT_PORT'],
    [{ CLUSTER_NODE_ID: 'node a' }, 'CLUSTER_NODE_ID'],
    [{ CLUSTER_STATIC_SHARDS: '0,x', CLUSTER_NODE_ID: 'a' }, 'CLUSTER_STATIC_SHARDS'],
    [{ WEBHOOK_ALLOWED_CIDRS: '10.0.0.0/33' }, 'WEBHOOK_ALLOWED_CIDRS'],
    [{ WEBHOOK_RETRY_WINDOW_SECONDS: '0' }, 'WEBHOOK_RETRY_WINDOW_SECONDS'],
    [{ WEBHOOK_TIMEOUT_MS: '5' }, 'WEBHOOK_TIMEOUT_MS'],
    [{ CLUSTER_NODE_ID: 'n'.repeat(65) }, 'CLUSTER_NODE_ID'],
    [{ LEASE_SECONDS: '0' }, 'LEASE_SECONDS'],
    [{ CLUSTER_STANDBYS: 'yes' }, 'CLUSTER_STANDBYS'],
    [{ CLUSTER_NODE_ID: 'node-a', NATS_URL: '' }, 'CLUSTER_NODE_ID'],
    [{ SHARD_JOURNAL: 'off', CLUSTER_NODE_ID: 'node-a' }, 'SHARD_JOURNAL'],
    [{ BACKGROUND_NICE: '20' }, 'BACKGROUND_NICE'],
    [{ BACKGROUND_NICE: '-5' }, 'BACKGROUND_NICE'],
  ];
  for (const [env, name] of cases) {
    const r = spawnSync(process.execPath, [BIN, 'serve'], {
      env: { ...process.env, DATA_DIR: dataDir, NATS_URL: 'nats://127.0.0.1:1', ...env },
      encoding: 'utf8',
      timeout: 20_000,
    });
    const label = Object.entries(env)
      .map(([k, v]) => `${k}=${v}`)
      .join(' ');
    t.not(r.status, 0, `${label}: does not start`);
    t.equal(r.stdout, '', `${label}: nothing on stdout (no listening line)`);
    const lines = r.stderr.split('\n').filter(Boolean);
    t.equal(lines.length, 1, `${label}: one line on stderr`);
    t.match(lines[0], new RegExp(`^trackd: ${name}: `), `${label}: names the variable (${lines[0]})`);
    t.match(lines[0], Object.values(env)[0], `${label}: quotes the value`);
  }
});
