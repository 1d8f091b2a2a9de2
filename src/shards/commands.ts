import type { WriteEffects } from './generations.js';
import type { StreamInputs } from './journalEntry.js';
import type { ShardWriter } from './writer.js';

/**
 * How a command's arguments go into the shard's journal when they are not written in full: a scan
 * batch is written as references to the stream messages it came from, and read back from them.
 */
export interface JournalCodec<A> {
  encode(args: A): unknown;
  decode(encoded: unknown, inputs: StreamInputs): Promise<A>;
}

/**
 * A command of a shard actor: a name, a function run by the shard's writer with structured
 * arguments (cloned across the mailbox, never a closure), and what its commit changes for the caches
 * of reads, derived from the arguments in one place per command instead of at every call site.
 */
export interface ShardCommand<A, R> {
  readonly name: string;
  /** Whether a commit of it is a state change to record (records.ts); false for commands that only read. */
  readonly recorded: boolean;
  /** Its journal form; none: the arguments as they are. */
  readonly journal?: JournalCodec<A>;
  /**
   * It opens its own transaction and changes writer memory only after that transaction commits
   * (scans.apply): outside a round it must be the outermost transaction, or a COMMIT that fails
   * after its own would leave that memory ahead of the file.
   */
  readonly ownsTransaction: boolean;
  run(writer: ShardWriter, args: A): R;
  effects(args: A, result: R): WriteEffects;
  /**
   * Its arguments' form between threads (PortMailbox to the shard worker), when the structured
   * clone of the plain form costs the actor's thread much: packed by the sender, unpacked on
   * arrival, so the actor, its records and its journal see only the plain form.
   */
  readonly wire?: WireForm<A>;
}

export interface WireForm<A> {
  pack(args: A): unknown;
  unpack(wire: unknown): A;
}

const registry = new Map<string, ShardCommand<unknown, unknown>>();

/** Defines (and registers, by name) a command; the module defining it must be loaded by the shard worker (see commandIndex). */
export function shardCommand<A, R>(
  name: string,
  run: (writer: ShardWriter, args: A) => R,
  effects: WriteEffects | ((args: A, result: R) => WriteEffects),
  options: { readOnly?: boolean; journal?: JournalCodec<A>; ownsTransaction?: boolean; wire?: WireForm<A> } = {},
): ShardCommand<A, R> {
  if (registry.has(name)) throw new Error(`shard command ${name} defined twice`);
  const command: ShardCommand<A, R> = {
    name,
    recorded: options.readOnly !== true,
    journal: options.journal,
    ownsTransaction: options.ownsTransaction === true,
    wire: options.wire,
    run,
    effects: typeof effects === 'function' ? effects : () => effects,
  };
  registry.set(name, command as ShardCommand<unknown, unknown>);
  return command;
}

export function commandNamed(name: string): ShardCommand<unknown, unknown> | undefined {
  return registry.get(name);
}

/** A command message as it arrived over a port, its arguments in their plain form (see `wire`). */
export function arrived<M extends { name: string; args: unknown }>(message: M): M {
  const wire = registry.get(message.name)?.wire;
  if (wire !== undefined) message.args = wire.unpack(message.args);
  return message;
}
