export type Method = 'GET' | 'POST' | 'PATCH' | 'DELETE';

interface Node<T> {
  literal: Map<string, Node<T>>;
  param: { name: string; node: Node<T> } | undefined;
  methods: Map<Method, T>;
}

export interface Match<T> {
  handlers: Map<Method, T>;
  params: Record<string, string>;
}

const newNode = <T>(): Node<T> => ({ literal: new Map(), param: undefined, methods: new Map() });

/**
 * A segment trie over OpenAPI-style paths (`/api/v1/assets/{asset_id}`); literal segments win over parameters.
 *
 * Hand-written rather than uWS's own routing or find-my-way: the contract needs one answer for a
 * path that exists under another method (405 with `Allow`) and for one that does not (404), each in
 * the error envelope, and the route pattern for logs and metrics labels; uWS only matches or falls
 * through, and this trie is about sixty lines with no dependency on the hot path.
 */
export class Router<T> {
  private readonly root: Node<T> = newNode();

  add(method: Method, path: string, handler: T): void {
    let node = this.root;
    for (const segment of path.split('/').slice(1)) {
      const param = /^\{(\w+)\}$/.exec(segment);
      if (param) {
        const name = param[1]!; // the group is not optional
        if (node.param && node.param.name !== name) throw new Error(`conflicting parameter names at ${path}`);
        node.param ??= { name, node: newNode() };
        node = node.param.node;
      } else {
        let next = node.literal.get(segment);
        if (!next) node.literal.set(segment, (next = newNode()));
        node = next;
      }
    }
    if (node.methods.has(method)) throw new Error(`duplicate route ${method} ${path}`);
    node.methods.set(method, handler);
  }

  match(path: string): Match<T> | undefined {
    let node: Node<T> | undefined = this.root;
    let params: Record<string, string> | undefined;
    let start = 1;
    while (node !== undefined) {
      let end = path.indexOf('/', start);
      if (end === -1) end = path.length;
      const segment = path.slice(start, end);
      const literal: Node<T> | undefined = node.literal.get(segment);
      if (literal !== undefined) node = literal;
      else if (node.param !== undefined && segment !== '') {
        (params ??= {})[node.param.name] = segment;
        node = node.param.node;
      } else return undefined;
      if (end === path.length) break;
      start = end + 1;
    }
    if (node === undefined || node.methods.size === 0) return undefined;
    return { handlers: node.methods, params: params ?? {} };
  }
}
