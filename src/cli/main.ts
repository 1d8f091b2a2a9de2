import { ConfigError, loadConfig } from '../config.js';
import { commandOf, runCommand } from './commands.js';
import { CliError } from './common.js';

const USAGE = `usage: trackd <command>
  serve
  orgs create --name NAME | orgs list
  keys create --org ID --name NAME --scopes S1,S2 [--expires-in 30d|--expires-at RFC3339] [--env preview|production]
  keys list --org ID | keys revoke API_KEY_ID
  sessions create --org ID --user NAME
  users create --org ID [--org ID ...] --email EMAIL   (password: prompt, or the first line of stdin)
  scans publish --org ID --location KEY --tag TYPE:VALUE [--tag ...] [--observed-at RFC3339] [--source fixed|handheld]
  readers replay FILE --org ID [--rate N]
  import FILE --org ID --kind assets|locations [--mode create|upsert] [--dry-run] [--atomic] [--format csv|ndjson]
  export --org ID --kind assets|locations|report --out FILE [--format ndjson|csv]`;

function fail(message: string): never {
  process.stderr.write(`trackd: ${message.replace(/\s*\n\s*/g, ' ')}\n`);
  process.exit(1);
}

async function runServe(): Promise<void> {
  const config = loadConfig();
  // Loaded here so that the other commands do not pay for the server's modules (uWS, NATS, ajv).
  const { serve } = await import('../serve.js');
  const service = await serve(config);
  let signals = 0;
  const onSignal = () => {
    if (signals++ > 0) return;
    const hardStop = setTimeout(() => process.exit(1), 10_000);
    hardStop.unref();
    service.stop().then(
      () => process.exit(0),
      (err: unknown) => fail(`shutdown failed: ${(err as Error).message}`),
    );
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
}

async function main(argv: string[]): Promise<void> {
  if (argv[0] === 'serve') return runServe();
  if (commandOf(argv) === undefined) {
    fail(argv.length === 0 ? USAGE : `unknown command "${argv.slice(0, 2).join(' ')}"\n${USAGE}`);
  }
  const result = await runCommand(argv, () => loadConfig());
  process.stdout.write(`${JSON.stringify(result)}\n`);
}

main(process.argv.slice(2)).catch((err: unknown) => {
  if (err instanceof CliError || err instanceof ConfigError) fail(err.message);
  fail(err instanceof Error ? err.message : String(err));
});
