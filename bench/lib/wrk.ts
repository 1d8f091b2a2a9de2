/**
 * wrk (C, epoll) as the load generator when it is installed: on a 2-core machine a node load
 * generator saturates its core long before uWS does (autocannon tops out near the fixed-body rate
 * and trackd sits mostly idle), so the figures would measure autocannon. A Lua script draws the
 * template, path and token at random for every request, like the autocannon path.
 */
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import type { LoadResult, LoadSpec } from './loadSpec.js';
import { round } from './loadSpec.js';

export function wrkAvailable(): boolean {
  return spawnSync('wrk', ['--version'], { encoding: 'utf8' }).error === undefined;
}

const lua = (value: unknown): string => JSON.stringify(value);

function script(spec: LoadSpec): string {
  const templates = spec.requests.map(
    (r) =>
      `{ method = ${lua(r.method)}, paths = { ${r.paths.map(lua).join(', ')} }, body = ${r.body === undefined ? 'nil' : lua(r.body)}, contentType = ${lua(r.contentType ?? 'application/json')}, anonymous = ${r.anonymous ? 'true' : 'false'} }`,
  );
  const table = spec.requests.flatMap((r, i) => Array.from({ length: r.weight ?? 1 }, () => i + 1));
  return `
local templates = { ${templates.join(',\n')} }
local pick = { ${table.join(', ')} }
local tokens = { ${spec.tokens.map(lua).join(', ')} }
local threads = {}
local counter = 0
local stamp = "W"
function setup(thread)
  table.insert(threads, thread)
  thread:set("tid", #threads)
end
function init(args)
  math.randomseed(os.time() * 1000 + (tid or 0))
  stamp = string.format("W%X%X", os.time(), (tid or 0) * 1000 + math.random(999))
end
function request()
  local t = templates[pick[math.random(#pick)]]
  counter = counter + 1
  local n = stamp .. "-" .. counter
  local p = string.gsub(t.paths[math.random(#t.paths)], "{n}", n)
  local headers = {}
  if not t.anonymous then headers["Authorization"] = "Bearer " .. tokens[math.random(#tokens)] end
  local body = nil
  if t.body then
    headers["Content-Type"] = t.contentType
    body = string.gsub(t.body, "{n}", n)
  end
  return wrk.format(t.method, p, headers, body)
end
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('WRK_RESULT {"requests":%d,"duration_us":%d,"p50":%d,"p99":%d,"max":%d,"mean":%f,"status_errors":%d,"connect":%d,"read":%d,"write":%d,"timeout":%d}\\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99), latency.max, latency.mean, e.status, e.connect, e.read, e.write, e.timeout))
end
`;
}

interface WrkSummary {
  requests: number;
  duration_us: number;
  p50: number;
  p99: number;
  max: number;
  mean: number;
  status_errors: number;
  connect: number;
  read: number;
  write: number;
  timeout: number;
}

function runOnce(spec: LoadSpec, scriptFile: string, seconds: number): Promise<WrkSummary> {
  return new Promise((resolve, reject) => {
    // One thread: the other core is trackd's. Whole seconds: wrk takes no fractions.
    const args = ['-t1', `-c${spec.connections}`, `-d${Math.max(1, Math.round(seconds))}s`, '--timeout', '10s', '-s', scriptFile, spec.url];
    const child = spawn('wrk', args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    child.once('error', reject);
    child.once('exit', (code) => {
      const line = out.split('\n').find((l) => l.startsWith('WRK_RESULT '));
      if (code !== 0 || line === undefined) return reject(new Error(`wrk exited with ${code}: ${out.slice(-800)}`));
      resolve(JSON.parse(line.slice('WRK_RESULT '.length)) as WrkSummary);
    });
  });
}

export async function runWrk(spec: LoadSpec, workDir: string): Promise<LoadResult> {
  const file = path.join(workDir, `wrk-${process.pid}-${Date.now()}.lua`);
  fs.writeFileSync(file, script(spec));
  if (spec.warmupSeconds > 0) await runOnce(spec, file, spec.warmupSeconds);
  const s = await runOnce(spec, file, spec.durationSeconds);
  const seconds = s.duration_us / 1e6;
  const ms = (us: number) => round(us / 1000);
  return {
    requests: s.requests,
    rate: Math.round(s.requests / seconds),
    latency: { p50: ms(s.p50), p99: ms(s.p99), max: ms(s.max), mean: ms(s.mean) },
    ok: s.requests - s.status_errors,
    notOk: s.status_errors,
    unexpected: s.status_errors > 0 ? { '4xx/5xx': s.status_errors } : {},
    errors: s.connect + s.read + s.write,
    timeouts: s.timeout,
  };
}
