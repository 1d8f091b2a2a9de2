import path from 'node:path';
import { parseArgs } from 'node:util';
import { ROOT } from './processes.js';
import type { BenchOptions } from './scenario.js';

const USAGE = `usage: npm run bench -- [--size tiny|small|large] [--only s1,s2] [--runs N] [--duration S] [--warmup S] [--connections N] [--out FILE] [--keep] [--reuse DIR] [--profile] [--stages] [--generator auto|autocannon] [--compare s1,s2] [--bulk-rows N] [--field-rate READS_PER_S] [--field-seconds S]`;

export function parseOptions(argv: string[]): BenchOptions {
  const { values } = parseArgs({
    args: argv,
    options: {
      size: { type: 'string', default: 'small' },
      only: { type: 'string', multiple: true },
      compare: { type: 'string', multiple: true },
      runs: { type: 'string', default: '3' },
      duration: { type: 'string', default: '5' },
      warmup: { type: 'string' },
      connections: { type: 'string', default: '64' },
      keys: { type: 'string', default: '8' },
      out: { type: 'string' },
      keep: { type: 'boolean' },
      reuse: { type: 'string' },
      profile: { type: 'boolean' },
      stages: { type: 'boolean' },
      generator: { type: 'string', default: 'auto' },
      'bulk-rows': { type: 'string' },
      'field-rate': { type: 'string' },
      'field-seconds': { type: 'string' },
      help: { type: 'boolean' },
    },
    strict: true,
  });
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    process.exit(0);
  }
  const size = values.size as string;
  if (size !== 'tiny' && size !== 'small' && size !== 'large') throw new Error(`--size must be tiny, small or large\n${USAGE}`);
  const positive = (name: string, text: string | undefined, allowZero = false): number => {
    const n = Number(text);
    if (!Number.isFinite(n) || n < 0 || (!allowZero && n === 0)) throw new Error(`--${name} must be a positive number\n${USAGE}`);
    return n;
  };
  const duration = positive('duration', values.duration);
  return {
    size,
    only: values.only?.flatMap((s) => s.split(',')).filter(Boolean),
    compare: values.compare?.flatMap((s) => s.split(',')).filter(Boolean),
    runs: Math.floor(positive('runs', values.runs)),
    durationSeconds: duration,
    warmupSeconds: values.warmup === undefined ? Math.min(2, Math.max(1, duration / 4)) : positive('warmup', values.warmup, true),
    connections: Math.floor(positive('connections', values.connections)),
    keys: Math.floor(positive('keys', values.keys)),
    bulkRows: values['bulk-rows'] === undefined ? undefined : Math.floor(positive('bulk-rows', values['bulk-rows'])),
    fieldRate: values['field-rate'] === undefined ? undefined : Math.floor(positive('field-rate', values['field-rate'])),
    fieldSeconds: values['field-seconds'] === undefined ? undefined : positive('field-seconds', values['field-seconds']),
    keep: values.keep ?? false,
    reuse: values.reuse === undefined ? undefined : path.resolve(values.reuse),
    profile: values.profile ?? false,
    stages: values.stages ?? false,
    generator: values.generator === 'autocannon' ? 'autocannon' : 'auto',
    out: path.resolve(values.out ?? path.join(ROOT, 'bench', 'results', 'latest.json')),
  };
}

/** The spec file a bench child process is started with (its one argument). */
export function specArg(): string {
  const file = process.argv[2];
  if (file === undefined) throw new Error(`usage: node ${process.argv[1]} SPEC_FILE`);
  return file;
}
