/**
 * Randomness: uniform 32-bit words from `crypto.getRandomValues`, and exact integer samplers.
 *
 * Every draw of the client goes through a {@link RandomSource}, by default
 * {@link CryptoRandom} (the OS CSPRNG behind WebCrypto, in browsers and Node alike). Tests
 * inside JS inject a seeded source; nothing else ever does.
 *
 * Exactness. Uniform integers use rejection (no modulo bias). A uniform real U in [0, 1) is
 * never rounded to a double: {@link LazyUniform} draws its binary digits 32 at a time, only
 * as far as a comparison needs, so `U < p` holds with probability exactly p for every double
 * p (p's binary expansion is finite). Bernoulli(p) is that comparison; Poisson and
 * Logarithmic are inversions of their CDFs by one lazy U, so their only error is the CDF's
 * floating-point rounding (relative ~1e-16 per term), never an underflow: e^{-μ} is only
 * ever taken for μ ≤ {@link POISSON_PIECE}, larger means being sums of independent pieces.
 */

/** A source of independent uniform 32-bit words. */
export interface RandomSource {
  /** Fill `words` with independent uniform integers in [0, 2^32). */
  fill(words: Uint32Array): void;
}

/** The OS CSPRNG through `crypto.getRandomValues` (at most 65,536 bytes a call). */
export class CryptoRandom implements RandomSource {
  fill(words: Uint32Array): void {
    const crypto = globalThis.crypto;
    if (crypto === undefined || typeof crypto.getRandomValues !== "function") {
      throw new Error("crypto.getRandomValues is not available in this runtime");
    }
    for (let start = 0; start < words.length; start += 16384) {
      crypto.getRandomValues(words.subarray(start, Math.min(words.length, start + 16384)));
    }
  }
}

const TWO32 = 4294967296;

/** Buffered 32-bit words of a {@link RandomSource}, and the samplers built on them. */
export class Random {
  readonly #buffer = new Uint32Array(1024);
  #next = this.#buffer.length;

  constructor(readonly source: RandomSource = new CryptoRandom()) {}

  /** One uniform word in [0, 2^32). */
  word(): number {
    if (this.#next === this.#buffer.length) {
      this.source.fill(this.#buffer);
      this.#next = 0;
    }
    return this.#buffer[this.#next++] as number;
  }

  /** A uniform integer in [0, n), n an integer in [1, 2^53], by rejection (no modulo bias). */
  uniformInt(n: number): number {
    if (!Number.isInteger(n) || n < 1 || n > 2 ** 53) {
      throw new RangeError(`uniformInt needs an integer n in [1, 2^53], got ${n}`);
    }
    if (n <= TWO32) {
      const limit = TWO32 - (TWO32 % n); // the largest multiple of n not above 2^32
      for (;;) {
        const w = this.word();
        if (w < limit) return w % n;
      }
    }
    const span = 2 ** 53;
    const limit = span - (span % n);
    for (;;) {
      const x = (this.word() & 0x1fffff) * TWO32 + this.word(); // 53 uniform bits
      if (x < limit) return x % n;
    }
  }

  /** True with probability exactly p (a double in [0, 1]; outside it is refused). */
  bernoulli(p: number): boolean {
    if (!(p >= 0 && p <= 1)) throw new RangeError(`bernoulli needs p in [0, 1], got ${p}`);
    return new LazyUniform(this).lessThan(p);
  }

  /** Poisson(μ), μ finite ≥ 0: a sum of inversions of pieces of at most POISSON_PIECE. */
  poisson(mean: number): number {
    if (!(mean >= 0 && Number.isFinite(mean))) throw new RangeError(`poisson needs a finite mean >= 0, got ${mean}`);
    let rest = mean;
    let total = 0;
    while (rest > 0) {
      const piece = Math.min(rest, POISSON_PIECE);
      total += this.#poissonPiece(piece);
      rest -= piece; // exact: rest - 8 for rest >= 8 is a multiple of rest's ulp
    }
    return total;
  }

  #poissonPiece(mean: number): number {
    const u = new LazyUniform(this);
    let p = Math.exp(-mean); // >= e^-8: no underflow
    let cdf = p;
    let k = 0;
    while (!u.lessThan(cdf)) {
      k += 1;
      p *= mean / k;
      const next = cdf + p;
      if (next === cdf) return k; // the rest of the mass is below the CDF's rounding
      cdf = next;
    }
    return k;
  }

  /** Logarithmic(q), q in (0, 1): P(k) = −q^k / (k ln(1 − q)), k ≥ 1 (numpy's logseries). */
  logarithmic(q: number): number {
    if (!(q > 0 && q < 1)) throw new RangeError(`logarithmic needs q in (0, 1), got ${q}`);
    const u = new LazyUniform(this);
    let p = -q / Math.log1p(-q);
    let cdf = p;
    let k = 1;
    while (!u.lessThan(cdf)) {
      p *= (q * k) / (k + 1);
      k += 1;
      const next = cdf + p;
      if (next === cdf) return k; // the rest of the mass is below the CDF's rounding
      cdf = next;
    }
    return k;
  }

  /** A uniform double in [0, 1) with 53 random bits (for retry jitter only). */
  unitInterval(): number {
    return ((this.word() & 0x1fffff) * TWO32 + this.word()) / 2 ** 53;
  }
}

/** The largest mean of one inversion in {@link Random.poisson} (e^{−8} ≈ 3.4e-4). */
export const POISSON_PIECE = 8;

/**
 * A uniform real U in [0, 1) whose binary digits are drawn only as comparisons need them
 * (32 at a time): `lessThan(x)` is exactly the event U < x for any double x, and repeated
 * comparisons with the same U are consistent (an inversion compares one U with a rising CDF).
 */
export class LazyUniform {
  readonly #words: number[] = [];
  readonly #random: Random;

  constructor(random: Random) {
    this.#random = random;
  }

  lessThan(x: number): boolean {
    if (x <= 0) return false;
    if (x >= 1) return true;
    // x = Σ_i x_i 2^{-32 i} with 32-bit digits x_i: multiplying by 2^32 is exact, and after
    // at most 35 digits the rest is 0 (a double's expansion ends by 2^-1074).
    let rest = x;
    for (let i = 0; ; i++) {
      rest *= TWO32;
      const digit = Math.floor(rest);
      rest -= digit;
      if (i === this.#words.length) this.#words.push(this.#random.word());
      const w = this.#words[i] as number;
      if (w !== digit) return w < digit;
      if (rest === 0) return false; // U's digits so far equal x's, all of x's: U ≥ x
    }
  }
}
