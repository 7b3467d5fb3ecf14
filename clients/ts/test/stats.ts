/**
 * Statistics for the law tests: chi-square tests whose threshold is the chi-square law's
 * quantile at a stated false-failure rate, for the degrees of freedom of the (pooled) table.
 */
import assert from "node:assert/strict";

/** The false-failure rate of every statistical test of this suite (each fails this rarely when the law is right). */
export const FALSE_FAILURE = 1e-6;

/** ln Γ(x), x > 0 (Lanczos, g = 7, n = 9; relative error ~1e-15). */
export function lnGamma(x: number): number {
  const c = [
    0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313, -176.61502916214059,
    12.507343278686905, -0.13857109526572012, 9.9843695780195716e-6, 1.5056327351493116e-7,
  ];
  if (x < 0.5) return Math.log(Math.PI / Math.sin(Math.PI * x)) - lnGamma(1 - x);
  x -= 1;
  let a = c[0] as number;
  const t = x + 7.5;
  for (let i = 1; i < 9; i++) a += (c[i] as number) / (x + i);
  return 0.5 * Math.log(2 * Math.PI) + (x + 0.5) * Math.log(t) - t + Math.log(a);
}

/** The regularized upper incomplete gamma Q(a, x) (series below a + 1, continued fraction above). */
export function gammaQ(a: number, x: number): number {
  if (x <= 0) return 1;
  const lead = -x + a * Math.log(x) - lnGamma(a);
  if (x < a + 1) {
    let sum = 1 / a;
    let term = sum;
    for (let n = 1; n < 10000; n++) {
      term *= x / (a + n);
      sum += term;
      if (Math.abs(term) < Math.abs(sum) * 1e-16) break;
    }
    return 1 - sum * Math.exp(lead);
  }
  let b = x + 1 - a;
  let c = 1 / 1e-300;
  let d = 1 / b;
  let h = d;
  for (let i = 1; i < 10000; i++) {
    const an = -i * (i - a);
    b += 2;
    d = an * d + b;
    if (Math.abs(d) < 1e-300) d = 1e-300;
    c = b + an / c;
    if (Math.abs(c) < 1e-300) c = 1e-300;
    d = 1 / d;
    const delta = d * c;
    h *= delta;
    if (Math.abs(delta - 1) < 1e-16) break;
  }
  return Math.exp(lead) * h;
}

/** P(χ²_df > x). */
export function chiSquareSurvival(x: number, df: number): number {
  return gammaQ(df / 2, x / 2);
}

/** The upper-tail quantile of χ²_df at probability p (bisection on the survival function). */
export function chiSquareQuantile(p: number, df: number): number {
  let lo = 0;
  let hi = df + 10 * Math.sqrt(2 * df) + 100;
  while (chiSquareSurvival(hi, df) > p) hi *= 2;
  for (let i = 0; i < 200; i++) {
    const mid = (lo + hi) / 2;
    if (chiSquareSurvival(mid, df) > p) lo = mid;
    else hi = mid;
  }
  return hi;
}

/**
 * Pool cells (in order) so that every pooled cell expects at least `minExpected` draws:
 * the chi-square approximation's usual condition. Returns the pooled observed and expected.
 */
export function pool(observed: number[], expected: number[], minExpected = 5): { observed: number[]; expected: number[] } {
  const obs: number[] = [];
  const exp: number[] = [];
  let o = 0;
  let e = 0;
  for (let i = 0; i < observed.length; i++) {
    o += observed[i] as number;
    e += expected[i] as number;
    if (e >= minExpected) {
      obs.push(o);
      exp.push(e);
      o = 0;
      e = 0;
    }
  }
  if (e > 0 || o > 0) {
    if (exp.length === 0) {
      obs.push(o);
      exp.push(e);
    } else {
      obs[obs.length - 1] = (obs[obs.length - 1] as number) + o;
      exp[exp.length - 1] = (exp[exp.length - 1] as number) + e;
    }
  }
  return { observed: obs, expected: exp };
}

/**
 * Chi-square goodness of fit of `counts` (draws per outcome, the last cell may be "the rest")
 * against the exact `pmf` (same length; the last cell carrying the rest of the mass).
 * Asserts the statistic is below χ²_{df}'s (1 − FALSE_FAILURE) quantile, df = cells − 1.
 */
export function assertFits(counts: number[], pmf: number[], what: string): { statistic: number; threshold: number; df: number } {
  assert.equal(counts.length, pmf.length);
  const draws = counts.reduce((a, b) => a + b, 0);
  const total = pmf.reduce((a, b) => a + b, 0);
  assert.ok(Math.abs(total - 1) < 1e-9, `${what}: the pmf sums to ${total}`);
  const { observed, expected } = pool(counts, pmf.map((p) => p * draws));
  const statistic = observed.reduce((s, o, i) => s + (o - (expected[i] as number)) ** 2 / (expected[i] as number), 0);
  const df = observed.length - 1;
  assert.ok(df >= 1, `${what}: too few cells after pooling`);
  const threshold = chiSquareQuantile(FALSE_FAILURE, df);
  assert.ok(
    statistic <= threshold,
    `${what}: chi-square ${statistic.toFixed(2)} > ${threshold.toFixed(2)} (df ${df}, false-failure rate ${FALSE_FAILURE}, ${draws} draws)`,
  );
  return { statistic, threshold, df };
}

/** Counts of each value of `draws` in [0, cells − 1), the last cell counting every value ≥ cells − 1. */
export function tally(draws: Iterable<number>, cells: number): number[] {
  const out = new Array<number>(cells).fill(0);
  for (const x of draws) out[Math.min(x, cells - 1)] = (out[Math.min(x, cells - 1)] as number) + 1;
  return out;
}

/** A pmf over [0, cells − 1) with the last cell holding the rest of the mass (1 − the others). */
export function withTail(pmf: (k: number) => number, cells: number): number[] {
  const out: number[] = [];
  let sum = 0;
  for (let k = 0; k < cells - 1; k++) {
    const p = pmf(k);
    out.push(p);
    sum += p;
  }
  out.push(Math.max(0, 1 - sum));
  return out;
}

/** Two-sided standard normal quantile z with P(|Z| > z) = p (bisection on erfc). */
export function normalQuantileTwoSided(p: number): number {
  let lo = 0;
  let hi = 40;
  for (let i = 0; i < 200; i++) {
    const mid = (lo + hi) / 2;
    if (erfc(mid / Math.SQRT2) > p) lo = mid;
    else hi = mid;
  }
  return hi;
}

/** erfc(x) for x ≥ 0 (through Q(1/2, x²)). */
export function erfc(x: number): number {
  return gammaQ(0.5, x * x);
}

/**
 * A seeded source of 32-bit words for tests (xoshiro128**): reproducible, NOT for privacy.
 */
export class SeededRandom {
  private s: Uint32Array;
  constructor(seed: number) {
    this.s = new Uint32Array(4);
    let z = seed >>> 0;
    for (let i = 0; i < 4; i++) {
      z = (z + 0x9e3779b9) >>> 0; // splitmix32
      let t = z;
      t = Math.imul(t ^ (t >>> 16), 0x21f0aaad);
      t = Math.imul(t ^ (t >>> 15), 0x735a2d97);
      this.s[i] = (t ^ (t >>> 15)) >>> 0;
    }
  }
  fill(words: Uint32Array): void {
    const s = this.s;
    for (let i = 0; i < words.length; i++) {
      const result = Math.imul(rotl(Math.imul(s[1] as number, 5), 7), 9) >>> 0;
      const t = ((s[1] as number) << 9) >>> 0;
      s[2] = (s[2] as number) ^ (s[0] as number);
      s[3] = (s[3] as number) ^ (s[1] as number);
      s[1] = (s[1] as number) ^ (s[2] as number);
      s[0] = (s[0] as number) ^ (s[3] as number);
      s[2] = (s[2] as number) ^ t;
      s[3] = rotl(s[3] as number, 11);
      words[i] = result;
    }
  }
}

function rotl(x: number, k: number): number {
  return ((x << k) | (x >>> (32 - k))) >>> 0;
}

/** A source that returns the given words, then fails (for exactness tests). */
export class ScriptedRandom {
  private at = 0;
  constructor(private readonly words: number[]) {}
  fill(out: Uint32Array): void {
    for (let i = 0; i < out.length; i++) {
      out[i] = this.at < this.words.length ? (this.words[this.at] as number) : 0xdeadbeef;
      this.at++;
    }
  }
  get used(): number {
    return this.at;
  }
}

/** NB(s, q)'s pmf: P(0) = (1 − q)^s, P(k + 1) = P(k)·q·(k + s)/(k + 1). */
export function nbPmf(shape: number, q: number, cells: number): number[] {
  const out: number[] = [];
  let p = Math.pow(1 - q, shape);
  for (let k = 0; k < cells; k++) {
    out.push(p);
    p *= (q * (k + shape)) / (k + 1);
  }
  return out;
}

