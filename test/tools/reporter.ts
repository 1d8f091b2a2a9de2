/**
 * The suite's reporter for Node's test runner (`npm test`): one line per top-level test of a file
 * (its assertions), the test's comments under it, every failure in full, and a closing count. Node's runner runs the
 * tap files as plain processes and parses their TAP; tap's own runner forces its processinfo module
 * hooks into every test process, thread and child, which doubled the suite's CPU (README, "The test suite").
 */
import { inspect, stripVTControlCharacters } from 'node:util';

interface TestEventData {
  name: string;
  nesting: number;
  file?: string;
  message?: string;
  details?: { duration_ms?: number; type?: string; error?: unknown };
}

interface TestEvent {
  type: string;
  data: TestEventData;
}

interface GroupTally {
  passed: number;
  failed: number;
  notes: string[];
  failures: string[];
}

const relative = (file: string | undefined): string => (file ?? '?').replace(`${process.cwd()}/`, '');
const seconds = (ms: number | undefined) => `${((ms ?? 0) / 1000).toFixed(1)} s`;

const RUNNER_COUNTS = /^(tests|suites|pass|fail|cancelled|skipped|todo|duration_ms) \d/;

const SUBTESTS_FAILED = /^'?\d+ subtests? failed'?$/;

function failureText(data: TestEventData): string {
  const error = data.details?.error as { cause?: unknown } | undefined;
  return stripVTControlCharacters(inspect(error?.cause ?? error, { depth: 3, colors: false }));
}

function describeFailure(data: TestEventData, text = failureText(data)): string {
  return `  ✖ ${data.name}\n${text.replace(/^/gm, '      ')}`;
}

export default async function* reporter(source: AsyncIterable<TestEvent>): AsyncGenerator<string> {
  // Files run side by side, each one's events in order: tally by file until its next top-level test ends.
  const pending = new Map<string, GroupTally>();
  const tally = (file: string) => {
    let entry = pending.get(file);
    if (entry === undefined) {
      entry = { passed: 0, failed: 0, notes: [], failures: [] };
      pending.set(file, entry);
    }
    return entry;
  };
  const files = new Set<string>();
  const failedGroups: string[] = [];
  let passed = 0;
  let failed = 0;
  const started = Date.now();
  const fileStarted = new Map<string, number>();
  const fileSeconds = new Map<string, number>();
  for await (const { type, data } of source) {
    const file = relative(data.file);
    // A file's own test starts at its dequeue and ends at its complete (the runner gives tap files no durations).
    if (data.nesting === 0 && data.name === data.file) {
      if (type === 'test:dequeue') fileStarted.set(file, Date.now());
      if (type === 'test:complete') fileSeconds.set(file, (Date.now() - (fileStarted.get(file) ?? started)) / 1000);
      continue;
    }
    if (type === 'test:diagnostic') {
      // A tap comment arrives at nesting 0 (tap's tests are not the runner's); the runner's own counts do too.
      if (data.message !== undefined && (data.nesting > 0 || !RUNNER_COUNTS.test(data.message))) tally(file).notes.push(data.message);
      continue;
    }
    if (type !== 'test:pass' && type !== 'test:fail') continue;
    files.add(file);
    const group = tally(file);
    if (data.nesting === 0) {
      pending.delete(file);
      const ok = type === 'test:pass' && group.failed === 0;
      // A top-level test with no assertion of its own: a file that has no tap tests, or one that crashed or timed out.
      if (group.passed + group.failed === 0) {
        if (ok) passed++;
        else {
          failed++;
          group.failures.push(describeFailure(data));
        }
      } else if (type === 'test:fail' && group.failed === 0) {
        // Its assertions passed, yet it failed: an exception thrown or a timeout after them.
        failed++;
        group.failures.push(describeFailure(data));
      }
      // The failures again at the end, shortened: a CI log is often read from its tail only.
      if (!ok)
        failedGroups.push(
          `${file} › ${data.name}\n${group.failures
            .slice(0, 5)
            .map((f) => `    ${f.slice(0, 600).replace(/\n/g, '\n    ')}`)
            .join('\n')}`,
        );
      const counts = `${group.passed} passed${group.failed ? `, ${group.failed} failed` : ''}`;
      const notes = group.notes.map((n) => `    # ${n}\n`).join('');
      yield `${ok ? '✔' : '✖'} ${file} › ${data.name}  (${counts})\n${notes}${ok ? '' : `${group.failures.join('\n')}\n`}`;
      continue;
    }
    // A test with subtests: its own failure is counted only when it is not just theirs (a throw or a timeout of its own).
    if (data.details?.type === 'suite') {
      const text = type === 'test:fail' ? failureText(data) : '';
      if (type === 'test:fail' && !SUBTESTS_FAILED.test(text)) {
        group.failed++;
        failed++;
        group.failures.push(describeFailure(data, text));
      }
      continue;
    }
    if (type === 'test:pass') {
      group.passed++;
      passed++;
    } else {
      group.failed++;
      failed++;
      group.failures.push(describeFailure(data));
    }
  }
  // Failures that arrived after their file's last top-level test ended would otherwise be counted and never shown.
  for (const [file, group] of pending) {
    if (group.failures.length === 0) continue;
    const shown = `${file} › (after its last top-level test)\n${group.failures.join('\n')}`;
    failedGroups.push(shown);
    yield `✖ ${shown}\n`;
  }
  yield `\n${files.size} files, ${passed + failed} assertions: ${passed} passed, ${failed} failed, in ${seconds(Date.now() - started)}\n`;
  const slowest = [...fileSeconds].sort((a, b) => b[1] - a[1]).slice(0, 12);
  yield `slowest files: ${slowest.map(([file, s]) => `${file} ${s.toFixed(1)} s`).join(', ')}\n`;
  if (failedGroups.length > 0) yield `failed:\n${failedGroups.map((f) => `  ${f}\n`).join('')}`;
}
