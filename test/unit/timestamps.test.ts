/** RFC 3339 timestamps: what parses, to which instant, what is a sentinel, what is out of range. */
import t from 'tap';
import { formatTimestamp, outsideSupportedYears, parseTimestamp } from '../../src/wire/timestamps.js';

t.test('valid RFC 3339 texts and their instants', async (t) => {
  const cases: [string, string][] = [
    ['2026-01-31T12:00:00Z', '2026-01-31T12:00:00.000Z'],
    ['2026-01-31t12:00:00z', '2026-01-31T12:00:00.000Z'],
    ['2026-01-31T12:00:00.5Z', '2026-01-31T12:00:00.500Z'],
    ['2026-01-31T12:00:00.123456789Z', '2026-01-31T12:00:00.123Z'],
    ['2026-01-31T12:00:00.999999Z', '2026-01-31T12:00:00.999Z'],
    ['2026-01-31T14:30:00+02:30', '2026-01-31T12:00:00.000Z'],
    ['2026-01-31T00:00:00-05:00', '2026-01-31T05:00:00.000Z'],
    ['2024-02-29T00:00:00Z', '2024-02-29T00:00:00.000Z'],
    ['2000-02-29T00:00:00Z', '2000-02-29T00:00:00.000Z'],
    ['2026-12-31T23:59:59Z', '2026-12-31T23:59:59.000Z'],
    ['0001-01-01T00:00:00.001Z', '0001-01-01T00:00:00.001Z'],
    ['9999-12-31T23:59:59.999Z', '9999-12-31T23:59:59.999Z'],
  ];
  for (const [text, iso] of cases) {
    const parsed = parseTimestamp(text);
    t.equal(parsed === undefined ? 'refused' : formatTimestamp(parsed.ms), iso, text);
  }
});

t.test('texts that are not RFC 3339 timestamps of a real date', async (t) => {
  for (const text of [
    '',
    '2026-01-31',
    '2026-01-31 12:00:00Z',
    '2026-01-31T12:00:00',
    '2026-01-31T12:00Z',
    '2026-1-31T12:00:00Z',
    '2026-13-01T00:00:00Z',
    '2026-00-10T00:00:00Z',
    '2026-01-00T00:00:00Z',
    '2026-01-32T00:00:00Z',
    '2026-04-31T00:00:00Z',
    '2026-02-29T00:00:00Z',
    '1900-02-29T00:00:00Z',
    '2026-01-31T24:00:00Z',
    '2026-01-31T12:60:00Z',
    '2026-01-31T12:00:60Z',
    '2026-01-31T12:00:00.Z',
    '2026-01-31T12:00:00.1234567890Z',
    '2026-01-31T12:00:00+24:00',
    '2026-01-31T12:00:00+05:60',
    '2026-01-31T12:00:00+0500',
    '2026-01-31T12:00:00 Z',
    '１２２６-01-31T12:00:00Z',
  ])
    t.equal(parseTimestamp(text), undefined, JSON.stringify(text));
});

t.test('sentinels: the epoch and 0001-01-01, exactly, in any spelling', async (t) => {
  const cases: [string, boolean][] = [
    ['1970-01-01T00:00:00Z', true],
    ['1970-01-01T00:00:00.000000Z', true],
    ['1970-01-01T02:00:00+02:00', true],
    ['0001-01-01T00:00:00Z', true],
    ['1970-01-01T00:00:00.001Z', false],
    ['1970-01-01T00:00:00.0001Z', false],
    ['1969-12-31T23:59:59.999Z', false],
  ];
  for (const [text, sentinel] of cases) t.equal(parseTimestamp(text)?.sentinel, sentinel, text);
});

t.test('instants outside the years 0001 to 9999 (UTC) are out of range, not malformed', async (t) => {
  const cases: [string, boolean][] = [
    ['0000-06-01T00:00:00Z', true],
    ['0001-01-01T00:00:00+00:01', true],
    ['9999-12-31T23:59:59-00:01', true],
    ['0001-01-01T00:00:00Z', false],
    ['9999-12-31T23:59:59Z', false],
    ['not a timestamp', false],
    ['2026-13-01T00:00:00Z', false],
  ];
  for (const [text, outside] of cases) {
    t.equal(outsideSupportedYears(text), outside, text);
    if (outside) t.equal(parseTimestamp(text), undefined, `${text}: not parsed either`);
  }
});

t.test('the one-entry memo returns the same answer for the same text', async (t) => {
  const a = parseTimestamp('2026-05-05T05:05:05Z');
  t.equal(parseTimestamp('2026-05-05T05:05:05Z'), a);
  t.equal(parseTimestamp('2026-05-05T05:05:06Z')?.ms, (a?.ms ?? 0) + 1000);
});
