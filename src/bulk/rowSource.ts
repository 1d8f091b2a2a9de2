import { ApiError, fieldError, type FieldError } from '../errors/catalog.js';
import { findDuplicateKey, hasLoneSurrogate } from '../wire/json.js';
import type { BulkFormat } from './jobs.js';
import { CsvSplitter, LineSplitter, Utf8Chunks, type CsvRecord } from './records.js';

/**
 * An import body as rows of create bodies, one per CSV record (after the header) or NDJSON line.
 * CSV cells are text: an empty cell is a field not given; `is_active` is `true` or `false`;
 * `metadata` is a JSON object; `tags` is `type:value` pairs joined by `;` (`rfid:E200...;ble:AB-1`).
 * A row that cannot even be read as a body (a line that is not a JSON object) carries its errors.
 */
export type SourceRow = { row: number; body: Record<string, unknown>; size: number } | { row: number; errors: FieldError[] };

export interface RowReader {
  /** Whether the reader knows its columns (a CSV header was read; NDJSON: always). */
  readonly ready: boolean;
  /** Rows completed by this chunk of the body. */
  push(chunk: Buffer): SourceRow[];
  /** The rows left when the body ends. */
  end(): SourceRow[];
}

/** Columns a CSV header may name, per kind (any order, each at most once; `name` is required). */
export const CSV_COLUMNS = {
  assets: ['external_key', 'name', 'description', 'is_active', 'metadata', 'valid_from', 'valid_to', 'tags'],
  locations: ['external_key', 'name', 'description', 'is_active', 'parent_external_key', 'valid_from', 'valid_to', 'tags'],
} as const;

export function rowReader(format: BulkFormat, kind: keyof typeof CSV_COLUMNS): RowReader {
  return format === 'csv' ? csvReader(CSV_COLUMNS[kind]) : ndjsonReader();
}

function csvHeader(record: CsvRecord, allowed: readonly string[]): string[] {
  const columns = record.fields.map((f, i) => (i === 0 ? f.replace(/^\uFEFF/, '') : f).trim());
  const errors: FieldError[] = [];
  const seen = new Set<string>();
  for (const column of columns) {
    if (!allowed.includes(column))
      errors.push(fieldError(column, 'unknown_field', `CSV column '${column}' is not recognized; columns: ${allowed.join(', ')}`));
    else if (seen.has(column)) errors.push(fieldError(column, 'invalid_value', `CSV column '${column}' appears twice in the header`));
    seen.add(column);
  }
  if (!seen.has('name')) errors.push(fieldError('name', 'required', 'the CSV header must name a name column'));
  if (errors.length > 0) throw ApiError.validation(errors);
  return columns;
}

/** The tags cell: `type:value` pairs joined by `;` (a value may hold `:`, not `;`). */
export function parseTagsCell(cell: string): { tag_type: string; value?: string }[] {
  return cell.split(';').map((pair) => {
    const colon = pair.indexOf(':');
    return colon < 0 ? { tag_type: pair } : { tag_type: pair.slice(0, colon), value: pair.slice(colon + 1) };
  });
}

function csvCell(column: string, cell: string, errors: FieldError[]): unknown {
  switch (column) {
    case 'is_active':
      return cell === 'true' ? true : cell === 'false' ? false : cell;
    case 'metadata':
      try {
        return JSON.parse(cell);
      } catch {
        errors.push(fieldError('metadata', 'invalid_value', 'metadata must be a JSON object'));
        return undefined;
      }
    case 'tags':
      return parseTagsCell(cell);
    default:
      return cell;
  }
}

function csvReader(allowed: readonly string[]): RowReader {
  const text = new Utf8Chunks();
  const splitter = new CsvSplitter();
  let header: string[] | undefined;
  let row = 0;
  const toRows = (records: CsvRecord[]): SourceRow[] => {
    const out: SourceRow[] = [];
    for (const record of records) {
      if (header === undefined) {
        header = csvHeader(record, allowed);
        continue;
      }
      if (record.fields.length === 1 && record.fields[0] === '') continue; // a blank line
      row++;
      const errors: FieldError[] = [];
      if (record.unterminated) errors.push(fieldError('body', 'invalid_value', 'the body ended inside a quoted CSV field'));
      if (record.fields.length !== header.length) {
        errors.push(
          fieldError('body', 'invalid_value', `the record has ${record.fields.length} fields where the header has ${header.length}`),
        );
      }
      if (errors.length > 0) {
        out.push({ row, errors });
        continue;
      }
      const body: Record<string, unknown> = {};
      let size = 0;
      header.forEach((column, i) => {
        const cell = record.fields[i]!;
        size += cell.length + 16;
        if (cell === '') return;
        const value = csvCell(column, cell, errors);
        if (value !== undefined) body[column] = value;
      });
      out.push(errors.length > 0 ? { row, errors } : { row, body, size });
    }
    return out;
  };
  return {
    get ready() {
      return header !== undefined;
    },
    push: (chunk) => toRows(splitter.push(text.decode(chunk, false))),
    end: () => {
      const records = splitter.push(text.decode(Buffer.alloc(0), true));
      const last = splitter.end();
      if (last !== undefined) records.push(last);
      const rows = toRows(records);
      if (header === undefined) throw ApiError.validation([fieldError('name', 'required', 'the CSV body has no header row')]);
      return rows;
    },
  };
}

/** One NDJSON line as a create body, with the same JSON rules as a single create's body. */
function ndjsonRow(row: number, line: string): SourceRow {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    return { row, errors: [fieldError('body', 'invalid_value', 'the line is not valid JSON')] };
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return { row, errors: [fieldError('body', 'invalid_value', 'the line must be a JSON object')] };
  }
  const duplicate = findDuplicateKey(line);
  if (duplicate !== undefined)
    return { row, errors: [fieldError(duplicate, 'invalid_value', `duplicate key ${JSON.stringify(duplicate)}`)] };
  if (hasLoneSurrogate(line, value)) return { row, errors: [fieldError('body', 'invalid_value', 'a string holds an unpaired surrogate')] };
  return { row, body: value as Record<string, unknown>, size: line.length };
}

function ndjsonReader(): RowReader {
  const text = new Utf8Chunks();
  const lines = new LineSplitter();
  let row = 0;
  return {
    ready: true,
    push: (chunk) => lines.push(text.decode(chunk, false)).map((line) => ndjsonRow(++row, line)),
    end: () => {
      const rest = lines.push(text.decode(Buffer.alloc(0), true));
      const last = lines.end();
      if (last !== undefined) rest.push(last);
      return rest.map((line) => ndjsonRow(++row, line));
    },
  };
}
