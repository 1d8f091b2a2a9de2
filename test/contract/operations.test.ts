import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import t from 'tap';
import { BIN, eventually, tempDir } from '../helpers/trackd.js';

/**
 * Contract audit of operations.md 1, 2 and 4 with every optional variable left unset (except PORT=0,
 * so parallel tests do not fight over 8080): DATA_DIR defaults to ./data, HOST to 127.0.0.1, the
 * embedded nats-server is started, found by the CLI through DATA_DIR/nats.url and stopped on exit.
 */

const OPTIONAL = [
  'HOST',
  'PORT',
  'DATA_DIR',
  'NATS_URL',
  'MQTT_PORT',
  'TRACKD_ENV',
  'SHARDS',
  'RATE_LIMIT_PER_MIN',
  'LOG_LEVEL',
  'HISTORY_GAP_SECONDS',
  'EVENT_ID_RETENTION_SECONDS',
  'RESPONSE_CACHE_MB',
];

function get(port: number, urlPath: string, token?: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: '127.0.0.1', port, path: urlPath, agent: false, headers: token ? { authorization: `Bearer ${token}` } : {} },
      (res) => {
        let body = '';
        res.on('data', (c: Buffer) => (body += c.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      },
    );
    req.on('error', reject);
    req.end();
  });
}

/** Pids whose command line mentions `needle` (the embedded nats-server names its config under DATA_DIR). */
function processesMentioning(needle: string): number[] {
  return fs
    .readdirSync('/proc')
    .filter((d) => /^\d+$/.test(d))
    .filter((pid) => {
      try {
        return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(needle);
      } catch {
        return false;
      }
    })
    .map(Number);
}

t.test('operations.md 1, 2, 4 with the defaults', async (t) => {
  const cwd = tempDir('trackd-defaults-');
  const env: Record<string, string | undefined> = { ...process.env };
  for (const name of OPTIONAL) delete env[name];
  env.PORT = '0';
  const child = spawn(process.execPath, [BIN, 'serve'], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
  const dataDir = path.join(fs.realpathSync(cwd), 'data');
  t.teardown(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
    }
    for (const pid of processesMentioning(dataDir)) process.kill(pid, 'SIGKILL');
    fs.rmSync(cwd, { recursive: true, force: true });
  });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  const listening = await eventually(() => out.split('\n').find((l) => l.includes('"msg":"listening"')), 30_000);
  const line = JSON.parse(listening);

  t.test('1: one listening line with the port; HOST 127.0.0.1 and DATA_DIR ./data by default', async (t) => {
    t.type(line.port, 'number', 'the chosen port is logged');
    t.ok(line.port > 0, 'PORT=0 picked a free port');
    t.equal(line.host, '127.0.0.1', 'HOST default');
    t.equal(fs.realpathSync(line.data_dir), dataDir, 'DATA_DIR default ./data');
    t.ok(fs.existsSync(path.join(dataDir, 'nats.url')), 'the embedded nats-server URL is in DATA_DIR/nats.url');
    t.ok(fs.existsSync(path.join(dataDir, 'mqtt.url')), 'its MQTT URL is in DATA_DIR/mqtt.url');
    t.ok(fs.existsSync(path.join(dataDir, 'nats')), 'its store is under DATA_DIR/nats');
    t.ok(processesMentioning(dataDir).length >= 1, 'a nats-server child runs');
  });

  t.test('2 and 4: the CLI finds DATA_DIR and the embedded broker by default; metrics name the scan counters', async (t) => {
    const cli = (args: string[]) => {
      const r = spawnSync(process.execPath, [BIN, ...args], { cwd, env, encoding: 'utf8' });
      t.equal(r.status, 0, `trackd ${args.join(' ')}: exit 0 (${r.stderr.trim()})`);
      t.equal(r.stdout.trim().split('\n').length, 1, `trackd ${args[0]} ${args[1]}: one JSON document`);
      return JSON.parse(r.stdout);
    };
    const org = cli(['orgs', 'create', '--name', 'Defaults']);
    t.same(Object.keys(org).sort(), ['id', 'name']);
    const key = cli(['keys', 'create', '--org', String(org.id), '--name', 'k', '--scopes', 'locations:write,assets:write,tracking:read']);
    t.same(Object.keys(key).sort(), ['api_key_id', 'expires_at', 'scopes', 'token']);
    const me = await get(line.port, '/api/v1/orgs/me', key.token);
    t.equal(me.status, 200, 'a key minted while the server runs is accepted');
    // A location and a tagged asset through the API, then a handheld scan through the CLI.
    const post = (urlPath: string, body: unknown) =>
      new Promise<number>((resolve, reject) => {
        const text = JSON.stringify(body);
        const req = http.request(
          {
            host: '127.0.0.1',
            port: line.port,
            path: urlPath,
            method: 'POST',
            agent: false,
            headers: {
              authorization: `Bearer ${key.token}`,
              'content-type': 'application/json',
              'content-length': Buffer.byteLength(text),
            },
          },
          (res) => {
            res.resume();
            res.on('end', () => resolve(res.statusCode ?? 0));
          },
        );
        req.on('error', reject);
        req.end(text);
      });
    t.equal(await post('/api/v1/locations', { external_key: 'DOCK', name: 'Dock' }), 201);
    t.equal(await post('/api/v1/assets', { external_key: 'CART', name: 'Cart', tags: [{ tag_type: 'barcode', value: 'C-1' }] }), 201);
    const published = cli([
      'scans',
      'publish',
      '--org',
      String(org.id),
      '--location',
      'DOCK',
      '--tag',
      'barcode:C-1',
      '--source',
      'handheld',
    ]);
    t.same(Object.keys(published).sort(), ['event_id', 'seq', 'stream'], 'publish prints event_id, stream, seq');
    t.equal(published.stream, 'SCANS');
    const report = await eventually(async () => {
      const r = JSON.parse((await get(line.port, '/api/v1/reports/asset-locations', key.token)).body);
      return r.total_count === 1 ? r : undefined;
    }, 5000);
    t.equal(report.data[0].location_external_key, 'DOCK', 'the handheld scan is applied');
    cli(['scans', 'publish', '--org', String(org.id), '--location', 'NOWHERE', '--tag', 'barcode:C-1']);
    const metrics = await eventually(async () => {
      const text = (await get(line.port, '/metrics')).body;
      return /^trackd_scans_dead_lettered_total\{reason="unknown_location"/m.test(text) ? text : undefined;
    }, 5000);
    for (const name of [
      'http_requests_total',
      'http_request_duration_seconds_bucket',
      'trackd_scans_applied_total',
      'trackd_scans_dead_lettered_total',
      'trackd_scans_consumer_pending',
    ]) {
      t.match(metrics, new RegExp(`^${name}[{ ]`, 'm'), `/metrics has ${name}`);
    }
    t.equal((await get(line.port, '/readyz')).status, 200, '/readyz with the embedded broker');
  });

  t.test(
    '4: the ops endpoints answer whatever query a probe or scraper adds; the public surface keeps the unknown-parameter rule',
    async (t) => {
      for (const urlPath of ['/healthz?probe=1', '/readyz?x=1&y', '/metrics?name[]=http_requests_total']) {
        t.equal((await get(line.port, urlPath)).status, 200, urlPath);
      }
      const doc = await get(line.port, '/api/openapi.json?v=2');
      t.equal(doc.status, 400, '/api/openapi.json?v=2: interface 4, unknown query parameter');
      t.equal(JSON.parse(doc.body).error.fields[0].code, 'unknown_field');
    },
  );

  t.test('1: SIGTERM exits 0 within 10 s and stops the embedded nats-server', async (t) => {
    const started = Date.now();
    const code = await new Promise<number | null>((resolve) => {
      child.once('exit', (c) => resolve(c));
      child.kill('SIGTERM');
    });
    t.equal(code, 0, 'exit 0');
    t.ok(Date.now() - started < 10_000, `stopped in ${Date.now() - started} ms`);
    await eventually(() => processesMentioning(dataDir).length === 0, 5000);
    t.same(processesMentioning(dataDir), [], 'no nats-server left running');
  });
});
