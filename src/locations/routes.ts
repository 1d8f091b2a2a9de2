import { Type } from '@sinclair/typebox';
import type { RequestContext, Route } from '../http/route.js';
import {
  createDataErrors,
  createLocation,
  deleteLocation,
  LOCATION_TAGS,
  patchDataErrors,
  patchLocation,
  renameLocation,
} from './commands.js';
import { listLocations } from './list.js';
import {
  CreateLocationBody,
  createErrors,
  patchErrors,
  LocationEnvelope,
  LocationList,
  PatchLocationBody,
  RenameBody,
  RenameResult,
  listQuery,
  treeQuery,
} from './schemas.js';
import { readStatements, type LocationRow } from './store.js';
import { TableMemo } from '../masterdata/tableMemo.js';
import { ancestors, children, descendants } from './tree.js';
import { toView } from './view.js';
import { tagRoutes } from '../masterdata/tags.js';
import { notFound } from '../masterdata/rows.js';

const READ = ['locations:read'];
const WRITE = ['locations:write'];
const ITEM = '/api/v1/locations/{location_id}';

/** A live location by id (the by-id rule: soft-deleted is 404, the temporal rule is skipped). */
function requireLive(ctx: RequestContext): number {
  const id = ctx.params.location_id;
  if (readStatements(ctx.shard).liveById.get(ctx.principal.orgId, id) === undefined) throw notFound('locations', id);
  return id;
}

const treeRoute = (name: 'ancestors' | 'children' | 'descendants', summary: string, run: typeof descendants): Route => ({
  method: 'GET',
  path: `${ITEM}/${name}`,
  operationId: `listLocation${name.charAt(0).toUpperCase()}${name.slice(1)}`,
  summary,
  tag: 'Locations',
  scopes: READ,
  query: treeQuery,
  responses: { 200: { description: summary, schema: LocationList } },
  handler: (ctx) => {
    const id = requireLive(ctx);
    const paging = { limit: ctx.query.limit as number, offset: ctx.query.offset as number };
    const subtrees = TableMemo.of<number[]>(ctx.shard, 'locations.subtrees', 'locations', 256);
    return { status: 200, body: run(readStatements(ctx.shard), ctx.principal.orgId, id, ctx.now, paging, subtrees) };
  },
});

export function locationRoutes(): Route[] {
  return [
    {
      method: 'GET',
      path: '/api/v1/locations',
      operationId: 'listLocations',
      summary: 'List locations',
      tag: 'Locations',
      scopes: READ,
      query: listQuery,
      responses: { 200: { description: 'A page of locations', schema: LocationList } },
      handler: (ctx) => ({ status: 200, body: listLocations(ctx.shard, ctx.principal.orgId, ctx.query, ctx.now) }),
    },
    {
      method: 'POST',
      path: '/api/v1/locations',
      operationId: 'createLocation',
      summary: 'Create a location',
      tag: 'Locations',
      scopes: WRITE,
      body: { schema: CreateLocationBody, contentType: 'application/json', check: createErrors, resolve: createDataErrors },
      responses: {
        201: {
          description: 'The created location',
          schema: LocationEnvelope,
          headers: { Location: { description: 'Path of the new location', schema: Type.String() } },
        },
      },
      handler: async (ctx) => {
        const view = await createLocation(ctx.shard, ctx.principal.orgId, ctx.body);
        return { status: 201, body: { data: view }, headers: { Location: `/api/v1/locations/${view.id}` } };
      },
    },
    {
      method: 'GET',
      path: ITEM,
      operationId: 'getLocation',
      cacheable: 'locations',
      summary: 'Get a location by id',
      tag: 'Locations',
      scopes: READ,
      responses: { 200: { description: 'The location', schema: LocationEnvelope } },
      handler: (ctx) => {
        const orgId = ctx.principal.orgId;
        const row = readStatements(ctx.shard).liveById.get(orgId, ctx.params.location_id) as LocationRow | undefined;
        if (row === undefined) throw notFound('locations', ctx.params.location_id);
        return { status: 200, body: { data: toView(row) } };
      },
    },
    {
      method: 'PATCH',
      path: ITEM,
      operationId: 'patchLocation',
      summary: 'Update a location (JSON merge patch)',
      tag: 'Locations',
      scopes: WRITE,
      body: { schema: PatchLocationBody, contentType: 'application/merge-patch+json', check: patchErrors, resolve: patchDataErrors },
      responses: { 200: { description: 'The updated location', schema: LocationEnvelope } },
      handler: async (ctx) => ({
        status: 200,
        body: { data: await patchLocation(ctx.shard, ctx.principal.orgId, ctx.params.location_id, ctx.body) },
      }),
    },
    {
      method: 'DELETE',
      path: ITEM,
      operationId: 'deleteLocation',
      summary: 'Soft-delete a leaf location',
      tag: 'Locations',
      scopes: WRITE,
      responses: { 204: { description: 'Deleted' } },
      handler: async (ctx) => {
        await deleteLocation(ctx.shard, ctx.principal.orgId, ctx.params.location_id);
        return { status: 204 };
      },
    },
    {
      method: 'POST',
      path: `${ITEM}/rename`,
      operationId: 'renameLocation',
      summary: "Change a location's external_key",
      tag: 'Locations',
      scopes: WRITE,
      body: { schema: RenameBody, contentType: 'application/json' },
      responses: { 200: { description: 'The renamed location and its live descendant count', schema: RenameResult } },
      handler: async (ctx) => ({
        status: 200,
        body: await renameLocation(ctx.shard, ctx.principal.orgId, ctx.params.location_id, ctx.body.external_key as string),
      }),
    },
    treeRoute('ancestors', 'Ancestors of a location, root first', ancestors),
    treeRoute('children', 'Immediate children of a location, by name then id', children),
    treeRoute('descendants', 'The subtree under a location in depth-first preorder', descendants),
    ...tagRoutes(LOCATION_TAGS, { collectionPath: '/api/v1/locations', idParam: 'location_id', openApiTag: 'Locations', scopes: WRITE }),
  ];
}
