import pino, { type Logger } from 'pino';

export type { Logger };

/** A logger to stdout, or appending to `file` (the in-process test harness: stdout is its TAP stream). */
export function createLogger(level: string, file?: string): Logger {
  const options: pino.LoggerOptions = {
    level,
    base: { service: 'trackd' },
    timestamp: pino.stdTimeFunctions.isoTime,
    redact: { paths: ['authorization', 'token', '*.authorization', '*.token'], censor: '[redacted]' },
  };
  return file === undefined ? pino(options) : pino(options, pino.destination({ dest: file, append: true, sync: true }));
}
