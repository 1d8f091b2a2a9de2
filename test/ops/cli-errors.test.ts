import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import t from 'tap';
import { runCommand } from '../../src/cli/commands.js';
import { loadConfig } from '../../src/config.js';
import { BIN, tempDir } from '../helpers/trackd.js';

t.test('trackd CLI failures: one line on stderr, nothing on stdout, non-zero exit', async (t) => {
  const dataDir = tempDir();
  t.teardown(() => fs.rmSync(dataDir, { recursive: true, force: true }));
  const run = (args: string[], env: Record<string, string> = {}) => {
    const r = spawnSync(process.execPath, [BIN, ...args], { env: { ...process.env, DATA_DIR: dataDir, ...env }, encoding: 'utf8' });
    return { status: r.status, stdout: r.stdout, stderr: r.stderr };
  };
  const ok = (args: string[]) => {
    const r = run(args);
    t.equal(r.status, 0, `trackd ${args.join(' ')}: exit 0`);
    return JSON.parse(r.stdout);
  };
  const org = ok(['orgs', 'create', '--name', 'Errors Inc']);
  const o = String(org.id);
  const cases: [string[], RegExp][] = [
    [['keys', 'create', '--org', o, '--name', 'k', '--scopes', 'keys:admin'], /keys:admin/],
    [['keys', 'create', '--org', o, '--name', 'k', '--scopes', 'assets:read,keys:admin'], /keys:admin/],
    [['keys', 'create', '--org', o, '--name', 'k', '--scopes', 'assets:delete'], /unknown scope "assets:delete"/],
    [['keys', 'create', '--org', o, '--name', 'k'], /--scopes is required/],
    [['keys', 'create', '--org', '999', '--name', 'k', '--scopes', 'assets:read'], /organization 999 does not exist/],
    [['keys', 'create', '--org', 'abc', '--name', 'k', '--scopes', 'assets:read'], /--org must be a positive integer/],
    [['keys', 'create', '--org', o, '--name', 'k', '--scopes', 'assets:read', '--expires-in', 'soon'], /--expires-in/],
    [
      ['keys', 'create', '--org', o, '--name', 'k', '--scopes', 'assets:read', '--expires-at', '2030-01-01'],
      /--expires-at must be an RFC 3339 timestamp/,
    ],
    [
      [
        'keys',
        'create',
        '--org',
        o,
        '--name',
        'k',
        '--scopes',
        'assets:read',
        '--expires-in',
        '1d',
        '--expires-at',
        '2031-01-01T00:00:00Z',
      ],
      /not both/,
    ],
    [
      ['keys', 'create', '--org', o, '--name', 'k', '--scopes', 'assets:read', '--expires-at', '2020-01-01T00:00:00Z'],
      /--expires-at must be in the future/,
    ],
    [['keys', 'create', '--org', o, '--name', 'k', '--scopes', 'assets:read', '--env', 'staging'], /--env must be preview or production/],
    [['keys', 'create', '--org', o, '--name', 'k', '--scopes', 'assets:read', '--colour', 'red'], /colour/],
    [['keys', 'list'], /--org is required/],
    [['keys', 'revoke'], /usage: trackd keys revoke API_KEY_ID/],
    [['keys', 'revoke', '00000000-0000-0000-0000-000000000000'], /does not exist/],
    [['orgs', 'create'], /--name is required/],
    [['orgs', 'create', '--name', 'x'.repeat(256)], /at most 255/],
    [['sessions', 'create', '--org', o], /--user is required/],
    [['keys', 'create', '--org', o, '--name', 'k', '--scopes', 'assets:read'], /TRACKD_ENV: must be one of preview, production/],
  ];
  // Every message, in process: the same argument parsing, configuration and commands as the binary.
  for (const [i, [args, message]] of cases.entries()) {
    const env = { ...process.env, DATA_DIR: dataDir, ...(i === cases.length - 1 ? { TRACKD_ENV: 'staging' } : {}) };
    const label = `trackd ${args.join(' ')}`.slice(0, 120);
    await t.rejects(
      runCommand(args, () => loadConfig(env)),
      { message },
      `${label}: says what is wrong`,
    );
  }
  // The wire of a failure, once per way to fail (bad usage, unknown command, a command's own error, a
  // configuration error): exit 1, nothing on stdout, exactly one line on stderr, however long the text.
  const wire: [string[], Record<string, string>, RegExp][] = [
    [[], {}, /^trackd: usage: trackd /],
    [['orgs', 'delete'], {}, /^trackd: unknown command "orgs delete" usage: trackd /],
    [['keys', 'create', '--org', '999', '--name', 'k', '--scopes', 'assets:read'], {}, /^trackd: organization 999 does not exist/],
    [
      ['keys', 'create', '--org', o, '--name', 'k', '--scopes', 'assets:read'],
      { TRACKD_ENV: 'staging' },
      /TRACKD_ENV: must be one of preview, production/,
    ],
  ];
  for (const [args, env, stderr] of wire) {
    const r = run(args, env);
    const label = `trackd ${args.join(' ')}`.slice(0, 120);
    t.equal(r.status, 1, `${label}: exit 1`);
    t.equal(r.stdout, '', `${label}: nothing on stdout`);
    t.equal(r.stderr.split('\n').filter(Boolean).length, 1, `${label}: one line on stderr`);
    t.ok(r.stderr.endsWith('\n'), `${label}: the line ends`);
    t.match(r.stderr, stderr, `${label}: says what is wrong`);
  }
  t.same(ok(['keys', 'list', '--org', o]), [], 'no key was created by the failures');
});
