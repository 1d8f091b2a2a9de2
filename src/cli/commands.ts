import { parseArgs } from 'node:util';
import type { Config } from '../config.js';
import { readersReplay } from '../readers/replayCommand.js';
import { scansPublish } from '../scans/publishCommand.js';
import { CliError, type Command } from './common.js';
import { usersCreate } from './users.js';
import { keysCreate, keysList, keysRevoke, orgsCreate, orgsList, sessionsCreate } from './orgsAndKeys.js';

/** `trackd <group> <verb>` commands; each prints one JSON document. */
export const COMMANDS: Record<string, Command> = {
  'orgs create': orgsCreate,
  'orgs list': orgsList,
  'keys create': keysCreate,
  'keys list': keysList,
  'keys revoke': keysRevoke,
  'sessions create': sessionsCreate,
  'users create': usersCreate,
  'scans publish': scansPublish,
  'readers replay': readersReplay,
};

/** Runs `trackd <group> <verb> [flags]` (not `serve`) and returns what it prints; bad usage throws a CliError. */
export async function runCommand(argv: string[], config: () => Config): Promise<unknown> {
  const command = COMMANDS[`${argv[0] ?? ''} ${argv[1] ?? ''}`];
  if (command === undefined) throw new CliError(`unknown command "${argv.slice(0, 2).join(' ')}"`);
  let parsed: ReturnType<typeof parseArgs>;
  try {
    parsed = parseArgs({ args: argv.slice(2), options: command.options, allowPositionals: true, strict: true });
  } catch (err) {
    throw new CliError((err as Error).message);
  }
  // The configuration is read after the arguments: a usage error is reported before a configuration one.
  return command.run({ config: config(), flags: parsed.values, positionals: parsed.positionals });
}
