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

/** A segment trie over OpenAPI-style paths (`/api/v1/assets/{asset_id}`); literal segments win over parameters. */
export class Router<T> {
  private readonly root: Node<T> = newNode();

  add(method: Method, path: string, handler: T): void {
    let node = this.root;
    for (const segment of path.split('/').slice(1)) {
      const param = /^\{(\w+)\}$/.exec(segment);
      if (param) {
        if (node.param && node.param.name !== param[1]) throw new Error(`conflicting parameter names at ${path}`);
        node.param ??= { name: param[1], node: newNode() };
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
