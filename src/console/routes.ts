import { Type } from '@sinclair/typebox';
import { ApiError, fieldError, throwIfInvalid } from '../errors/catalog.js';
import { pagingParams } from '../http/query.js';
import type { Reply, RequestContext, Route } from '../http/route.js';
import { listKeys, mintKey, revokeKey, scopeProblem, KEY_NAME_MAX } from '../keys/service.js';
import type { Services } from '../services.js';
import { verifyPassword } from './passwords.js';
import type { WebSession } from '../auth/authenticator.js';
import { checkOrigin, sessionCookie, type SessionAuth } from './session.js';
import { CONSOLE_HEADERS } from './static.js';
import { treeChildren } from './treeCounts.js';

const API = '/console/api';

/** Failed logins allowed per email, and per client address, within the window; then 429 until the oldest leaves it. */
export const LOGIN_LIMITS = { perEmail: 5, perAddress: 30, windowMs: 15 * 60_000 } as const;

/** The expiration choices the new-key form offers. */
export const EXPIRY_CHOICES: Record<string, number | null> = {
  '7d': 7 * 86_400_000,
  '30d': 30 * 86_400_000,
  '90d': 90 * 86_400_000,
  '365d': 365 * 86_400_000,
  never: null,
};

const LoginBody = Type.Object(
  {
    email: Type.String({ minLength: 1, maxLength: 254 }),
    password: Type.String({ minLength: 1, maxLength: 1024 }),
    org_id: Type.Optional(Type.Integer({ minimum: 1, maximum: 2147483647 })),
  },
  { additionalProperties: false },
);

const OrgBody = Type.Object({ org_id: Type.Integer({ minimum: 1, maximum: 2147483647 }) }, { additionalProperties: false });

const KeyCreateBody = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: KEY_NAME_MAX }),
    scopes: Type.Array(Type.String(), { minItems: 1, maxItems: 10 }),
    expires_in: Type.String(),
    org_id: Type.Integer({ minimum: 1, maximum: 2147483647 }),
  },
  { additionalProperties: false },
);

const KeyRevokeBody = Type.Object({ api_key_id: Type.String({ minLength: 1, maxLength: 64 }) }, { additionalProperties: false });

const json = (status: number, body: unknown, cookie?: string): Reply => ({
  status,
  body,
  headers: cookie === undefined ? CONSOLE_HEADERS : { ...CONSOLE_HEADERS, 'Set-Cookie': cookie },
});

const consoleRoute = (route: Omit<Route, 'tag' | 'undocumented' | 'responses'> & { responses?: Route['responses'] }): Route => ({
  tag: 'Console',
  undocumented: true,
  responses: { 200: { description: route.summary } },
  ...route,
});

/** The console's own API (under /console/api, never /api/v1): login, session, API keys, the tree with counts. */
export function consoleRoutes(services: Services, sessions: SessionAuth): Route[] {
  const { control, config } = services;
  const accounts = sessions.accounts;

  const sessionView = (s: WebSession, orgId: number) => {
    const user = accounts.userById(s.userId);
    const org = control.getOrg(orgId);
    return {
      data: {
        user: { id: s.userId, email: user?.email ?? '' },
        org: { id: orgId, name: org?.name ?? '' },
        orgs: accounts.orgsOf(s.userId),
        csrf_token: s.csrf,
        expires_at: new Date(s.expiresAt).toISOString(),
        env: config.TRACKD_ENV,
      },
    };
  };

  const startSession = async (ctx: RequestContext, userId: number, orgId: number): Promise<Reply> => {
    const { token, session } = await sessions.start(userId, orgId, ctx.now);
    const maxAge = Math.floor((session.expiresAt - ctx.now) / 1000);
    return json(200, sessionView(session, orgId), sessionCookie(ctx.client, token, maxAge));
  };

  return [
    consoleRoute({
      method: 'POST',
      path: `${API}/login`,
      operationId: 'console:login',
      summary: 'Sign in with email and password; a user of several organizations names one (org_id)',
      orgScoped: false,
      body: { schema: LoginBody, contentType: 'application/json' },
      handler: async (ctx) => {
        checkOrigin(ctx.client);
        const email = (ctx.body.email as string).trim().toLowerCase();
        const subjects = [`email:${email}`, `address:${ctx.client.remoteAddress}`];
        const since = ctx.now - LOGIN_LIMITS.windowMs;
        const [byEmail, byAddress] = accounts.failures(subjects, since);
        for (const [f, limit] of [
          [byEmail!, LOGIN_LIMITS.perEmail],
          [byAddress!, LOGIN_LIMITS.perAddress],
        ] as const) {
          if (f.count >= limit) {
            const retry = Math.max(1, Math.ceil((f.oldest + LOGIN_LIMITS.windowMs - ctx.now) / 1000));
            throw new ApiError('rate_limited', `Too many failed sign-ins; try again in ${Math.ceil(retry / 60)} minutes`, {
              headers: { 'Retry-After': String(retry) },
            });
          }
        }
        const user = accounts.findUser(email);
        if (!(await verifyPassword(ctx.body.password as string, user?.password_hash)) || user === undefined) {
          accounts.recordFailure(subjects, ctx.now);
          throw new ApiError('unauthorized', 'Wrong email or password');
        }
        accounts.clearFailures(subjects[0]!);
        const orgs = accounts.orgsOf(user.id);
        if (orgs.length === 0) throw new ApiError('forbidden', 'This user belongs to no organization');
        const chosen = ctx.body.org_id as number | undefined;
        if (chosen !== undefined && !orgs.some((o) => o.id === chosen))
          throwIfInvalid([fieldError('org_id', 'invalid_value', 'You do not belong to this organization')]);
        if (chosen === undefined && orgs.length > 1) return json(200, { data: { choose_org: orgs } });
        return startSession(ctx, user.id, chosen ?? orgs[0]!.id);
      },
    }),
    consoleRoute({
      method: 'GET',
      path: `${API}/session`,
      operationId: 'console:session',
      summary: 'The signed-in user, organization, organizations to choose from and the CSRF token',
      session: true,
      scopes: [],
      orgScoped: false,
      handler: (ctx) => json(200, sessionView(ctx.principal.session!, ctx.principal.orgId)),
    }),
    consoleRoute({
      method: 'POST',
      path: `${API}/logout`,
      operationId: 'console:logout',
      summary: 'End the session (on the server: the cookie no longer works even if kept)',
      session: true,
      scopes: [],
      orgScoped: false,
      handler: async (ctx) => {
        await accounts.endSession(ctx.principal.session!.id, ctx.now);
        return { status: 204, headers: { ...CONSOLE_HEADERS, 'Set-Cookie': sessionCookie(ctx.client, '', 0) } };
      },
    }),
    consoleRoute({
      method: 'POST',
      path: `${API}/session/org`,
      operationId: 'console:switchOrg',
      summary: 'Switch to another of the user’s organizations (a new session; the old one ends)',
      session: true,
      scopes: [],
      orgScoped: false,
      body: { schema: OrgBody, contentType: 'application/json' },
      handler: async (ctx) => {
        const s = ctx.principal.session!;
        const orgId = ctx.body.org_id as number;
        if (!accounts.belongs(s.userId, orgId))
          throwIfInvalid([fieldError('org_id', 'invalid_value', 'You do not belong to this organization')]);
        await accounts.endSession(s.id, ctx.now);
        return startSession(ctx, s.userId, orgId);
      },
    }),
    consoleRoute({
      method: 'GET',
      path: `${API}/keys`,
      operationId: 'console:listKeys',
      summary: 'The API keys of the session’s organization (never their tokens)',
      session: true,
      scopes: [],
      orgScoped: false,
      handler: (ctx) => {
        const keys = listKeys(control, ctx.principal.orgId).reverse();
        return json(200, { data: keys, total_count: keys.length });
      },
    }),
    consoleRoute({
      method: 'POST',
      path: `${API}/keys`,
      operationId: 'console:createKey',
      summary: 'Mint an API key (the token is in this answer only)',
      session: true,
      scopes: [],
      orgScoped: false,
      body: {
        schema: KeyCreateBody,
        contentType: 'application/json',
        check: (body) => {
          const errors = [];
          if (typeof body.name === 'string' && body.name !== '' && body.name.trim() === '')
            errors.push(fieldError('name', 'required', 'Give the key a name'));
          if (Array.isArray(body.scopes))
            for (const [i, s] of body.scopes.entries()) {
              const problem = typeof s === 'string' ? scopeProblem(s) : undefined;
              if (problem !== undefined) errors.push(fieldError(`scopes[${i}]`, 'invalid_value', problem));
            }
          if (typeof body.expires_in === 'string' && !(body.expires_in in EXPIRY_CHOICES))
            errors.push(
              fieldError('expires_in', 'invalid_value', `Choose one of ${Object.keys(EXPIRY_CHOICES).join(', ')}`, {
                allowed: Object.keys(EXPIRY_CHOICES),
              }),
            );
          return errors;
        },
      },
      responses: { 201: { description: 'The new key, with its token' } },
      handler: async (ctx) => {
        const orgId = ctx.body.org_id as number;
        if (!accounts.belongs(ctx.principal.session!.userId, orgId))
          throwIfInvalid([fieldError('org_id', 'invalid_value', 'You do not belong to this organization')]);
        const span = EXPIRY_CHOICES[ctx.body.expires_in as string]!;
        const minted = await mintKey(control, services.signingKey!, {
          orgId,
          name: (ctx.body.name as string).trim(),
          scopes: [...new Set(ctx.body.scopes as string[])],
          env: config.TRACKD_ENV,
          expiresAt: span === null ? null : ctx.now + span,
        });
        return json(201, { data: { ...minted, org_id: orgId } });
      },
    }),
    consoleRoute({
      method: 'POST',
      path: `${API}/keys/revoke`,
      operationId: 'console:revokeKey',
      summary: 'Revoke an API key of one of the user’s organizations (servers refuse it within a second)',
      session: true,
      scopes: [],
      orgScoped: false,
      body: { schema: KeyRevokeBody, contentType: 'application/json' },
      handler: async (ctx) => {
        const id = ctx.body.api_key_id as string;
        const key = control.getKey(id);
        if (key === undefined || !accounts.belongs(ctx.principal.session!.userId, key.org_id))
          throw ApiError.notFound(`API key ${id} not found`);
        return json(200, { data: { api_key_id: id, revoked_at: await revokeKey(control, id) } });
      },
    }),
    consoleRoute({
      method: 'GET',
      path: `${API}/tree`,
      operationId: 'console:treeChildren',
      summary: 'One page of a location’s children (roots without parent_id), each with its asset counts',
      session: true,
      scopes: ['locations:read', 'tracking:read'],
      query: {
        ...pagingParams(['name'], 'name'),
        parent_id: { kind: 'id', description: 'The parent location (absent: the roots).' },
      },
      handler: async (ctx) => json(200, await treeChildren(ctx)),
    }),
  ];
}
