import { get, post, setCsrf } from './api.js';

export interface Org {
  id: number;
  name: string;
}

export interface Session {
  user: { id: number; email: string };
  org: Org;
  orgs: Org[];
  csrf_token: string;
  expires_at: string;
  env: string;
}

export let current: Session | undefined;

export function adopt(session: Session | undefined): void {
  current = session;
  setCsrf(session?.csrf_token ?? '');
}

export async function load(): Promise<Session | undefined> {
  const r = await get<{ data: Session }>('/console/api/session');
  adopt(r.ok ? r.data.data : undefined);
  return current;
}

export async function switchOrg(orgId: number): Promise<boolean> {
  const r = await post<{ data: Session }>('/console/api/session/org', { org_id: orgId });
  if (r.ok) adopt(r.data.data);
  return r.ok;
}

export async function logout(): Promise<void> {
  await post('/console/api/logout');
  adopt(undefined);
}
