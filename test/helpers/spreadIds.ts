/** `n` distinct asset ids spread over the 32-bit range (consecutive ids would land in distinct slots of a hashed table: no probing to test). */
export function spreadIds(n: number, seed: number): number[] {
  const ids = new Set<number>();
  let x = seed;
  while (ids.size < n) {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    ids.add((x % 2_147_483_646) + 1);
  }
  return [...ids];
}
