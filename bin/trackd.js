#!/usr/bin/env node
import fs from 'node:fs';

// The CLI's bundle when `npm run build` wrote one (src/runtime/threadFile.ts says why), its modules otherwise.
const bundle = new URL('../dist/src/cli/main.bundle.js', import.meta.url);
await import(process.env.TRACKD_UNBUNDLED !== '1' && fs.existsSync(bundle) ? bundle.href : '../dist/src/cli/main.js');
