import { loadConfig, type Config } from '../config.js';

export class CliError extends Error {}

export type Flags = Record<string, string | boolean | (string | boolean)[] | undefined>;

export interface CommandContext {
  config: Config;
  flags: Flags;
  positionals: string[];
}

export interface Command {
  /** node:util parseArgs options for this command. */
  options: Record<string, { type: 'string' | 'boolean'; multiple?: boolean }>;
  run(ctx: CommandContext): Promise<unknown>;
}

export function requireFlag(flags: Flags, name: string): string {
  const v = flags[name];
  if (typeof v !== 'string' || v === '') throw new CliError(`--${name} is required`);
  return v;
}

export function intFlag(flags: Flags, name: string): number {
  const text = requireFlag(flags, name);
  if (!/^\d+$/.test(text) || Number(text) < 1) throw new CliError(`--${name} must be a positive integer, got ${JSON.stringify(text)}`);
  return Number(text);
}

export function configFromEnv(): Config {
  return loadConfig();
}
