/** The served OpenAPI document with every `#/components/schemas/...` reference replaced by its schema, for tests that walk schemas. */
export function inlineRefs<T>(doc: T): T {
  const schemas = (doc as { components?: { schemas?: Record<string, unknown> } }).components?.schemas ?? {};
  const walk = (node: unknown): unknown => {
    if (Array.isArray(node)) return node.map(walk);
    if (node === null || typeof node !== 'object') return node;
    const ref = (node as { $ref?: unknown }).$ref;
    if (typeof ref === 'string' && ref.startsWith('#/components/schemas/')) return walk(schemas[ref.slice('#/components/schemas/'.length)]);
    return Object.fromEntries(Object.entries(node).map(([k, v]) => [k, walk(v)]));
  };
  return walk(doc) as T;
}
