/**
 * Typed state of a feature per shard (per thread): `const statements = shardState((s: Shard) => ...)`
 * then `statements(shard)` creates it on first use and returns the same value after. The state
 * lives beside the shard object, not in a bag of string keys on it, and goes with it.
 */
export function shardState<S extends object, T>(create: (shard: S) => T): (shard: S) => T {
  const values = new WeakMap<S, T>();
  return (shard) => {
    let value = values.get(shard);
    if (value === undefined) {
      value = create(shard);
      values.set(shard, value);
    }
    return value;
  };
}
