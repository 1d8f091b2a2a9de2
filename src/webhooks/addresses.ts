import dns from 'node:dns';
import net from 'node:net';

/**
 * Which addresses a webhook may be delivered to. Refused unless the operator allows them
 * (WEBHOOK_ALLOWED_CIDRS): loopback, private (RFC 1918, IPv6 unique local), link-local (where
 * cloud metadata services answer, 169.254.169.254 and fd00:ec2::254 among them), carrier-grade NAT,
 * unspecified, multicast and reserved ranges. An IPv4-mapped IPv6 address is judged as the IPv4
 * address it carries. The check runs on the addresses DNS returned, at connect time (see guardedLookup),
 * so a name that resolves to a refused address is refused however it is spelled.
 */
const REFUSED: [string, number, 'ipv4' | 'ipv6'][] = [
  ['0.0.0.0', 8, 'ipv4'],
  ['10.0.0.0', 8, 'ipv4'],
  ['100.64.0.0', 10, 'ipv4'],
  ['127.0.0.0', 8, 'ipv4'],
  ['169.254.0.0', 16, 'ipv4'],
  ['172.16.0.0', 12, 'ipv4'],
  ['192.0.0.0', 24, 'ipv4'],
  ['192.168.0.0', 16, 'ipv4'],
  ['198.18.0.0', 15, 'ipv4'],
  ['224.0.0.0', 4, 'ipv4'],
  ['240.0.0.0', 4, 'ipv4'],
  ['::', 128, 'ipv6'],
  ['::1', 128, 'ipv6'],
  ['64:ff9b::', 96, 'ipv6'],
  ['fc00::', 7, 'ipv6'],
  ['fe80::', 10, 'ipv6'],
  ['ff00::', 8, 'ipv6'],
];

const refused = new net.BlockList();
for (const [address, prefix, family] of REFUSED) refused.addSubnet(address, prefix, family);

/** The address to judge: an IPv4-mapped IPv6 address as its IPv4 address. */
function normalize(address: string): { address: string; family: 'ipv4' | 'ipv6' } {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped !== null) return { address: mapped[1]!, family: 'ipv4' };
  return { address, family: net.isIPv6(address) ? 'ipv6' : 'ipv4' };
}

function parseCidr(text: string): { address: string; prefix: number; family: 'ipv4' | 'ipv6' } | undefined {
  const [address, prefixText, extra] = text.split('/');
  if (address === undefined || extra !== undefined) return undefined;
  const version = net.isIP(address);
  if (version === 0) return undefined;
  const max = version === 4 ? 32 : 128;
  const prefix = prefixText === undefined ? max : /^\d+$/.test(prefixText) ? Number(prefixText) : -1;
  if (prefix < 0 || prefix > max) return undefined;
  return { address, prefix, family: version === 4 ? 'ipv4' : 'ipv6' };
}

const splitList = (text: string) =>
  text
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');

/** Why a WEBHOOK_ALLOWED_CIDRS value is not a comma-separated list of CIDRs (or addresses), or undefined. */
export function cidrListProblem(text: string): string | undefined {
  for (const item of splitList(text)) if (parseCidr(item) === undefined) return `${JSON.stringify(item)} is not a CIDR`;
  return undefined;
}

/** The operator's judgement of receiver addresses: refused ranges minus the allowed ones. */
export class AddressPolicy {
  private readonly allowed = new net.BlockList();

  constructor(allowedCidrs: string | undefined) {
    for (const item of splitList(allowedCidrs ?? '')) {
      const cidr = parseCidr(item);
      if (cidr !== undefined) this.allowed.addSubnet(cidr.address, cidr.prefix, cidr.family);
    }
  }

  /** Why deliveries to this IP address are refused, or undefined when they may go. */
  refusal(address: string): string | undefined {
    const { address: judged, family } = normalize(address);
    if (this.allowed.check(judged, family)) return undefined;
    if (refused.check(judged, family))
      return `${address} is a private, loopback, link-local or reserved address (allow it with WEBHOOK_ALLOWED_CIDRS)`;
    return undefined;
  }

  /**
   * A `lookup` for net/http that resolves as usual and refuses the connection when an address it
   * would use is refused: judged at connect time, on what DNS answered then (no window between a
   * check and the connection for a name to change its answer).
   */
  guardedLookup(): net.LookupFunction {
    return (hostname, options, callback) => {
      dns.lookup(hostname, { ...options, all: true }, (err, addresses) => {
        if (err) return (callback as (e: Error | null, a: string, f?: number) => void)(err, '', 0);
        const list = addresses as dns.LookupAddress[];
        const problem = list.map((a) => this.refusal(a.address)).find((p) => p !== undefined);
        const fail = (e: Error) => (callback as (e: Error | null, a: string, f?: number) => void)(e, '', 0);
        if (problem !== undefined) return fail(new RefusedAddress(`${hostname} resolves to ${problem}`));
        if (list.length === 0) return fail(new RefusedAddress(`${hostname} does not resolve`));
        if ((options as dns.LookupOptions).all === true) return (callback as (e: null, a: dns.LookupAddress[]) => void)(null, list);
        (callback as (e: null, a: string, f: number) => void)(null, list[0]!.address, list[0]!.family);
      });
    };
  }

  /** Resolves a host name (or takes a literal address) and says why it is refused, or undefined (API-side check at create). */
  async hostRefusal(hostname: string): Promise<string | undefined> {
    const bare = hostname.startsWith('[') ? hostname.slice(1, -1) : hostname;
    if (net.isIP(bare) !== 0) return this.refusal(bare);
    let list: dns.LookupAddress[];
    try {
      list = await dns.promises.lookup(bare, { all: true });
    } catch {
      return `${hostname} does not resolve`;
    }
    const problem = list.map((a) => this.refusal(a.address)).find((p) => p !== undefined);
    return problem === undefined ? undefined : `${hostname} resolves to ${problem}`;
  }
}

/** A delivery refused before any byte was sent: the receiver's address is not allowed. */
export class RefusedAddress extends Error {}
