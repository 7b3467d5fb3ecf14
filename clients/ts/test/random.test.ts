/**
 * The samplers: exactness on scripted words, then each law against its exact pmf (chi-square
 * at the false-failure rate of stats.ts), and NB at tiny shapes through P(X > 0).
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { LazyUniform, Random, negativeBinomialClusters } from "../src/node.js";
import { FALSE_FAILURE, ScriptedRandom, SeededRandom, assertFits, nbPmf, normalQuantileTwoSided, tally, withTail } from "./stats.js";

const TWO32 = 2 ** 32;

describe("exact samplers on scripted words", () => {
  it("Bernoulli(p) is the comparison of U's digits with p's binary expansion", () => {
    const draw = (p: number, words: number[]): [boolean, number] => {
      const source = new ScriptedRandom(words);
      const result = new LazyUniform(new Random(source)).lessThan(p);
      return [result, source.used];
    };
    // p = 0.75 = 0.11b: U < p iff U's first 32 digits are below 0xC0000000 (exactly).
    assert.equal(draw(0.75, [0xbfffffff])[0], true);
    assert.equal(draw(0.75, [0xc0000000])[0], false);
    // p = 2^-40: the first word must be 0, then the second below 2^24.
    assert.equal(draw(2 ** -40, [0, 2 ** 24 - 1])[0], true);
    assert.equal(draw(2 ** -40, [0, 2 ** 24])[0], false);
    assert.equal(draw(2 ** -40, [1, 0])[0], false);
    // The smallest double: 1074 binary digits, 34 words of zeros, then one below 2^30 ... 
    const tiny = Number.MIN_VALUE; // 2^-1074 = 2^-(33*32 + 18): the 34th word's digit is 2^14
    assert.equal(draw(tiny, [...new Array<number>(33).fill(0), 2 ** 14 - 1])[0], true);
    assert.equal(draw(tiny, [...new Array<number>(33).fill(0), 2 ** 14])[0], false);
    assert.equal(new Random(new ScriptedRandom([])).bernoulli(0), false);
    assert.equal(new Random(new ScriptedRandom([])).bernoulli(1), true);
    assert.throws(() => new Random().bernoulli(1.5), RangeError);
  });

  it("uniform integers reject the words above the largest multiple (no modulo bias)", () => {
    // 2^32 mod 3 = 1: the word 2^32 - 1 is rejected, the next one used.
    assert.equal(new Random(new ScriptedRandom([TWO32 - 1, 5])).uniformInt(3), 2);
    assert.equal(new Random(new ScriptedRandom([TWO32 - 2])).uniformInt(3), (TWO32 - 2) % 3);
    // Above 2^32: 53 bits from two words (21 + 32).
    assert.equal(new Random(new ScriptedRandom([0x1fffff, TWO32 - 1, 0, 7])).uniformInt(3 * 2 ** 40), 7);
    assert.throws(() => new Random().uniformInt(0), RangeError);
  });
});

describe("laws against exact pmfs", () => {
  const random = new Random(new SeededRandom(20240611));
  const N = 60_000;

  it("uniform integers", () => {
    for (const n of [2, 7, 1000]) {
      const counts = new Array<number>(n).fill(0);
      for (let i = 0; i < N; i++) {
        const x = random.uniformInt(n);
        counts[x] = (counts[x] as number) + 1;
      }
      assertFits(counts, new Array<number>(n).fill(1 / n), `uniformInt(${n})`);
    }
  });

  it("Bernoulli", () => {
    for (const p of [0.3, 1 / 3, 0.999]) {
      let ones = 0;
      for (let i = 0; i < N; i++) if (random.bernoulli(p)) ones++;
      assertFits([N - ones, ones], [1 - p, p], `bernoulli(${p})`);
    }
  });

  it("Poisson, below and above one piece (8)", () => {
    for (const mean of [0.3, 3, 20.5, 61]) {
      const cells = Math.ceil(mean + 8 * Math.sqrt(mean) + 10);
      const pmf = withTail((k) => Math.exp(-mean + k * Math.log(mean) - logFactorial(k)), cells);
      const draws = Array.from({ length: N / 2 }, () => random.poisson(mean));
      assertFits(tally(draws, cells), pmf, `poisson(${mean})`);
    }
  });

  it("Logarithmic", () => {
    for (const q of [0.3, 0.6342253320600151, 0.9507356856424147]) {
      const cells = 120;
      const pmf = withTail((k) => (k === 0 ? 0 : -Math.pow(q, k) / (k * Math.log1p(-q))), cells);
      const draws = Array.from({ length: N / 2 }, () => random.logarithmic(q));
      assertFits(tally(draws, cells), pmf, `logarithmic(${q})`);
    }
  });

  it("NB(s, q) as Poisson clusters of Logarithmic sizes", () => {
    for (const [shape, q] of [
      [0.5, 0.6],
      [3, 0.3],
      [1.5762, 0.9507356856424147],
    ] as const) {
      const cells = N / 2;
      const counts = new Array<number>(cells).fill(0);
      negativeBinomialClusters(cells, shape, q, random, (cell, size) => {
        counts[cell] = (counts[cell] as number) + size;
      });
      const bins = 200;
      const pmf = nbPmf(shape, q, bins - 1);
      pmf.push(1 - pmf.reduce((a, b) => a + b, 0));
      assertFits(tally(counts, bins), pmf, `NB(${shape}, ${q})`);
    }
  });

  it("NB at tiny shapes: P(X > 0) = 1 − (1 − q)^s, with enough cells to see a 5% error in s", () => {
    // X > 0 in a cell is Bernoulli(p), p = 1 − (1 − q)^s ≈ s·(−ln(1 − q)). A shape off by 5%
    // moves p by about 5%. With z the two-sided normal quantile at FALSE_FAILURE and
    // z_β = 3.09 (power 1 − 1e-3), N·p ≥ ((z + z_β)/0.05)² cells detect it: ~25,500 cells
    // with X > 0, i.e. N ≈ 25 million cells at s = 1e-3 (drawn as ~25,000 clusters).
    const z = normalQuantileTwoSided(FALSE_FAILURE);
    for (const [shape, q] of [
      [1 / 1000, 0.6342253320600151], // a correlated user's NB(1/m, α) share at m = 1000
      [15.762249441942016 / 1000 / 100, 0.9507356856424147], // its flooding share, r/m, shrunk 100-fold
    ] as const) {
      const p = -Math.expm1(shape * Math.log1p(-q));
      const cells = Math.ceil(((z + 3.09) / 0.05) ** 2 / p);
      const hit = new Set<number>();
      negativeBinomialClusters(cells, shape, q, random, (cell) => hit.add(cell));
      const sd = Math.sqrt(cells * p * (1 - p));
      assert.ok(
        Math.abs(hit.size - cells * p) <= z * sd,
        `NB(${shape}, ${q}): ${hit.size} of ${cells} cells > 0, expected ${(cells * p).toFixed(0)} ± ${(z * sd).toFixed(0)}`,
      );
      // The alternative a 5% error gives lies beyond the acceptance band by z_β of its sd.
      assert.ok(cells * p * 0.05 >= (z + 3.09) * sd * 0.999);
    }
  });
});

function logFactorial(k: number): number {
  let s = 0;
  for (let i = 2; i <= k; i++) s += Math.log(i);
  return s;
}
