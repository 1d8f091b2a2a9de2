import { shardCommand } from '../shards/commands.js';
import type { Shard } from '../shards/shard.js';
import { eventLogOf } from './log.js';

/**
 * Retention of the event log as a recorded command: its horizon and the relay's position travel as
 * arguments, so a replay prunes exactly what the original pruned.
 */
export const pruneCommand = shardCommand(
  'events.prune',
  (shard, { before, throughPos }: { before: number; throughPos: number }): number => eventLogOf(shard).prune(before, throughPos),
  'scans',
);

export function pruneEvents(shard: Shard, before: number, throughPos: number): Promise<number> {
  return shard.send(pruneCommand, { before, throughPos }, {});
}
