import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { loadSigningKey } from '../auth/signingKey.js';
import { signApiKey } from '../auth/tokens.js';
import { CliError, intFlag, type Command, type CommandContext } from '../cli/common.js';
import { withControl } from '../cli/orgsAndKeys.js';

/**
 * `trackd import FILE --org ID --kind assets|locations [--mode upsert] [--dry-run] [--atomic]` and
 * `trackd export --org ID --kind assets|locations|report [--format ndjson|csv] [--out FILE]`: the
 * HTTP bulk endpoints of the server running on DATA_DIR (its http.url), with a key minted for the
 * command (the kind's scope, one day) and revoked at its end. Progress goes to stderr: a bar on a
 * terminal, JSON lines otherwise; the job summary (import) or the export's counts is the one JSON
 * document on stdout.
 */

const KINDS = { assets: 'assets:write', locations: 'locations:write' } as const;
const EXPORTS = {
  assets: { path: '/api/v1/assets/export', scope: 'assets:read' },
  locations: { path: '/api/v1/locations/export', scope: 'locations:read' },
  report: { path: '/api/v1/reports/asset-locations/export', scope: 'tracking:read' },
} as const;

function serverUrl(ctx: CommandContext): URL {
  if (typeof ctx.flags.url === 'string') return new URL(ctx.flags.url);
  const file = path.join(ctx.config.DATA_DIR, 'http.url');
  if (!fs.existsSync(file)) throw new CliError(`no server: ${file} does not exist (start trackd serve, or give --url)`);
  return new URL(fs.readFileSync(file, 'utf8').trim());
}

/** A key of the org with one scope for the command's own requests, revoked by `done`. */
async function commandKey(ctx: CommandContext, orgId: number, scope: string): Promise<{ token: string; done: () => Promise<void> }> {
  return withControl(ctx, async (control) => {
    if (control.getOrg(orgId) === undefined) throw new CliError(`organization ${orgId} does not exist`);
    const expiresAt = Math.floor((Date.now() + 86_400_000) / 1000) * 1000;
    const row = await control.createKey({
      orgId,
      name: `cli ${ctx.positionals[0] ?? 'export'}`,
      scopes: [scope],
      env: ctx.config.TRACKD_ENV,
      expiresAt,
    });
    const token = await signApiKey(await loadSigningKey(ctx.config.DATA_DIR), {
      apiKeyId: row.id,
      orgId,
      scopes: [scope],
      env: ctx.config.TRACKD_ENV,
      expiresAt,
    });
    return { token, done: () => withControl(ctx, (again) => again.revokeKey(row.id)).then(() => undefined) };
  });
}

/** Progress on stderr: a bar redrawn in place on a terminal, else one JSON line per report. */
export class Progress {
  private last = 0;
  constructor(
    private readonly out: NodeJS.WriteStream = process.stderr,
    private readonly everyMs = 500,
  ) {}

  report(fields: Record<string, unknown>, fraction: number | undefined, force = false): void {
    const now = Date.now();
    if (!force && now - this.last < this.everyMs) return;
    this.last = now;
    if (!this.out.isTTY) {
      this.out.write(`${JSON.stringify({ progress: fields })}\n`);
      return;
    }
    const width = 30;
    const done = fraction === undefined ? 0 : Math.round(Math.min(1, fraction) * width);
    const bar =
      fraction === undefined ? '' : `[${'#'.repeat(done)}${'.'.repeat(width - done)}] ${Math.floor(Math.min(1, fraction) * 100)}% `;
    const text = Object.entries(fields)
      .map(([k, v]) => `${k} ${v}`)
      .join(', ');
    this.out.write(`\r${bar}${text}\u001b[K`);
  }

  end(): void {
    if (this.out.isTTY) this.out.write('\n');
  }
}

function request(url: URL, options: http.RequestOptions, body?: fs.ReadStream): Promise<http.IncomingMessage> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, options, resolve);
    req.on('error', reject);
    if (body === undefined) req.end();
    else body.pipe(req);
  });
}

async function json(res: http.IncomingMessage): Promise<any> {
  const chunks: Buffer[] = [];
  for await (const chunk of res) chunks.push(chunk as Buffer);
  const text = Buffer.concat(chunks).toString('utf8');
  try {
    return JSON.parse(text);
  } catch {
    throw new CliError(`unexpected answer ${res.statusCode}: ${text.slice(0, 200)}`);
  }
}

const failure = (status: number | undefined, body: any) =>
  new CliError(`${status} ${body?.error?.type ?? ''}: ${body?.error?.detail ?? JSON.stringify(body)}`);

export const importCommand: Command = {
  options: {
    org: { type: 'string' },
    kind: { type: 'string' },
    mode: { type: 'string' },
    format: { type: 'string' },
    'dry-run': { type: 'boolean' },
    atomic: { type: 'boolean' },
    'idempotency-key': { type: 'string' },
    url: { type: 'string' },
  },
  async run(ctx) {
    const file = ctx.positionals[0];
    if (file === undefined)
      throw new CliError('usage: trackd import FILE --org ID --kind assets|locations [--mode create|upsert] [--dry-run] [--atomic]');
    if (!fs.existsSync(file)) throw new CliError(`${file} does not exist`);
    const orgId = intFlag(ctx.flags, 'org');
    const kind = ctx.flags.kind;
    if (kind !== 'assets' && kind !== 'locations') throw new CliError('--kind must be assets or locations');
    const mode = ctx.flags.mode ?? 'create';
    if (mode !== 'create' && mode !== 'upsert') throw new CliError('--mode must be create or upsert');
    const format = ctx.flags.format ?? (/\.(ndjson|jsonl)$/i.test(file) ? 'ndjson' : 'csv');
    if (format !== 'csv' && format !== 'ndjson') throw new CliError('--format must be csv or ndjson');
    const base = serverUrl(ctx);
    const { token, done } = await commandKey(ctx, orgId, KINDS[kind]);
    const progress = new Progress();
    try {
      const size = fs.statSync(file).size;
      const query = new URLSearchParams({
        mode,
        dry_run: String(ctx.flags['dry-run'] === true),
        atomic: String(ctx.flags.atomic === true),
      });
      const body = fs.createReadStream(file, { highWaterMark: 256 * 1024 });
      body.on('data', () =>
        progress.report({ phase: 'upload', bytes_sent: body.bytesRead, bytes: size }, size === 0 ? 1 : body.bytesRead / size),
      );
      const headers: Record<string, string> = {
        authorization: `Bearer ${token}`,
        'content-type': format === 'csv' ? 'text/csv' : 'application/x-ndjson',
        'content-length': String(size),
      };
      if (typeof ctx.flags['idempotency-key'] === 'string') headers['idempotency-key'] = ctx.flags['idempotency-key'];
      const res = await request(new URL(`/api/v1/${kind}/bulk?${query}`, base), { method: 'POST', headers }, body);
      const accepted = await json(res);
      if (res.statusCode !== 202) throw failure(res.statusCode, accepted);
      for (;;) {
        const statusRes = await request(new URL(accepted.status_url, base), { headers: { authorization: `Bearer ${token}` } });
        const status = await json(statusRes);
        if (statusRes.statusCode !== 200) throw failure(statusRes.statusCode, status);
        const job = status.data;
        const settled = job.status === 'completed' || job.status === 'failed';
        const { processed_rows, failed_rows, created, updated, unchanged } = job;
        progress.report(
          { phase: 'apply', job_id: job.job_id, processed_rows, total_rows: job.total_rows, failed_rows, created, updated, unchanged },
          job.total_rows ? processed_rows / job.total_rows : undefined,
          settled,
        );
        if (settled) {
          progress.end();
          return job;
        }
        await new Promise((r) => setTimeout(r, 200));
      }
    } finally {
      await done();
    }
  },
};

export const exportCommand: Command = {
  options: {
    org: { type: 'string' },
    kind: { type: 'string' },
    format: { type: 'string' },
    out: { type: 'string' },
    url: { type: 'string' },
  },
  async run(ctx) {
    const orgId = intFlag(ctx.flags, 'org');
    const kind = ctx.flags.kind;
    if (kind !== 'assets' && kind !== 'locations' && kind !== 'report') throw new CliError('--kind must be assets, locations or report');
    const format = ctx.flags.format ?? 'ndjson';
    if (format !== 'csv' && format !== 'ndjson') throw new CliError('--format must be csv or ndjson');
    if (typeof ctx.flags.out !== 'string') throw new CliError('--out FILE is required (stdout carries the summary)');
    const target = EXPORTS[kind];
    const { token, done } = await commandKey(ctx, orgId, target.scope);
    const progress = new Progress();
    try {
      const accept = format === 'csv' ? 'text/csv' : 'application/x-ndjson';
      const res = await request(new URL(target.path, serverUrl(ctx)), { headers: { authorization: `Bearer ${token}`, accept } });
      if (res.statusCode !== 200) throw failure(res.statusCode, await json(res));
      let bytes = 0;
      let lines = 0;
      res.on('data', (chunk: Buffer) => {
        bytes += chunk.length;
        for (let i = chunk.indexOf(10); i >= 0; i = chunk.indexOf(10, i + 1)) lines++;
        progress.report({ phase: 'download', bytes, lines }, undefined);
      });
      await pipeline(res, fs.createWriteStream(ctx.flags.out));
      progress.report({ phase: 'download', bytes, lines }, 1, true);
      progress.end();
      const rows = format === 'csv' ? Math.max(0, lines - 1) : lines;
      return { kind, format, file: ctx.flags.out, rows, bytes, as_of: res.headers['trackd-export-as-of'] ?? null };
    } finally {
      await done();
    }
  },
};
