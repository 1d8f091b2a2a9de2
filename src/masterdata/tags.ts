import { conflict as conflictError, notFound as notFoundError, type DomainError } from '../errors/domain.js';
import { Type } from '@sinclair/typebox';
import { fieldError, type FieldError } from '../errors/catalog.js';
import type { Route } from '../http/route.js';
import { jsonTypeOf } from '../wire/validation.js';
import { shardCommand } from '../shards/commands.js';
import { eventLogOf } from '../events/log.js';
import type { RowEffects } from '../shards/generations.js';
import type { Shard } from '../shards/shard.js';
import type { ShardWriter } from '../shards/writer.js';
import { DataEnvelope, TAG_TYPES, TagValue, TagView } from './fields.js';
import { writerStatements, type KeyedTable } from './keys.js';

/** One tag variant of the OpenAPI document (the wire rules of every variant are the same). */
const tagVariant = (tagType: (typeof TAG_TYPES)[number]) =>
  Type.Object(
    { tag_type: Type.Unsafe<string>({ type: 'string', enum: [tagType] }), value: TagValue },
    { additionalProperties: false, title: `${tagType}TagRequest` },
  );

/**
 * A tag request. The document shows three variants discriminated by `tag_type`; validation takes
 * `tag_type` as any value and `tagTypeErrors` judges it, because null must read as `required`.
 */
export const TagRequest = Type.Object(
  { tag_type: Type.Unknown(), value: TagValue },
  {
    additionalProperties: false,
    'x-component': 'TagRequest',
    'x-openapi': { oneOf: TAG_TYPES.map(tagVariant), discriminator: { propertyName: 'tag_type' } },
  },
);

/** The `tag_type` rule for a request tag at `prefix` (`''` or `tags[0].`). */
export function tagTypeErrors(tag: unknown, prefix = ''): FieldError[] {
  if (tag === null || typeof tag !== 'object' || Array.isArray(tag)) return [];
  const value = (tag as Record<string, unknown>).tag_type;
  const field = `${prefix}tag_type`;
  if (value === undefined) return [];
  if (value === null) return [fieldError(field, 'required', `${field} is required`)];
  if (typeof value !== 'string') {
    return [
      fieldError(field, 'invalid_value', `${field} must be of type string, got ${jsonTypeOf(value)}`, {
        expected_type: 'string',
        received_type: jsonTypeOf(value),
      }),
    ];
  }
  if (!(TAG_TYPES as readonly string[]).includes(value)) {
    return [fieldError(field, 'invalid_value', `${field} must be one of: ${TAG_TYPES.join(', ')}`, { allowed_values: [...TAG_TYPES] })];
  }
  return [];
}

/** `tagTypeErrors` for every element of a body's `tags` array (create bodies). */
export function tagListErrors(body: Record<string, unknown>): FieldError[] {
  const tags = body.tags;
  if (!Array.isArray(tags)) return [];
  return tags.flatMap((tag, i) => tagTypeErrors(tag, `tags[${i}].`));
}

export interface TagRequestBody {
  tag_type: string;
  value: string;
}

/** How a master-data table owns tags. */
export interface TagOwner {
  table: KeyedTable;
  /** Column of `tags` that points at the owner. */
  column: 'asset_id' | 'location_id';
  /** Singular noun used in details and operation ids. */
  noun: 'asset' | 'location';
}

/**
 * SQL select expression of the owner's live tags as one JSON array (id order), named `tags_json`,
 * so a by-id read or a list page needs no second query for tags.
 */
export function tagsJsonColumn(alias: string, column: TagOwner['column']): string {
  return (
    `(SELECT json_group_array(json_object('id', t.id, 'tag_type', t.tag_type, 'value', t.value) ORDER BY t.id) ` +
    `FROM tags t WHERE t.${column} = ${alias}.id AND t.org_id = ${alias}.org_id AND t.deleted_at IS NULL) AS tags_json`
  );
}

export function parseTagsJson(text: string | null): TagView[] {
  return text === null ? [] : (JSON.parse(text) as TagView[]);
}

function tagConflict(tag: TagRequestBody): DomainError {
  return conflictError(`a tag with tag_type '${tag.tag_type}' and value '${tag.value}' already exists in this organization`);
}

/**
 * Inserts tags for a live owner row. Writer side only (inside a shard command, in the caller's
 * transaction): (tag_type, value) must be unique per organization among live tags, else 409.
 */
export function insertTags(
  shard: ShardWriter,
  orgId: number,
  owner: TagOwner,
  ownerId: number,
  tags: TagRequestBody[],
  now: number,
): TagView[] {
  const statements = writerStatements(shard);
  const taken = statements.get('SELECT 1 FROM tags WHERE org_id = ? AND tag_type = ? AND value = ? AND deleted_at IS NULL');
  const insert = statements.get(`INSERT INTO tags (id, org_id, tag_type, value, ${owner.column}, created_at) VALUES (?, ?, ?, ?, ?, ?)`);
  const views: TagView[] = [];
  for (const tag of tags) {
    if (taken.get(orgId, tag.tag_type, tag.value) !== undefined) throw tagConflict(tag);
    const id = shard.nextId('tag');
    insert.run(id, orgId, tag.tag_type, tag.value, ownerId, now);
    views.push({ id, tag_type: tag.tag_type, value: tag.value });
  }
  return views;
}

function ownerIsLive(shard: ShardWriter, owner: TagOwner, orgId: number, ownerId: number): boolean {
  const sql = `SELECT 1 FROM ${owner.table} WHERE id = ? AND org_id = ? AND deleted_at IS NULL`;
  return writerStatements(shard).get(sql).get(ownerId, orgId) !== undefined;
}

/** A tag write changes its owner's row and nothing else. */
function ownerRow(owner: TagOwner, ownerId: number): RowEffects {
  return { table: owner.table, ids: [ownerId] };
}

/** Attaches one tag to a live owner; 404 when the owner is missing, soft-deleted or another org's. */
interface OwnerArgs {
  orgId: number;
  owner: TagOwner;
  ownerId: number;
}

const attachCommand = shardCommand(
  'tags.attach',
  (shard, { orgId, owner, ownerId, tag }: OwnerArgs & { tag: TagRequestBody }): TagView =>
    shard.transaction(() => {
      if (!ownerIsLive(shard, owner, orgId, ownerId)) throw notFoundError(`${owner.noun} ${ownerId} not found`);
      const view = insertTags(shard, orgId, owner, ownerId, [tag], shard.now)[0]!; // one tag in, one view out
      eventLogOf(shard).append(orgId, 'tag.attached', { tag: view, owner_type: owner.noun, owner_id: ownerId });
      return view;
    }),
  ({ owner, ownerId }) => ownerRow(owner, ownerId),
);

export function attachTag(shard: Shard, orgId: number, owner: TagOwner, ownerId: number, tag: TagRequestBody): Promise<TagView> {
  return shard.send(attachCommand, { orgId, owner, ownerId, tag });
}

/** Detaches (soft-deletes) a live tag of a live owner; 404 for a repeat, another owner's or org's tag. */
const detachCommand = shardCommand(
  'tags.detach',
  (shard, { orgId, owner, ownerId, tagId }: OwnerArgs & { tagId: number }): void => {
    if (!ownerIsLive(shard, owner, orgId, ownerId)) throw notFoundError(`${owner.noun} ${ownerId} not found`);
    const sql = `UPDATE tags SET deleted_at = ? WHERE id = ? AND org_id = ? AND ${owner.column} = ? AND deleted_at IS NULL
                 RETURNING id, tag_type, value`;
    const tag = writerStatements(shard).get(sql).get(shard.now, tagId, orgId, ownerId) as TagView | undefined;
    if (tag === undefined) throw notFoundError(`tag ${tagId} is not attached to ${owner.noun} ${ownerId}`);
    eventLogOf(shard).append(orgId, 'tag.detached', { tag, owner_type: owner.noun, owner_id: ownerId });
  },
  ({ owner, ownerId }) => ownerRow(owner, ownerId),
);

export function detachTag(shard: Shard, orgId: number, owner: TagOwner, ownerId: number, tagId: number): Promise<void> {
  return shard.send(detachCommand, { orgId, owner, ownerId, tagId });
}

const capitalized = (s: string) => s.charAt(0).toUpperCase() + s.slice(1);

/**
 * The tags sub-resource of an owner: POST `{collection}/{id}/tags` (201 + Location) and
 * DELETE `{collection}/{id}/tags/{tag_id}` (204, repeat 404).
 */
export function tagRoutes(
  owner: TagOwner,
  options: { collectionPath: string; idParam: 'asset_id' | 'location_id'; openApiTag: string; scopes: string[] },
): Route[] {
  const base = `${options.collectionPath}/{${options.idParam}}/tags`;
  const noun = capitalized(owner.noun);
  return [
    {
      method: 'POST',
      path: base,
      operationId: `attach${noun}Tag`,
      summary: `Attach a tag to a${owner.noun === 'asset' ? 'n' : ''} ${owner.noun} ((tag_type, value) unique per organization among live tags)`,
      tag: options.openApiTag,
      scopes: options.scopes,
      body: { schema: TagRequest, contentType: 'application/json', check: (body) => tagTypeErrors(body) },
      responses: {
        201: {
          description: 'The attached tag',
          schema: DataEnvelope(TagView),
          headers: { Location: { description: `${base}/{tag_id}`, schema: Type.String() } },
        },
      },
      handler: async (ctx) => {
        const ownerId = ctx.params[options.idParam];
        const tag = await attachTag(ctx.shard, ctx.principal.orgId, owner, ownerId, ctx.body as unknown as TagRequestBody);
        return { status: 201, body: { data: tag }, headers: { Location: `${options.collectionPath}/${ownerId}/tags/${tag.id}` } };
      },
    },
    {
      method: 'DELETE',
      path: `${base}/{tag_id}`,
      operationId: `detach${noun}Tag`,
      summary: `Detach a tag from a${owner.noun === 'asset' ? 'n' : ''} ${owner.noun} (a repeat returns 404)`,
      tag: options.openApiTag,
      scopes: options.scopes,
      responses: { 204: { description: 'Detached' } },
      handler: async (ctx) => {
        await detachTag(ctx.shard, ctx.principal.orgId, owner, ctx.params[options.idParam], ctx.params.tag_id);
        return { status: 204 };
      },
    },
  ];
}
