/**
 * RFC 3339 parsing (offsets, 1 to 9 fractional digits, no sentinel instants, years 0001 to 9999) and formatting (UTC, milliseconds, Z).
 *
 * Hand-written: Date.parse accepts far more than RFC 3339 (dates alone, spaces, `+0200`, years
 * beyond 9999) and quietly rolls February 30 into March; ajv-formats' date-time checks the shape but
 * still leaves the instant to Date. One anchored pattern plus explicit range checks does both.
 */

const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(?:([Zz])|([+-])(\d{2}):(\d{2}))$/;

// Date.UTC treats years 0..99 as 1900+; build 0001-01-01 explicitly.
const YEAR_ONE = (() => {
  const d = new Date(0);
  d.setUTCFullYear(1, 0, 1);
  d.setUTCHours(0, 0, 0, 0);
  return d.getTime();
})();
const LAST_MS_OF_9999 = Date.UTC(9999, 11, 31, 23, 59, 59, 999);

/** The two sentinel instants rejected on every request timestamp: 0001-01-01T00:00:00Z and the epoch. */
export const SENTINEL_INSTANTS: readonly number[] = [YEAR_ONE, 0];

export interface ParsedTimestamp {
  /** Milliseconds since the epoch, sub-millisecond digits truncated toward zero. */
  readonly ms: number;
  /** True when the exact instant (with every fractional digit) is one of the two sentinels. */
  readonly sentinel: boolean;
}

const DAYS_IN_MONTH = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

function isLeap(year: number): boolean {
  return (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0;
}

// The last text parsed: a body's timestamp is parsed by its validator and again by its handler
// (or the scan decoder), so a one-entry memo halves the work on the ingest path.
let lastText: string | undefined;
let lastParsed: ParsedTimestamp | undefined;

/** Parses an RFC 3339 timestamp; returns undefined when the text is not one. */
export function parseTimestamp(text: string): ParsedTimestamp | undefined {
  if (text === lastText) return lastParsed;
  const parsed = parseUncached(text);
  lastText = text;
  lastParsed = parsed;
  return parsed;
}

function parseUncached(text: string): ParsedTimestamp | undefined {
  const m = RFC3339.exec(text);
  if (m === null) return undefined;
  const year = Number(m[1]);
  const month = Number(m[2]);
  const day = Number(m[3]);
  const hour = Number(m[4]);
  const minute = Number(m[5]);
  const second = Number(m[6]);
  if (month < 1 || month > 12 || day < 1) return undefined;
  const maxDay = month === 2 && isLeap(year) ? 29 : DAYS_IN_MONTH[month - 1]!; // month is 1..12 here
  if (day > maxDay || hour > 23 || minute > 59 || second > 59) return undefined;
  const fraction = m[7] ?? '';
  const millis = fraction === '' ? 0 : Number(fraction.slice(0, 3).padEnd(3, '0'));
  const subMillisZero = /^0*$/.test(fraction.slice(3));
  let offsetMinutes = 0;
  if (m[8] === undefined) {
    const oh = Number(m[10]);
    const om = Number(m[11]);
    if (oh > 23 || om > 59) return undefined;
    offsetMinutes = (m[9] === '-' ? -1 : 1) * (oh * 60 + om);
  }
  const date = new Date(0);
  date.setUTCFullYear(year, month - 1, day);
  date.setUTCHours(hour, minute, second, millis);
  const ms = date.getTime() - offsetMinutes * 60_000;
  if (!Number.isFinite(ms) || ms < YEAR_ONE || ms > LAST_MS_OF_9999) return undefined;
  return { ms, sentinel: subMillisZero && (ms === YEAR_ONE || ms === 0) };
}

/**
 * True for RFC 3339 text of a real date whose instant falls outside the years 0001 to 9999 (UTC):
 * what most clients (Python's datetime, PostgreSQL) cannot represent, so trackd refuses it.
 */
export function outsideSupportedYears(text: string): boolean {
  if (parseTimestamp(text) !== undefined) return false;
  const m = RFC3339.exec(text);
  if (m === null) return false;
  const year = Number(m[1]);
  // Year 0000 itself, or years 0001/9999 pushed past the range by their offset.
  return year === 0 || year === 1 || year === 9999;
}

/** Outbound form: UTC with exactly three fractional digits and a trailing Z. */
export function formatTimestamp(ms: number): string {
  return new Date(ms).toISOString();
}

/** formatTimestamp in SQL, for an epoch-ms column (`toISOString`'s `YYYY-MM-DDTHH:MM:SS.mmmZ`); floored, so years before 1970 too. */
export function isoSql(column: string): string {
  const ms = `((${column} % 1000) + 1000) % 1000`;
  return `strftime('%Y-%m-%dT%H:%M:%S', (${column} - ${ms}) / 1000, 'unixepoch') || printf('.%03dZ', ${ms})`;
}

export function formatNullableTimestamp(ms: number | null): string | null {
  return ms === null ? null : new Date(ms).toISOString();
}

export const timestampMessages = {
  invalid: (field: string) => `${field} must be an RFC 3339 timestamp (for example 2026-01-31T12:00:00Z)`,
  outOfRange: (field: string, value: string) => `${field}: ${value} is outside the years 0001 to 9999 (UTC) that clients can represent`,
  sentinelNullable: (field: string, value: string) =>
    `${field}: ${value} is a sentinel value, not a real timestamp; use null for an open-ended value`,
  sentinelRequired: (field: string, value: string) =>
    `${field}: ${value} is a sentinel value, not a real timestamp; omit the field (on PATCH: leave it unchanged) or give a real timestamp`,
};
