import path from 'node:path';
import { shardMigrations } from '../../migrations/shard/index.js';
import { unavailable } from '../errors/domain.js';
import { systemClock } from '../clock.js';
import type { AssetPlacement } from '../locations/placement.js';
import { checkpointInBackground } from '../storage/checkpointer.js';
import { migrate, openDatabase, StatementCache, type Db } from '../storage/sqlite.js';
import { DEFAULT_WRITER_CACHE_MB } from '../config.js';
import { commandNamed } from './commands.js';
import { deferredRolledBack, deferWrites, writeDeferred } from './deferred.js';
import type { ShardGenerations, WriteEffects } from './generations.js';
import { JOURNAL_STREAM } from './journalEntry.js';
import { encodeError, type CommandAnswer, type CommandMessage } from './mailbox.js';
import type { DrawnIds, IdEntity, RecordSink, ShardRecord } from './records.js';

export type { IdEntity } from './records.js';

/** A command run but not yet published: its answer, and (when it committed a change) its record and effects. */
export interface Staged {
  answer: CommandAnswer;
  record?: ShardRecord;
  effects?: WriteEffects;
}

/** Where new ids come from: blocks reserved in the control plane (ControlPlane), or a replay's records. */
export interface IdSource {
  reserveIds(entity: IdEntity): { start: number; end: number };
}

/** What a shard's commands ask of other features, handed to the actor by whoever builds it. */
export interface WriterPorts {
  placement: AssetPlacement;
}

/** better-sqlite3's own savepoint (lib/methods/transaction.js), so that both kinds of nesting read alike. */
const SAVEPOINT = 'SAVEPOINT `\t_bs3.\t`';
const RELEASE = 'RELEASE `\t_bs3.\t`';
const ROLLBACK_TO = 'ROLLBACK TO `\t_bs3.\t`';

export const shardFile = (dataDir: string, index: number) => path.join(dataDir, 'shards', `shard-${index}.sqlite`);

/**
 * The state of a shard actor, owned by the thread that runs it: the only writer connection of the
 * shard's SQLite file, the id blocks it draws from, and the writer-side state of features (prepared
 * statements, in-memory positions). It runs one command at a time, to completion (SQLite calls are
 * synchronous), and answers only after the commit and after bumping the generations that the caches
 * of reads on every thread compare against.
 */
export class ShardWriter {
  private readonly ids = new Map<IdEntity, { next: number; end: number }>();
  /** The running command's time (its message's `now`): commands read the clock only through this. */
  now = 0;
  /** A command appended events (events/log.ts) since the last publish: the next one wakes the event streams. */
  eventsAppended = false;
  private readonly afterCommand: (() => void)[] = [];
  /** The writer's own statements (rounds, the journal position), prepared once. */
  private readonly statements: StatementCache;
  /** Where committed commands are recorded; undefined (the default) costs nothing per command. */
  private sink: RecordSink | undefined;
  /** The ids the running command drew, per entity in order (only while a sink listens). */
  private drawn: DrawnIds | undefined;
  /** During a replay: the ids the recorded command drew, handed out again in the same order. */
  private given: DrawnIds | undefined;

  private constructor(
    readonly index: number,
    readonly writer: Db,
    private readonly idSource: IdSource,
    readonly generations: ShardGenerations,
    readonly ports: WriterPorts,
    private readonly stopCheckpoints: () => void,
    /** Its connection's page cache (SHARD_CACHE_MB), which a bulk job may raise for a while and gives back. */
    readonly cacheMb: number,
  ) {
    this.statements = new StatementCache(writer);
  }

  static async open(
    dataDir: string,
    index: number,
    idSource: IdSource,
    generations: ShardGenerations,
    ports: WriterPorts,
    file = shardFile(dataDir, index),
    cacheMb = DEFAULT_WRITER_CACHE_MB,
  ): Promise<ShardWriter> {
    await migrate(file, shardMigrations);
    const writer = openDatabase(file);
    writer.pragma(`cache_size = ${-cacheMb * 1024}`);
    // Planner statistics for tables never (or long ago) analyzed. Without them SQLite walks the
    // location tree through the (org_id, external_key) index, a full scan per step (bench: 6 req/s).
    writer.pragma('optimize=0x10002');
    return new ShardWriter(index, writer, idSource, generations, ports, checkpointInBackground(file, writer), cacheMb);
  }

  /**
   * Runs one mailbox message to its answer in a transaction of its own (or one statement). Never
   * throws: a failure is the answer.
   */
  execute(message: CommandMessage): CommandAnswer {
    const staged = this.stage(message);
    this.publish(staged);
    return staged.answer;
  }

  /**
   * Runs one mailbox message. Inside an open round (`begin`) it runs in a savepoint, so that its
   * failure undoes it alone, and `check` may still refuse its record there; its effects are not
   * published (`publish`) until the round commits. Never throws: a failure is the answer.
   */
  stage(message: CommandMessage, check?: (record: ShardRecord) => void): Staged {
    const inRound = this.writer.inTransaction;
    try {
      // The deadline is the actor's own wall clock against the sender's: how long the message waited.
      if (message.deadline !== undefined && systemClock.now() > message.deadline) {
        throw unavailable('The write waited too long behind other work of its shard; nothing was changed; retry later', 1);
      }
      const command = commandNamed(message.name);
      if (command === undefined) throw new Error(`unknown shard command ${message.name}`);
      this.now = message.now;
      const recording = command.recorded && (inRound || this.sink !== undefined);
      if (recording) this.drawn = {};
      let record: ShardRecord | undefined;
      const run = () => {
        const result = command.run(this, message.args);
        if (recording) {
          record = { name: message.name, now: message.now, args: message.args, ids: this.drawn! };
          check?.(record);
        }
        return result;
      };
      // A recorded command runs in a transaction (a savepoint in a round) even when its own SQL is one
      // statement: the events it appends (events/log.ts) commit with it or not at all. One that owns
      // its transaction keeps it outermost outside a round (its memory follows that commit).
      // A command alone does not defer (deferred.ts): its text index terms make one segment either way.
      const value = inRound || (command.recorded && !command.ownsTransaction) ? this.transaction(run) : run();
      this.eventsVisible();
      return { answer: { id: message.id, value }, record, effects: command.effects(message.args, value) };
    } catch (err) {
      // A failed command changed nothing: each runs in one transaction or one statement (a savepoint in a round).
      return { answer: { id: message.id, error: encodeError(err) } };
    } finally {
      this.drawn = undefined;
      for (const settle of this.afterCommand) settle();
    }
  }

  /** After a command's commit: its record to the sink, its effects to the caches of reads. */
  publish(staged: Staged): void {
    if (staged.record !== undefined) this.sink?.(staged.record);
    if (staged.effects !== undefined) this.generations.bump(staged.effects);
    this.eventsVisible();
  }

  /**
   * After a commit: wakes the event streams when the committed change appended events (inside an
   * open transaction or round nothing is committed yet; the round's publish calls it again). Called
   * as soon as the rows are visible, before the work that follows a commit (a scan batch's report
   * index), so that a stream does not wait for it.
   */
  eventsVisible(): void {
    if (!this.eventsAppended || this.writer.inTransaction) return;
    this.eventsAppended = false;
    this.generations.eventsCommitted(Date.now());
  }

  /**
   * Runs `fn` in a transaction, or in a savepoint inside an open one: what better-sqlite3's
   * `db.transaction(fn)()` runs (the same statements, savepoint name and undo), without the wrapper
   * it builds on each call (four closures and their properties: 34 us of the shard thread's time a
   * write under create-patch, more than the SAVEPOINT itself; README, "Single node since the
   * cluster work"). Commands run on the writer call it instead of `writer.transaction`.
   */
  transaction<T>(fn: () => T): T {
    const nested = this.writer.inTransaction;
    const statements = this.statements;
    statements.get(nested ? SAVEPOINT : 'BEGIN').run();
    try {
      const result = fn();
      statements.get(nested ? RELEASE : 'COMMIT').run();
      return result;
    } catch (err) {
      if (this.writer.inTransaction) {
        statements.get(nested ? ROLLBACK_TO : 'ROLLBACK').run();
        if (nested) statements.get(RELEASE).run();
      }
      throw err;
    }
  }

  /** Opens a round: the commands staged until `commit` or `rollback` commit together or not at all. */
  begin(): void {
    this.statements.get('BEGIN IMMEDIATE').run();
    deferWrites(this);
  }

  commit(): void {
    writeDeferred(this);
    this.statements.get('COMMIT').run();
  }

  /**
   * A writer over the same connection with none of the writer-side state of features (statements,
   * the report index, caches), which after a round that did not commit may have followed it; its
   * record sink and id blocks carry over.
   */
  renewed(): ShardWriter {
    const fresh = new ShardWriter(this.index, this.writer, this.idSource, this.generations, this.ports, this.stopCheckpoints, this.cacheMb);
    fresh.sink = this.sink;
    for (const [entity, block] of this.ids) fresh.ids.set(entity, block);
    return fresh;
  }

  /** Undoes an open round (a no-op when SQLite already rolled it back itself, as it may on a full disk). */
  rollback(): void {
    if (this.writer.inTransaction) this.writer.exec('ROLLBACK');
    deferredRolledBack(this);
  }

  /** The journal position the shard's state includes: the journal incarnation and its last entry applied here. */
  journalPosition(): { created: string; seq: number } {
    const row = this.writer
      .prepare('SELECT stream_created AS created, applied_seq AS seq FROM scan_ingest_state WHERE stream = ?')
      .get(JOURNAL_STREAM) as { created: string; seq: number } | undefined;
    return row ?? { created: '', seq: 0 };
  }

  /** Records the journal position (inside the round or replay it belongs to). */
  setJournalPosition(created: string, seq: number): void {
    this.statements
      .get(
        `INSERT INTO scan_ingest_state (stream, stream_created, applied_seq) VALUES (?, ?, ?)
         ON CONFLICT (stream) DO UPDATE SET stream_created = excluded.stream_created, applied_seq = excluded.applied_seq`,
      )
      .run(JOURNAL_STREAM, created, seq);
  }

  /** Whether the shard holds no state at all (a file just created). */
  isEmpty(): boolean {
    return (
      this.writer
        .prepare(
          `SELECT EXISTS (SELECT 1 FROM assets) OR EXISTS (SELECT 1 FROM locations) OR EXISTS (SELECT 1 FROM tags)
                  OR EXISTS (SELECT 1 FROM scan_ingest_state) OR EXISTS (SELECT 1 FROM scan_history)`,
        )
        .pluck()
        .get() === 0
    );
  }

  /**
   * Hands every committed state change from now on to `sink`: one record per command that
   * committed (in commit order, before the command is answered), enough to apply it again
   * elsewhere (replay.ts). Read-only commands are not recorded. The sink runs after the commit, so
   * it must not fail; the journal, which must hold a record before its commit, is written by the
   * journaled actor (journaled.ts) from the records of its rounds instead.
   */
  recordTo(sink: RecordSink | undefined): void {
    this.sink = sink;
  }

  /**
   * Applies a recorded command again: its recorded now, args and ids, never the wall clock or the
   * id source. Throws when it fails or draws other ids than recorded (the replay has diverged).
   * Returns its effects on the caches of reads, for the caller to publish after its commit.
   */
  replay(record: ShardRecord): WriteEffects {
    const command = commandNamed(record.name);
    if (command === undefined) throw new Error(`unknown shard command ${record.name}`);
    this.given = Object.fromEntries(Object.entries(record.ids).map(([entity, ids]) => [entity, [...ids]]));
    try {
      this.now = record.now;
      const value = command.run(this, record.args);
      const left = Object.entries(this.given).filter(([, ids]) => ids.length > 0);
      if (left.length > 0) throw new Error(`replay of ${record.name}: recorded ids not drawn: ${JSON.stringify(Object.fromEntries(left))}`);
      return command.effects(record.args, value);
    } finally {
      this.given = undefined;
      for (const settle of this.afterCommand) settle();
    }
  }

  /** Runs `settle` after every command, committed or failed (writer-side state that follows committed rows). */
  afterEachCommand(settle: () => void): void {
    this.afterCommand.push(settle);
  }

  /** Next id for an entity type: from a block reserved in the id source, or (replaying) the recorded one. */
  nextId(entity: IdEntity): number {
    if (this.given !== undefined) {
      const id = this.given[entity]?.shift();
      if (id === undefined) throw new Error(`replay: the command draws more ${entity} ids than it recorded`);
      return id;
    }
    let block = this.ids.get(entity);
    if (block === undefined || block.next >= block.end) {
      const reserved = this.idSource.reserveIds(entity);
      block = { next: reserved.start, end: reserved.end };
      this.ids.set(entity, block);
    }
    const id = block.next++;
    if (this.drawn !== undefined) (this.drawn[entity] ??= []).push(id);
    return id;
  }

  close(): void {
    this.stopCheckpoints();
    // SQLite copies the WAL back at close only on the file's last connection, and the checkpoint
    // worker lets go of the file only when its message arrives: a clean stop left up to hundreds of
    // MB of WAL for the next start to read. Copy it back and truncate it here, waiting at most a
    // second for a reader still in a transaction (then the next start reads what is left).
    try {
      this.writer.pragma('busy_timeout = 1000');
      this.writer.pragma('wal_checkpoint(TRUNCATE)');
    } catch {
      // Closed file or I/O error: the close below reports what matters, and the WAL stays valid.
    }
    this.writer.close();
  }
}
