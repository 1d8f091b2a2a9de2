import { shardCommand } from './commands.js';

/** Who starts writing a shard, under which lease revision (docs/cluster.md, "Ownership by lease"). */
export interface OwnerArgs {
  node: string;
  epoch: number;
}

/**
 * The first entry a new owner appends to the shard's journal: it changes no table, but appended
 * with the expected last subject sequence it is what fences the previous owner (whose next append
 * then expects an entry that is no longer the last), and the journal keeps who wrote each stretch
 * of it under which lease revision. A replay applies it as the no-op it is.
 */
export const ownerCommand = shardCommand<OwnerArgs, undefined>('shard.owner', () => undefined, 'scans');
