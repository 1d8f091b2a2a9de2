import { fieldError, type FieldError } from '../errors/catalog.js';
import { AssetCreate, assetCreateErrors } from '../assets/schemas.js';
import { CreateLocationBody, createErrors } from '../locations/schemas.js';
import { compileValidator } from '../wire/validation.js';
import type { BatchRow } from './batch.js';
import type { BulkKind, BulkMode, RowError } from './jobs.js';
import type { SourceRow } from './rowSource.js';
import { rowErrors } from './batch.js';

/**
 * The rules a row meets before it reaches the shard, the same as a single create's body (the
 * create schema and its checks, so the same `fields[]` codes), plus the rules of a file: in upsert
 * mode a row names its `external_key`, and no two rows of one file name the same `external_key` or
 * the same tag (the later row fails with `conflict`, naming the earlier).
 */
const RULES = {
  assets: { validate: compileValidator(AssetCreate), check: assetCreateErrors },
  locations: { validate: compileValidator(CreateLocationBody), check: createErrors },
} as const;

export type JudgedRow = (BatchRow & { size: number }) | { row: number; errors: RowError[] };

export class RowJudge {
  private readonly keys = new Map<string, number>();
  private readonly tags = new Map<string, number>();

  constructor(
    private readonly kind: BulkKind,
    private readonly mode: BulkMode,
    private readonly now: number,
  ) {}

  judge(source: SourceRow): JudgedRow {
    if ('errors' in source) return { row: source.row, errors: rowErrors(source.row, source.errors) };
    const { row, body, size } = source;
    const rules = RULES[this.kind];
    const errors: FieldError[] = [...rules.validate(body), ...rules.check(body, this.now)];
    if (this.mode === 'upsert' && body.external_key === undefined && !errors.some((e) => e.field === 'external_key')) {
      errors.push(fieldError('external_key', 'required', 'external_key is required in upsert mode (rows are matched by it)'));
    }
    if (errors.length === 0) this.checkRepeats(row, body, errors);
    return errors.length > 0 ? { row, errors: rowErrors(row, errors) } : { row, body, size };
  }

  /** In-file duplicates; a row is remembered only when it passed, so a later row is judged against rows that may apply. */
  private checkRepeats(row: number, body: Record<string, unknown>, errors: FieldError[]): void {
    const key = body.external_key as string | undefined;
    const earlierKey = key === undefined ? undefined : this.keys.get(key);
    if (earlierKey !== undefined) {
      errors.push(fieldError('external_key', 'conflict', `external_key '${key}' repeats row ${earlierKey} of this file`));
    }
    const tags = (body.tags as { tag_type: string; value: string }[] | undefined) ?? [];
    const tagKeys = tags.map((t) => `${t.tag_type}:${t.value}`);
    tagKeys.forEach((tagKey, i) => {
      const earlier = this.tags.get(tagKey) ?? (tagKeys.indexOf(tagKey) < i ? row : undefined);
      if (earlier !== undefined) errors.push(fieldError(`tags[${i}]`, 'conflict', `tag ${tagKey} repeats row ${earlier} of this file`));
    });
    if (errors.length > 0) return;
    if (key !== undefined) this.keys.set(key, row);
    for (const tagKey of tagKeys) this.tags.set(tagKey, row);
  }
}
