import fs from 'node:fs';
import path from 'node:path';

/** The largest shard file of a data dir: the one a bench dataset loaded (the others hold little). */
export function largestShardFile(dataDir: string): string {
  const dir = path.join(dataDir, 'shards');
  return fs
    .readdirSync(dir)
    .filter((f) => f.endsWith('.sqlite'))
    .map((f) => path.join(dir, f))
    .sort((a, b) => fs.statSync(b).size - fs.statSync(a).size)[0]!;
}
