import type { MessagePort } from 'node:worker_threads';
import { ApiError, type ErrorType, type FieldError } from '../errors/catalog.js';
import { DomainError, unavailable, type DomainErrorKind } from '../errors/domain.js';
import { systemClock, type Clock } from '../clock.js';
import type { ShardCommand } from './commands.js';
import type { ShardWriter } from './writer.js';

/** One command on its way to a shard actor: plain data, so that it can cross a thread (and later a network). */
export interface CommandMessage {
  id: number;
  name: string;
  args: unknown;
  /** The sender's clock reading: the command's "now" (timestamps it writes, rules it judges). */
  now: number;
  /** Epoch ms after which the actor refuses to start the command (503, nothing changed). */
  deadline?: number;
}

export type CommandAnswer = { id: number; value: unknown; error?: undefined } | { id: number; error: EncodedError };

type EncodedError =
  | { domain: { kind: DomainErrorKind; detail: string; fields?: FieldError[]; retryAfterSeconds?: number } }
  | { api: { type: ErrorType; detail: string; fields?: FieldError[]; headers?: Record<string, string> } }
  | { message: string; name: string; code?: string; stack?: string };

export function encodeError(err: unknown): EncodedError {
  if (err instanceof DomainError)
    return { domain: { kind: err.kind, detail: err.detail, fields: err.fields, retryAfterSeconds: err.retryAfterSeconds } };
  if (err instanceof ApiError) return { api: { type: err.type, detail: err.detail, fields: err.fields, headers: err.headers } };
  const e = err as { message?: unknown; name?: unknown; code?: unknown; stack?: unknown } | null;
  return {
    message: String(e?.message ?? err),
    name: typeof e?.name === 'string' ? e.name : 'Error',
    code: typeof e?.code === 'string' ? e.code : undefined,
    stack: typeof e?.stack === 'string' ? e.stack : undefined,
  };
}

/** The error a command threw in the actor, rebuilt on the caller's side (domain errors and ApiErrors keep their kind; storage errors keep their code). */
export function decodeError(encoded: EncodedError): Error {
  if ('domain' in encoded)
    return new DomainError(encoded.domain.kind, encoded.domain.detail, encoded.domain.fields, encoded.domain.retryAfterSeconds);
  if ('api' in encoded)
    return new ApiError(encoded.api.type, encoded.api.detail, { fields: encoded.api.fields, headers: encoded.api.headers });
  const err = new Error(encoded.message) as Error & { code?: string };
  err.name = encoded.name;
  if (encoded.code !== undefined) err.code = encoded.code;
  if (encoded.stack !== undefined) err.stack = encoded.stack;
  return err;
}

function commandMessage<A>(
  id: number,
  command: ShardCommand<A, unknown>,
  args: unknown,
  clock: Clock,
  options: SendOptions,
): CommandMessage {
  const sent = clock.now();
  const deadline = options.deadlineMs === undefined ? undefined : sent + options.deadlineMs;
  return { id, name: command.name, args, now: options.now ?? sent, deadline };
}

export interface SendOptions {
  /** Refuse the command (503, nothing changed) when it waited longer than this in the mailbox. */
  deadlineMs?: number;
  /** The command's "now" when it is not the sender's clock (a scan batch: its messages' stream time). */
  now?: number;
}

/** How callers reach a shard actor; commands keep their order per mailbox and are answered after their commit. */
export interface Mailbox {
  send<A, R>(command: ShardCommand<A, R>, args: A, options?: SendOptions): Promise<R>;
  close(): Promise<void>;
}

interface Waiting {
  resolve(value: unknown): void;
  reject(err: Error): void;
}

/** A mailbox over a MessagePort to the actor's thread. */
export class PortMailbox implements Mailbox {
  private readonly waiting = new Map<number, Waiting>();
  private nextId = 1;
  /** Why commands are refused now that the port is closed (this side, or the actor's: closed, or moved to another node). */
  private closed: { detail: string; retryAfterSeconds?: number } | undefined;

  constructor(
    private readonly port: MessagePort,
    private readonly clock: Clock = systemClock,
    /** Called once when the actor's side closes the port (the actor stopped: its shard left this node). */
    onClosed?: () => void,
  ) {
    // The actor sends the answers of one turn together (shards/worker.ts): one, or an array.
    port.on('message', (answers: CommandAnswer | CommandAnswer[]) => {
      if (Array.isArray(answers)) for (const answer of answers) this.settle(answer);
      else this.settle(answers);
    });
    port.on('close', () => {
      if (this.closed !== undefined) return;
      this.refuseAll('The shard is not served by this node now; nothing was changed', 1);
      onClosed?.();
    });
    port.unref();
  }

  private settle(answer: CommandAnswer): void {
    const w = this.waiting.get(answer.id);
    if (w === undefined) return;
    this.waiting.delete(answer.id);
    if (answer.error !== undefined) w.reject(decodeError(answer.error));
    else w.resolve(answer.value);
  }

  send<A, R>(command: ShardCommand<A, R>, args: A, options: SendOptions = {}): Promise<R> {
    if (this.closed !== undefined) return Promise.reject(unavailable(this.closed.detail, this.closed.retryAfterSeconds));
    const message = commandMessage(
      this.nextId++,
      command,
      command.wire === undefined ? args : command.wire.pack(args),
      this.clock,
      options,
    );
    return new Promise<R>((resolve, reject) => {
      this.waiting.set(message.id, { resolve: resolve as (value: unknown) => void, reject });
      this.port.postMessage(message);
    });
  }

  private refuseAll(detail: string, retryAfterSeconds?: number): void {
    this.closed = { detail, retryAfterSeconds };
    for (const w of this.waiting.values()) w.reject(unavailable(detail, retryAfterSeconds));
    this.waiting.clear();
  }

  async close(): Promise<void> {
    if (this.closed === undefined) this.refuseAll('The shard is shutting down');
    this.port.close();
  }
}

/**
 * A mailbox whose actor runs on the caller's thread (tools and in-process benchmarks): the same
 * messages and answers, cloned as a port would, one command at a time in arrival order.
 */
export class LocalMailbox implements Mailbox {
  private tail: Promise<unknown> = Promise.resolve();
  private nextId = 1;

  constructor(
    readonly writer: ShardWriter,
    private readonly clock: Clock = systemClock,
  ) {}

  send<A, R>(command: ShardCommand<A, R>, args: A, options: SendOptions = {}): Promise<R> {
    const message = commandMessage(this.nextId++, command, structuredClone(args), this.clock, options);
    const run = this.tail.then(() => {
      const answer = this.writer.execute(message);
      if (answer.error !== undefined) throw decodeError(answer.error);
      return answer.value as R;
    });
    this.tail = run.catch(() => undefined);
    return run;
  }

  async close(): Promise<void> {
    await this.tail;
    this.writer.close();
  }
}
