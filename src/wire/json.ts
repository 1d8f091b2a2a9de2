/**
 * The first key that appears twice in one object of a JSON text, else undefined. `text` must already
 * have parsed. JSON.parse keeps the last duplicate silently; trackd rejects such bodies instead
 * (I-JSON, RFC 7493 section 2.3), so what a proxy or log reads is what the service applied.
 * Hand-written: JSON.parse has no hook that sees duplicates (a reviver sees the merged object), and a
 * second full parser would cost more than this one pass over the text, run only on bodies that parsed.
 */
export function findDuplicateKey(text: string): string | undefined {
  const objects: (Set<string> | undefined)[] = [];
  let expectKey = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22 /* " */) {
      const start = i;
      let escaped = false;
      for (i++; i < text.length; i++) {
        const d = text.charCodeAt(i);
        if (d === 0x5c /* \ */) {
          escaped = true;
          i++;
        } else if (d === 0x22) break;
      }
      if (expectKey) {
        const key = escaped ? (JSON.parse(text.slice(start, i + 1)) as string) : text.slice(start + 1, i);
        const keys = objects[objects.length - 1] as Set<string>;
        if (keys.has(key)) return key;
        keys.add(key);
        expectKey = false;
      }
    } else if (c === 0x7b /* { */) {
      objects.push(new Set());
      expectKey = true;
    } else if (c === 0x5b /* [ */) {
      objects.push(undefined);
    } else if (c === 0x7d /* } */ || c === 0x5d /* ] */) {
      objects.pop();
      expectKey = false;
    } else if (c === 0x2c /* , */) {
      expectKey = objects[objects.length - 1] !== undefined;
    }
  }
  return undefined;
}

const SURROGATE_ESCAPE = /\\u[dD][89a-fA-F]/;
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * True when a parsed JSON value holds a string or key with a lone surrogate (only possible through
 * \u escapes, since the bytes were valid UTF-8). I-JSON forbids them, and SQLite would store U+FFFD
 * in their place, so the stored text would differ from what was accepted.
 */
export function hasLoneSurrogate(text: string, value: unknown): boolean {
  if (!SURROGATE_ESCAPE.test(text)) return false;
  const pending: unknown[] = [value];
  while (pending.length > 0) {
    const v = pending.pop();
    if (typeof v === 'string') {
      if (LONE_SURROGATE.test(v)) return true;
    } else if (Array.isArray(v)) {
      for (const item of v) pending.push(item);
    } else if (v !== null && typeof v === 'object') {
      for (const [key, item] of Object.entries(v)) {
        if (LONE_SURROGATE.test(key)) return true;
        pending.push(item);
      }
    }
  }
  return false;
}
