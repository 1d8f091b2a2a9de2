/** A seeded pseudo-random source in [0, 1) (a linear congruential generator): a failing program replays exactly. */
export function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}
