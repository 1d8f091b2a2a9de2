import { partitionOfOrg, partitionedSubjects } from '../scans/partition.js';
import { signSession } from '../auth/tokens.js';
import { loadSigningKey } from '../auth/signingKey.js';
import { ControlPlane } from '../control/controlPlane.js';
import { joinControlCluster } from '../control/clusterControl.js';
import { listKeys, mintKey, revokeKey, scopeProblem } from '../keys/service.js';
import { parseTimestamp } from '../wire/timestamps.js';
import { CliError, intFlag, requireFlag, type Command, type CommandContext } from './common.js';

export async function withControl<T>(ctx: CommandContext, fn: (control: ControlPlane) => Promise<T> | T): Promise<T> {
  const control = await ControlPlane.open(ctx.config.DATA_DIR);
  try {
    // Cluster mode: the file brought up to date with the cluster's bucket first, and writes go there.
    const cluster = await joinControlCluster(ctx.config, control, { follow: false });
    try {
      return await fn(control);
    } finally {
      await cluster?.stop();
    }
  } finally {
    control.close();
  }
}

export function requireOrg(control: ControlPlane, orgId: number) {
  const org = control.getOrg(orgId);
  if (org === undefined) throw new CliError(`organization ${orgId} does not exist`);
  return org;
}

const DURATION = /^(\d+)([smhdw])$/;
const UNIT_MS: Record<string, number> = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 };

function requestedExpiry(flags: CommandContext['flags']): number | null {
  const inText = flags['expires-in'];
  const atText = flags['expires-at'];
  if (typeof inText === 'string' && typeof atText === 'string') throw new CliError('give --expires-in or --expires-at, not both');
  if (typeof inText === 'string') {
    const m = DURATION.exec(inText);
    if (m === null || Number(m[1]) === 0)
      throw new CliError(`--expires-in must look like 30d, 12h, 90m or 3600s, got ${JSON.stringify(inText)}`);
    return Date.now() + Number(m[1]) * UNIT_MS[m[2]!]!;
  }
  if (typeof atText === 'string') {
    const ts = parseTimestamp(atText);
    if (ts === undefined || ts.sentinel) throw new CliError(`--expires-at must be an RFC 3339 timestamp, got ${JSON.stringify(atText)}`);
    if (ts.ms <= Date.now()) throw new CliError(`--expires-at must be in the future, got ${JSON.stringify(atText)}`);
    return ts.ms;
  }
  return null;
}

function parseScopes(text: string): string[] {
  const scopes = [
    ...new Set(
      text
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean),
    ),
  ];
  if (scopes.length === 0) throw new CliError('--scopes needs at least one scope');
  for (const s of scopes) {
    const problem = scopeProblem(s);
    if (problem !== undefined) throw new CliError(problem);
  }
  return scopes;
}

export const orgsCreate: Command = {
  options: { name: { type: 'string' } },
  run: (ctx) =>
    withControl(ctx, async (control) => {
      const name = requireFlag(ctx.flags, 'name');
      if (name.length > 255) throw new CliError('--name must be at most 255 characters');
      const shards = ctx.config.SHARDS;
      const org = await control.createOrg(name, shards, partitionedSubjects(ctx.config) ? (id) => partitionOfOrg(id, shards) : undefined);
      return { id: org.id, name: org.name };
    }),
};

export const orgsList: Command = {
  options: {},
  run: (ctx) => withControl(ctx, (control) => control.listOrgs().map((o) => ({ id: o.id, name: o.name }))),
};

export const keysCreate: Command = {
  options: {
    org: { type: 'string' },
    name: { type: 'string' },
    scopes: { type: 'string' },
    'expires-in': { type: 'string' },
    'expires-at': { type: 'string' },
    env: { type: 'string' },
  },
  run: (ctx) =>
    withControl(ctx, async (control) => {
      const orgId = intFlag(ctx.flags, 'org');
      const name = requireFlag(ctx.flags, 'name');
      const scopes = parseScopes(requireFlag(ctx.flags, 'scopes'));
      const env = typeof ctx.flags.env === 'string' ? ctx.flags.env : ctx.config.TRACKD_ENV;
      if (env !== 'preview' && env !== 'production') throw new CliError(`--env must be preview or production, got ${JSON.stringify(env)}`);
      const expiresAt = requestedExpiry(ctx.flags);
      requireOrg(control, orgId);
      return mintKey(control, await loadSigningKey(ctx.config.DATA_DIR), { orgId, name, scopes, env, expiresAt });
    }),
};

export const keysList: Command = {
  options: { org: { type: 'string' } },
  run: (ctx) =>
    withControl(ctx, (control) => {
      const orgId = intFlag(ctx.flags, 'org');
      requireOrg(control, orgId);
      return listKeys(control, orgId);
    }),
};

export const keysRevoke: Command = {
  options: {},
  run: (ctx) =>
    withControl(ctx, async (control) => {
      const id = ctx.positionals[0];
      if (id === undefined) throw new CliError('usage: trackd keys revoke API_KEY_ID');
      const revokedAt = await revokeKey(control, id);
      if (revokedAt === undefined) throw new CliError(`API key ${id} does not exist`);
      return { api_key_id: id, revoked_at: revokedAt };
    }),
};

export const sessionsCreate: Command = {
  options: { org: { type: 'string' }, user: { type: 'string' } },
  run: (ctx) =>
    withControl(ctx, async (control) => {
      const orgId = intFlag(ctx.flags, 'org');
      const user = requireFlag(ctx.flags, 'user');
      requireOrg(control, orgId);
      const signingKey = await loadSigningKey(ctx.config.DATA_DIR);
      return { token: await signSession(signingKey, { orgId, user, ttlSeconds: 8 * 3600 }) };
    }),
};
