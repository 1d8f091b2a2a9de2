/**
 * `npm run bench`: starts trackd as an operator would (built, production settings, its own
 * nats-server and DATA_DIR), seeds a dataset, runs every scenario with the load generator in its own
 * process, measures the ceilings and the fastify baseline in the same run, and writes
 * bench/results/latest.json plus a table on stdout. Every figure is read as a ratio to a ceiling.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseOptions } from './lib/args.js';
import { runBench } from './lib/runner.js';

const options = parseOptions(process.argv.slice(2));
// --reuse: the kept work directory of an earlier run, measured again and kept.
const workDir = options.reuse ?? fs.mkdtempSync(path.join(os.tmpdir(), 'tdbench-'));
try {
  await runBench(options, workDir);
} catch (err) {
  process.stderr.write(`bench failed: ${(err as Error).stack ?? String(err)}\n`);
  process.exitCode = 1;
} finally {
  if (options.keep || options.reuse) process.stderr.write(`[bench] kept ${workDir}\n`);
  else fs.rmSync(workDir, { recursive: true, force: true });
}
