import { Accounts, normalizeEmail } from '../console/accounts.js';
import { hashPassword, PASSWORD_MIN_LENGTH } from '../console/passwords.js';
import { CliError, requireFlag, type Command } from './common.js';
import { requireOrg, withControl } from './orgsAndKeys.js';

const EMAIL = /^[^\s@]+@[^\s@]+$/;

/**
 * The password: typed at a prompt without echo when stdin is a terminal, else the first line of
 * stdin (`printf '%s\n' "$PW" | trackd users create …`). Never a flag: it would sit in the shell history.
 */
async function readPassword(): Promise<string> {
  const stdin = process.stdin;
  if (!stdin.isTTY) {
    const chunks: Buffer[] = [];
    for await (const chunk of stdin) chunks.push(chunk as Buffer);
    return (Buffer.concat(chunks).toString('utf8').split(/\r?\n/)[0] ?? '').trimEnd();
  }
  // Echo goes off before the prompt shows: nothing typed after the prompt can be echoed.
  stdin.setRawMode(true);
  process.stderr.write('password: ');
  stdin.resume();
  stdin.setEncoding('utf8');
  let typed = '';
  try {
    for await (const chunk of stdin) {
      for (const ch of chunk as string) {
        if (ch === '\r' || ch === '\n') return typed;
        if (ch === '\u0003') throw new CliError('cancelled');
        if (ch === '\u007f') typed = typed.slice(0, -1);
        else typed += ch;
      }
    }
    return typed;
  } finally {
    stdin.setRawMode(false);
    stdin.pause();
    process.stderr.write('\n');
  }
}

function orgIds(value: unknown): number[] {
  const list = (Array.isArray(value) ? value : [value]).filter((v): v is string => typeof v === 'string');
  if (list.length === 0) throw new CliError('--org is required (repeat it for a user of several organizations)');
  return [
    ...new Set(
      list.map((text) => {
        if (!/^\d+$/.test(text) || Number(text) < 1) throw new CliError(`--org must be a positive integer, got ${JSON.stringify(text)}`);
        return Number(text);
      }),
    ),
  ];
}

/** `trackd users create --org ID [--org ID …] --email EMAIL`: a console user; an existing one gains the organizations. */
export const usersCreate: Command = {
  options: { org: { type: 'string', multiple: true }, email: { type: 'string' } },
  run: (ctx) =>
    withControl(ctx, async (control) => {
      const orgs = orgIds(ctx.flags.org);
      const email = normalizeEmail(requireFlag(ctx.flags, 'email'));
      if (!EMAIL.test(email) || email.length > 254) throw new CliError(`--email must be an email address, got ${JSON.stringify(email)}`);
      for (const org of orgs) requireOrg(control, org);
      const accounts = new Accounts(control);
      const existing = accounts.findUser(email);
      if (existing !== undefined) return { id: existing.id, email, orgs: await accounts.addOrgs(existing.id, orgs), created: false };
      const password = await readPassword();
      if (password.length < PASSWORD_MIN_LENGTH) throw new CliError(`the password must be at least ${PASSWORD_MIN_LENGTH} characters`);
      const user = await accounts.createUser(email, await hashPassword(password), orgs);
      return { ...user, created: true };
    }),
};
