import { TextDecoder } from 'node:util';

/**
 * Splitting an import body into records as its chunks arrive, holding no more than the record in
 * progress: CSV (RFC 4180: quoted fields with "" for a quote, CRLF or LF) into arrays of fields,
 * NDJSON into lines. The bytes must be UTF-8; a sequence that is not fails the body where it occurs.
 */

export class BodyNotUtf8 extends Error {}

/** UTF-8 decoding across chunk boundaries (a character split between two chunks is kept for the next). */
export class Utf8Chunks {
  private readonly decoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false });

  decode(chunk: Buffer, last: boolean): string {
    try {
      return this.decoder.decode(chunk, { stream: !last });
    } catch {
      throw new BodyNotUtf8('the body is not valid UTF-8');
    }
  }
}

/** A CSV record split in fields; `unterminated` when the body ended inside a quoted field. */
export interface CsvRecord {
  fields: string[];
  unterminated?: boolean;
}

const QUOTE = 0x22;
const COMMA = 0x2c;
const CR = 0x0d;
const LF = 0x0a;

export class CsvSplitter {
  private field = '';
  private fields: string[] = [];
  private inQuotes = false;
  /** The last character was the closing quote of a quoted field (or an escaped quote's first half). */
  private quoteSeen = false;
  private fieldStarted = false;
  private pendingCr = false;

  /** Feeds text; returns the records completed by it. */
  push(text: string): CsvRecord[] {
    const out: CsvRecord[] = [];
    let start = 0;
    const n = text.length;
    for (let i = 0; i < n; i++) {
      const c = text.charCodeAt(i);
      if (this.pendingCr) {
        this.pendingCr = false;
        if (c === LF) {
          start = i + 1;
          continue;
        }
      }
      if (this.inQuotes) {
        if (c !== QUOTE) continue;
        this.field += text.slice(start, i);
        start = i + 1;
        this.inQuotes = false;
        this.quoteSeen = true;
        continue;
      }
      if (this.quoteSeen && c === QUOTE) {
        // "" inside a quoted field: one quote, and the field goes on quoted.
        this.field += '"';
        start = i + 1;
        this.inQuotes = true;
        this.quoteSeen = false;
        continue;
      }
      this.quoteSeen = false;
      if (c === QUOTE && !this.fieldStarted && start === i) {
        this.inQuotes = true;
        this.fieldStarted = true;
        start = i + 1;
        continue;
      }
      if (c === COMMA) {
        this.fields.push(this.field + text.slice(start, i));
        this.field = '';
        this.fieldStarted = false;
        start = i + 1;
      } else if (c === LF || c === CR) {
        this.fields.push(this.field + text.slice(start, i));
        this.field = '';
        this.fieldStarted = false;
        out.push({ fields: this.fields });
        this.fields = [];
        start = i + 1;
        if (c === CR) this.pendingCr = true;
      } else {
        this.fieldStarted = true;
      }
    }
    if (start < n) {
      if (!this.inQuotes) this.fieldStarted = true;
      this.field += text.slice(start);
    }
    return out;
  }

  /** The record left at the end of the body (a last line without a newline), if any. */
  end(): CsvRecord | undefined {
    if (this.field === '' && this.fields.length === 0 && !this.inQuotes && !this.fieldStarted) return undefined;
    this.fields.push(this.field);
    const record: CsvRecord = this.inQuotes ? { fields: this.fields, unterminated: true } : { fields: this.fields };
    this.fields = [];
    this.field = '';
    return record;
  }
}

/** NDJSON: one JSON text per line (LF or CRLF); blank lines are skipped. */
export class LineSplitter {
  private rest = '';

  push(text: string): string[] {
    const joined = this.rest + text;
    const lines = joined.split('\n');
    this.rest = lines.pop()!;
    return lines.map(trimCr).filter((line) => line.trim() !== '');
  }

  end(): string | undefined {
    const last = trimCr(this.rest);
    this.rest = '';
    return last.trim() === '' ? undefined : last;
  }
}

const trimCr = (line: string) => (line.endsWith('\r') ? line.slice(0, -1) : line);
