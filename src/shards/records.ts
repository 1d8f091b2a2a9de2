import fs from 'node:fs';
import path from 'node:path';

export type IdEntity = 'asset' | 'location' | 'tag' | 'history' | 'webhook';

/** Ids a command drew, per entity, in the order it drew them. */
export type DrawnIds = Partial<Record<IdEntity, number[]>>;

/**
 * One committed state change of a shard, as plain data: enough to apply it again to the shard's
 * state before it and get the same state after (a pure function of the records, in order).
 *
 * - A master-data command: its name and arguments, its `now` (the sender's clock reading, which the
 *   command writes and judges against) and the ids it drew from the control plane.
 * - A scan batch (`scans.apply`): `args.items` is the ordered list of scans applied, each with its
 *   stream and sequence (the first scan of each message; 0 for the others of the same message) and
 *   its decoded content; `now` is the latest JetStream timestamp among the batch's messages (event
 *   ids are remembered from it, and those older than the retention horizon before it forgotten).
 *   SCANS and READERS batches interleave in the order of the records.
 * - `scans.bindStream`: a stream incarnation the applied sequence refers to from then on.
 *
 * Records come out in commit order, one writer per shard, so their order is the shard's order.
 */
export interface ShardRecord {
  name: string;
  now: number;
  args: unknown;
  ids: DrawnIds;
}

/** Where a shard writer hands its records, after each commit and before the command is answered. */
export type RecordSink = (record: ShardRecord) => void;

/** The file a shard's records go to as JSON lines (the records switch of serve, for tests and tools). */
export const recordFile = (dir: string, index: number) => path.join(dir, `shard-${index}.records.jsonl`);

/** A sink appending each record as one JSON line (synchronous: the line is written before the answer). */
export function jsonLinesSink(file: string): { write: RecordSink; close(): void } {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  const fd = fs.openSync(file, 'a');
  return {
    write: (record) => fs.writeSync(fd, `${JSON.stringify(record)}\n`),
    close: () => fs.closeSync(fd),
  };
}

/** Reads the records a jsonLinesSink wrote, in order. */
export function readRecords(file: string): ShardRecord[] {
  if (!fs.existsSync(file)) return [];
  return fs
    .readFileSync(file, 'utf8')
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as ShardRecord);
}
