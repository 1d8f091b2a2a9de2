import { Type } from '@sinclair/typebox';
import type { Route } from '../http/route.js';
import { DataEnvelope, ListEnvelope } from '../masterdata/fields.js';
import { masterListParams } from '../masterdata/filters.js';
import { tagRoutes } from '../masterdata/tags.js';
import { AssetCreate, assetCreateErrors, AssetPatch, assetPatchErrors, AssetView, RenameBody, RenameResult } from './schemas.js';
import { ASSET_TAGS, createAsset, deleteAsset, getAsset, listAssets, patchAsset, renameAsset, type AssetCreateBody } from './store.js';

const COLLECTION = '/api/v1/assets';
const ITEM = `${COLLECTION}/{asset_id}`;
const TAG = 'Assets';
const READ = ['assets:read'];
const WRITE = ['assets:write'];

export function assetRoutes(): Route[] {
  return [
    {
      method: 'GET',
      path: COLLECTION,
      operationId: 'listAssets',
      summary: 'List assets (currently effective; soft-deleted only with include_deleted)',
      tag: TAG,
      scopes: READ,
      query: masterListParams(['external_key', 'name', 'created_at', 'updated_at'], 'external_key'),
      responses: { 200: { description: 'A page of assets', schema: ListEnvelope(AssetView) } },
      handler: (ctx) => ({ status: 200, body: listAssets(ctx.shard, ctx.principal.orgId, ctx.query, ctx.now) }),
    },
    {
      method: 'POST',
      path: COLLECTION,
      operationId: 'createAsset',
      summary: 'Create an asset (external_key minted as the lowest free ASSET-NNNN slot when omitted)',
      tag: TAG,
      scopes: WRITE,
      body: { schema: AssetCreate, contentType: 'application/json', check: assetCreateErrors },
      responses: {
        201: {
          description: 'The created asset',
          schema: DataEnvelope(AssetView),
          headers: { Location: { description: '/api/v1/assets/{asset_id}', schema: Type.String() } },
        },
      },
      handler: async (ctx) => {
        const asset = await createAsset(ctx.shard, ctx.principal.orgId, ctx.body as unknown as AssetCreateBody);
        return { status: 201, body: { data: asset }, headers: { Location: `${COLLECTION}/${asset.id}` } };
      },
    },
    {
      method: 'GET',
      path: ITEM,
      operationId: 'getAsset',
      cacheable: 'assets',
      summary: 'Get an asset by id (404 when missing or soft-deleted; the temporal rule does not apply)',
      tag: TAG,
      scopes: READ,
      responses: { 200: { description: 'The asset', schema: DataEnvelope(AssetView) } },
      handler: (ctx) => ({ status: 200, body: { data: getAsset(ctx.shard, ctx.principal.orgId, ctx.params.asset_id) } }),
    },
    {
      method: 'PATCH',
      path: ITEM,
      operationId: 'updateAsset',
      summary: 'Merge-patch an asset (RFC 7396); read-only fields may be echoed unchanged',
      tag: TAG,
      scopes: WRITE,
      body: { schema: AssetPatch, contentType: 'application/merge-patch+json', check: assetPatchErrors },
      responses: { 200: { description: 'The updated asset', schema: DataEnvelope(AssetView) } },
      handler: async (ctx) => ({
        status: 200,
        body: { data: await patchAsset(ctx.shard, ctx.principal.orgId, ctx.params.asset_id, ctx.body) },
      }),
    },
    {
      method: 'DELETE',
      path: ITEM,
      operationId: 'deleteAsset',
      summary: 'Soft-delete an asset (frees its external_key; a second delete is 404)',
      tag: TAG,
      scopes: WRITE,
      responses: { 204: { description: 'Soft-deleted' } },
      handler: async (ctx) => {
        await deleteAsset(ctx.shard, ctx.principal.orgId, ctx.params.asset_id);
        return { status: 204 };
      },
    },
    {
      method: 'POST',
      path: `${ITEM}/rename`,
      operationId: 'renameAsset',
      summary: 'Change the external_key of an asset (same key: 200 without change; key in use: 409)',
      tag: TAG,
      scopes: WRITE,
      body: { schema: RenameBody, contentType: 'application/json' },
      responses: { 200: { description: 'The renamed asset', schema: RenameResult } },
      handler: async (ctx) => {
        const asset = await renameAsset(ctx.shard, ctx.principal.orgId, ctx.params.asset_id, ctx.body.external_key as string);
        return { status: 200, body: { data: asset, descendant_count_affected: 0 } };
      },
    },
    ...tagRoutes(ASSET_TAGS, { collectionPath: COLLECTION, idParam: 'asset_id', openApiTag: TAG, scopes: WRITE }),
  ];
}
