import fs from 'node:fs';

// This module and every bundle that inlines it sit one folder below dist/src, so '../' is dist/src in all of them.
const SRC = new URL('../', import.meta.url);

/**
 * The file a thread (or the CLI) runs, by its path under src/ as compiled (`http/worker.js`): the
 * bundle `npm run build` writes beside it (`http/worker.bundle.js`), whose one file loads in about a
 * third of the CPU time of its few hundred modules, a cost every start of every thread pays
 * (README, "The test suite"). The modules themselves when no bundle was built or TRACKD_UNBUNDLED=1.
 */
export function threadFile(pathUnderSrc: string): URL {
  const modules = new URL(pathUnderSrc, SRC);
  if (process.env.TRACKD_UNBUNDLED === '1') return modules;
  const bundle = new URL(pathUnderSrc.replace(/\.js$/, '.bundle.js'), SRC);
  return fs.existsSync(bundle) ? bundle : modules;
}
