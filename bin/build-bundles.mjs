// Bundles each thread's entry (and the CLI's) as tsc compiled it into one file beside it, `<name>.bundle.js`
// (src/runtime/threadFile.ts says why); source maps chain back to src/ for stack traces and coverage.
import { build } from 'esbuild';

const ENTRIES = [
  'http/worker.js',
  'shards/worker.js',
  'shards/snapshotWorker.js',
  'events/relayWorker.js',
  'storage/checkpointWorker.js',
  'cli/main.js',
];
// Native addons stay outside the bundle, and so do the drivers of the databases knex could talk to but trackd never does.
const EXTERNAL = ['better-sqlite3', 'uWebSockets.js', 'pg', 'pg-query-stream', 'mysql', 'mysql2', 'oracledb', 'tedious', 'sqlite3'];

const dist = new URL('../dist/src/', import.meta.url);
await Promise.all(
  ENTRIES.map((entry) =>
    build({
      entryPoints: [new URL(entry, dist).pathname],
      outfile: new URL(entry.replace(/\.js$/, '.bundle.js'), dist).pathname,
      bundle: true,
      platform: 'node',
      format: 'esm',
      target: 'node20',
      sourcemap: 'linked',
      external: EXTERNAL,
      // CommonJS packages inside an ES module bundle call require: give them Node's.
      banner: {
        js: "import { createRequire as createRequireOfBundle } from 'node:module'; const require = createRequireOfBundle(import.meta.url);",
      },
      logLevel: 'warning',
    }),
  ),
);
