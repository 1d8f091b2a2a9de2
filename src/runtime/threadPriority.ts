import fs from 'node:fs';
import os from 'node:os';

/** BACKGROUND_NICE's default: CFS then gives such a thread about a tenth of the share of one at the process's nice (weight 110 against 1024 at nice 0). */
export const DEFAULT_BACKGROUND_NICE = 10;

const linux = process.platform === 'linux';

/**
 * Names the calling thread `trackd-<role>` (Linux: its `comm`, at most 15 bytes, what `top -H`,
 * `ps -L` and /proc/<pid>/task/<tid>/comm show), so that an operator can tell the shard threads
 * from the HTTP threads and the relays when one is busy. Best effort.
 */
export function nameThread(role: string): void {
  if (!linux) return;
  try {
    fs.writeFileSync('/proc/thread-self/comm', `trackd-${role}`.slice(0, 15));
  } catch {
    // Not allowed or not there: the thread keeps its name.
  }
}

/**
 * Lowers the calling thread's scheduling priority by BACKGROUND_NICE (validated by config.ts; the
 * threads read it from the environment they share with the main thread), relative to the nice it
 * inherited, at most to 19. For threads whose work may wait while the machine is busy: the event
 * relay's publishes to EVENTS (the event streams and webhooks read the log itself, not EVENTS) and
 * snapshots. On a saturated machine the shard threads, the scan consumer and the HTTP threads then
 * go first. Raising a nice value needs no capability. On Linux a nice value belongs to one thread:
 * `setpriority(PRIO_PROCESS, tid)` changes only that thread. Returns the nice value set, or
 * undefined where none was.
 */
export function runAsBackgroundThread(env: NodeJS.ProcessEnv = process.env): number | undefined {
  const given = env.BACKGROUND_NICE;
  const lower = given === undefined || given === '' ? DEFAULT_BACKGROUND_NICE : Number(given);
  if (!linux || !(lower > 0)) return undefined;
  try {
    const tid = Number(fs.readlinkSync('/proc/thread-self').split('/').at(-1));
    const nice = Math.min(19, os.getPriority(tid) + lower);
    os.setPriority(tid, nice);
    return nice;
  } catch {
    return undefined;
  }
}
