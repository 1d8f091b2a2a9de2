/**
 * In-process ceiling of a read scenario: the same handlers (same SQL, same statements, same row
 * mapping) called directly in a loop over the same random paths, without HTTP, routing, auth,
 * validation or JSON. Run as its own process: `node inProcess.js SPEC.json`; prints {rate, mean_us}.
 */
import fs from 'node:fs';
import { matchGet, openRouteTable } from '../lib/routeTable.js';
import type { RequestContext, Route } from '../../src/http/route.js';
import { specArg } from '../lib/args.js';

interface Spec {
  dataDir: string;
  token: string;
  paths: string[];
  durationSeconds: number;
}

const spec = JSON.parse(fs.readFileSync(specArg(), 'utf8')) as Spec;
const table = await openRouteTable(spec.dataDir);
const principal = await table.authenticator.verify(spec.token);
const prepared: { route: Route; ctx: RequestContext }[] = [];
for (const p of spec.paths.slice(0, 5000)) {
  const m = matchGet(table, p);
  if (m === undefined) throw new Error(`no GET route for ${p}`);
  prepared.push({ route: m.route, ctx: await table.context(m.route, principal, m.params, m.rawQuery, m.path) });
}

// Warm up (statement preparation, JIT), then count calls for the duration.
const warmUntil = performance.now() + 500;
while (performance.now() < warmUntil) {
  const { route, ctx } = prepared[(Math.random() * prepared.length) | 0]!;
  const reply = route.handler(ctx);
  if (reply instanceof Promise) await reply;
}
let calls = 0;
let bad = 0;
const started = performance.now();
const until = started + spec.durationSeconds * 1000;
let now = started;
while (now < until) {
  for (let i = 0; i < 64; i++) {
    const { route, ctx } = prepared[(Math.random() * prepared.length) | 0]!;
    let reply = route.handler(ctx);
    if (reply instanceof Promise) reply = await reply;
    if (reply.status !== 200) bad++;
    calls++;
  }
  now = performance.now();
}
const seconds = (now - started) / 1000;
await table.close();
process.stdout.write(
  `${JSON.stringify({ rate: Math.round(calls / seconds), calls, bad, mean_us: Math.round(((now - started) * 1000) / calls) })}\n`,
);
