import { ApiError } from '../errors/catalog.js';
import type { Route } from '../http/route.js';
import type { Services } from '../services.js';
import { DataEnvelope } from '../masterdata/fields.js';
import { OrganizationView } from './schemas.js';

export function orgRoutes(services: Services): Route[] {
  return [
    {
      method: 'GET',
      path: '/api/v1/orgs/me',
      operationId: 'getCurrentOrganization',
      summary: 'The organization and scopes of the presented API key',
      tag: 'Organization',
      scopes: [],
      orgScoped: false,
      responses: { 200: { description: 'The organization of the API key', schema: DataEnvelope(OrganizationView) } },
      handler: (ctx) => {
        const org = services.control.getOrg(ctx.principal.orgId);
        if (org === undefined) throw new ApiError('missing_org_context', 'The API key has no live organization');
        return {
          status: 200,
          body: { data: { id: org.id, name: org.name, scopes: ctx.principal.scopeList, api_key_id: ctx.principal.apiKeyId } },
        };
      },
    },
  ];
}
