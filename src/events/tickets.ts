import { randomBytes } from 'node:crypto';
import { authDetails, unauthorized, type Principal } from '../auth/authenticator.js';
import type { ShardRegistry } from '../shards/registry.js';
import { shardCommand } from '../shards/commands.js';
import type { Shard } from '../shards/shard.js';
import { shardState } from '../shards/state.js';
import type { ShardWriter } from '../shards/writer.js';

/** How long a ticket may wait for its stream. */
export const TICKET_TTL_MS = 60_000;

/** A principal as plain data (it crosses the mailbox). */
interface TicketHolder {
  apiKeyId: string;
  orgId: number;
  scopeList: string[];
  expiresAt: number | null;
}

/**
 * Stream tickets for browsers (which cannot set an Authorization header on EventSource or WebSocket):
 * minted with an API key, valid TICKET_TTL_MS, redeemed once. They live in the memory of the org's
 * shard actor (one thread, so a ticket is redeemed once whichever HTTP thread the stream lands on);
 * they are not shard state (read-only commands: never recorded or journaled), and an actor restart
 * forgets them (the browser asks for another).
 */
const ticketsOf = shardState((_shard: ShardWriter) => new Map<string, { holder: TicketHolder; expires: number }>());

const mintCommand = shardCommand(
  'events.mintTicket',
  (shard, holder: TicketHolder): { ticket: string; expires: number } => {
    const tickets = ticketsOf(shard);
    for (const [ticket, t] of tickets) if (t.expires <= shard.now) tickets.delete(ticket);
    const ticket = `${holder.orgId}.${randomBytes(24).toString('base64url')}`;
    const expires = shard.now + TICKET_TTL_MS;
    tickets.set(ticket, { holder, expires });
    return { ticket, expires };
  },
  'scans',
  { readOnly: true },
);

const redeemCommand = shardCommand(
  'events.redeemTicket',
  (shard, { ticket }: { ticket: string }): TicketHolder | null => {
    const tickets = ticketsOf(shard);
    const found = tickets.get(ticket);
    tickets.delete(ticket);
    return found === undefined || found.expires <= shard.now ? null : found.holder;
  },
  'scans',
  { readOnly: true },
);

export function mintTicket(shard: Shard, p: Principal): Promise<{ ticket: string; expires: number }> {
  return shard.send(mintCommand, { apiKeyId: p.apiKeyId, orgId: p.orgId, scopeList: [...p.scopeList], expiresAt: p.expiresAt });
}

/** The principal a ticket was minted for, once; undefined when unknown, used or expired. */
export async function redeemTicket(shard: Shard, ticket: string): Promise<Principal | undefined> {
  const holder = await shard.send(redeemCommand, { ticket });
  if (holder === null) return undefined;
  return { ...holder, scopes: new Set(holder.scopeList) };
}

/** The org a ticket names (its prefix), to find its shard. */
export function ticketOrg(ticket: string): number | undefined {
  const match = /^(\d{1,10})\.[A-Za-z0-9_-]{32}$/.exec(ticket);
  return match === null ? undefined : Number(match[1]);
}

/** The principal of the `ticket` in a query string (redeemed once, at its org's shard actor), or 401. */
export async function ticketPrincipal(shards: ShardRegistry, rawQuery: string): Promise<Principal> {
  const ticket = new URLSearchParams(rawQuery).get('ticket');
  if (ticket === null) throw unauthorized(authDetails.missing);
  const orgId = ticketOrg(ticket);
  const shard = orgId === undefined ? undefined : shards.forOrg(orgId);
  const principal = shard === undefined ? undefined : await redeemTicket(await shard, ticket);
  if (principal === undefined) throw unauthorized('The stream ticket is unknown, expired or already used');
  return principal;
}
