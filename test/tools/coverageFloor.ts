/**
 * The coverage floor, run by `npm test` after the suite: every file of src/ keeps at least 80% of
 * its lines covered (c8 over the test process, its worker threads and the trackd processes it
 * spawns), unless it is listed below with the reason it cannot be.
 */
import fs from 'node:fs';
import path from 'node:path';

const FLOOR = 80;

/** Files allowed below the floor, and why. */
const EXCEPTIONS: Record<string, string> = {};

interface Summary {
  lines: { pct: number; covered: number; total: number };
}

const summaryFile = process.argv[2] ?? 'coverage/coverage-summary.json';
const summary = JSON.parse(fs.readFileSync(summaryFile, 'utf8')) as Record<string, Summary>;
const root = process.cwd();
const below: string[] = [];
let files = 0;
for (const [file, { lines }] of Object.entries(summary)) {
  if (file === 'total') continue;
  const relative = path.relative(root, file);
  if (!relative.startsWith(`src${path.sep}`)) continue;
  files++;
  if (lines.pct >= FLOOR) continue;
  const reason = EXCEPTIONS[relative];
  const line = `${relative}: ${lines.pct}% of ${lines.total} lines`;
  if (reason === undefined) below.push(line);
  else console.log(`below the floor, by exception: ${line} (${reason})`);
}
const total = summary.total?.lines;
console.log(`coverage: ${total?.pct}% of ${total?.total} lines over ${files} files of src/; floor ${FLOOR}% per file`);
if (files === 0) {
  console.error('no src/ file in the coverage summary: was the suite run under c8?');
  process.exit(1);
}
if (below.length > 0) {
  console.error(`below the ${FLOOR}% floor with no stated reason:\n  ${below.join('\n  ')}`);
  process.exit(1);
}
