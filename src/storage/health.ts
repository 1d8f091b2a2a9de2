import fs from 'node:fs';
import path from 'node:path';
import { ApiError } from '../errors/catalog.js';
import type { Logger } from '../log.js';

/** SQLite and file-system failures that mean "the data directory cannot take writes now". */
const STORAGE_CODES = /^(SQLITE_FULL|SQLITE_READONLY|SQLITE_IOERR|SQLITE_CANTOPEN|ENOSPC|EROFS|EDQUOT|EACCES|EPERM|EIO)/;

export function isStorageError(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && STORAGE_CODES.test(code);
}

const PROBE_EVERY_MS = 1000;
const PROBE_BYTES = 64 * 1024;

/**
 * Watches the data directory's ability to take writes. A storage failure anywhere (a request, a scan
 * batch) flips readiness to false and starts a probe that writes, syncs and removes a small file in
 * DATA_DIR once a second; the first probe that succeeds flips readiness back. Requests that hit a
 * storage failure get 503 service_unavailable instead of a 500: the state is the operator's to fix,
 * and SQLite rolled the transaction back, so the client can retry later.
 */
export class StorageHealth {
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly dataDir: string,
    private readonly readiness: { storage: boolean },
    private readonly logger: Logger,
  ) {}

  /** Records a failure when it is a storage one; returns the error to answer with (503) or undefined. */
  report(err: unknown): ApiError | undefined {
    if (!isStorageError(err)) return undefined;
    if (this.readiness.storage) {
      this.readiness.storage = false;
      this.logger.error(
        { code: (err as { code: string }).code, err: (err as Error).message, data_dir: this.dataDir },
        'storage failure: the data directory does not take writes (full or read-only?); not ready until it does',
      );
      this.timer = setInterval(() => this.probe(), PROBE_EVERY_MS);
      this.timer.unref();
    }
    return new ApiError(
      'service_unavailable',
      'Storage is unavailable (the data directory is full or read-only); nothing was changed; retry later',
      {
        headers: { 'Retry-After': '5' },
      },
    );
  }

  private probe(): void {
    const file = path.join(this.dataDir, `.storage-probe-${process.pid}`);
    try {
      const fd = fs.openSync(file, 'w');
      try {
        fs.writeSync(fd, Buffer.alloc(PROBE_BYTES));
        fs.fsyncSync(fd);
      } finally {
        fs.closeSync(fd);
      }
      fs.unlinkSync(file);
    } catch {
      fs.rmSync(file, { force: true });
      return;
    }
    clearInterval(this.timer);
    this.timer = undefined;
    this.readiness.storage = true;
    this.logger.info({ data_dir: this.dataDir }, 'storage recovered: the data directory takes writes again');
  }

  close(): void {
    clearInterval(this.timer);
  }
}
