import YAML from 'yaml';
import { buildOpenApiDocument } from '../openapi/document.js';
import type { Route } from '../http/route.js';
import type { Services } from '../services.js';

const ops = (path: string, operationId: string, handler: Route['handler']): Route => ({
  method: 'GET',
  path,
  operationId,
  summary: operationId,
  tag: 'Operations',
  undocumented: true,
  responses: {},
  handler,
});

/** Health, readiness, metrics and the OpenAPI documents (built once from the final route table). */
export function opsRoutes(services: Services, apiRoutes: () => Route[]): Route[] {
  let json: string | undefined;
  let yaml: string | undefined;
  const document = () => {
    if (json === undefined) {
      const doc = buildOpenApiDocument(apiRoutes());
      json = JSON.stringify(doc);
      // Shared schema objects must be written out in full: aliases (&a1/*a1) trip YAML clients' alias limits.
      yaml = YAML.stringify(doc, { aliasDuplicateObjects: false });
    }
    return { json, yaml: yaml as string };
  };
  const redirect =
    (to: string): Route['handler'] =>
    () => ({ status: 301, headers: { Location: to } });
  return [
    ops('/healthz', 'healthz', () => ({ status: 200, body: { status: 'ok' } })),
    ops('/readyz', 'readyz', () => {
      const { storage, consumer } = services.readiness;
      return { status: storage && consumer ? 200 : 503, body: { status: storage && consumer ? 'ready' : 'not_ready', storage, consumer } };
    }),
    ops('/metrics', 'metrics', async () => {
      const text = services.scrapeMetrics === undefined ? services.metrics.render() : await services.scrapeMetrics();
      return { status: 200, text, contentType: 'text/plain; version=0.0.4; charset=utf-8' };
    }),
    ops('/api/openapi.json', 'openapiJson', () => ({ status: 200, text: document().json, contentType: 'application/json' })),
    ops('/api/openapi.yaml', 'openapiYaml', () => ({ status: 200, text: document().yaml, contentType: 'application/yaml' })),
    ops('/openapi.json', 'openapiJsonRedirect', redirect('/api/openapi.json')),
    ops('/openapi.yaml', 'openapiYamlRedirect', redirect('/api/openapi.yaml')),
    ...(process.env.TRACKD_BENCH_ROUTES === '1'
      ? [ops('/bench/fixed', 'benchFixed', () => ({ status: 200, body: BENCH_FIXED_BODY }))]
      : []),
  ];
}

/** The benchmarks' fixed-body ceiling (the ceiling every read scenario is compared with): a constant JSON body through the same server, port and plumbing. */
const BENCH_FIXED_BODY = { data: { id: 1, external_key: 'BENCH-FIXED', name: 'Fixed body', is_active: true } };
