// Bundles the console (console/src, browser TypeScript) into dist/console: app.js, app.css, index.html.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const here = path.dirname(fileURLToPath(import.meta.url));
const out = path.join(here, '..', 'dist', 'console');
fs.mkdirSync(out, { recursive: true });
await build({
  entryPoints: [path.join(here, 'src', 'main.ts')],
  bundle: true,
  format: 'esm',
  target: 'es2022',
  minify: true,
  sourcemap: false,
  legalComments: 'none',
  outfile: path.join(out, 'app.js'),
  logLevel: 'warning',
});
for (const file of ['index.html', 'app.css']) fs.copyFileSync(path.join(here, file), path.join(out, file));
