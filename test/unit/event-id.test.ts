/**
 * Event ids are a function of (organization, sequence, time) (src/events/log.ts): a replay of the
 * shard's records writes the same ids, and ids already published must never change. Pinned to the
 * values the first implementation (createHash) gave.
 */
import t from 'tap';
import { eventId } from '../../src/events/log.js';

const PINNED: [orgId: number, seq: number, at: number, id: string][] = [
  [1, 1, 0, '0000000000TTTS2Q260NXWP02Z'],
  [7, 42, 1795690000000, '01M8BQDVM0DYT4TZAG9MVNPT1T'],
  [123456, 9007199254740991, 1795690000123, '01M8BQDVQVA1A6B80754ZYB4HX'],
];

t.test('event ids stay what they were', async (t) => {
  for (const [orgId, seq, at, id] of PINNED) t.equal(eventId(orgId, seq, at), id, `org ${orgId}, seq ${seq}, at ${at}`);
});
