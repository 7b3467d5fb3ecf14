/**
 * Each protocol's randomizer against the exact law of one user's messages (chi-square at
 * stats.ts's false-failure rate; the laws are those of src/shuffledp/randomizers/).
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { MessageBoundError, PROTOCOLS, Random, correlatedMessages, flipMessages, krrMessage, krrProbabilities } from "../src/node.js";
import { FALSE_FAILURE, SeededRandom, assertFits, nbPmf, normalQuantileTwoSided, tally } from "./stats.js";

const random = new Random(new SeededRandom(7));
const USERS = 40_000;

/** Convolution of two pmfs (truncated to `cells`). */
function convolve(a: number[], b: number[], cells: number): number[] {
  const out = new Array<number>(cells).fill(0);
  for (let i = 0; i < a.length; i++) for (let j = 0; j < b.length && i + j < cells; j++) out[i + j] = (out[i + j] as number) + (a[i] as number) * (b[j] as number);
  return out;
}

function binomialPmf(n: number, p: number): number[] {
  const out: number[] = [];
  for (let k = 0; k <= n; k++) {
    let logC = 0;
    for (let i = 1; i <= k; i++) logC += Math.log(n - k + i) - Math.log(i);
    out.push(Math.exp(logC + k * Math.log(p) + (n - k) * Math.log1p(-p)));
  }
  return out;
}

/** A pmf truncated to `cells − 1` values plus the rest of the mass in the last cell. */
function closeTail(pmf: number[], cells: number): number[] {
  const head = pmf.slice(0, cells - 1);
  while (head.length < cells - 1) head.push(0);
  head.push(Math.max(0, 1 - head.reduce((a, b) => a + b, 0)));
  return head;
}

function countOf(messages: readonly number[], index: number): number {
  let c = 0;
  for (const m of messages) if (m === index) c++;
  return c;
}

describe("k-RR", () => {
  it("reports the value with probability a, each other value with probability b", () => {
    const d = 5;
    const epsilon0 = 1.3;
    const [a, b] = krrProbabilities(epsilon0, d);
    for (const value of [0, 2, 4]) {
      const counts = new Array<number>(d).fill(0);
      for (let i = 0; i < USERS; i++) {
        const m = krrMessage(value, d, epsilon0, random);
        counts[m] = (counts[m] as number) + 1;
      }
      assertFits(counts, counts.map((_, j) => (j === value ? a : b)), `krr value ${value}`);
    }
  });
});

describe("FLIP", () => {
  it("value bin: Ber(1 − q) + Bin(k, q); other bins: Ber(q) + Bin(k, q); total: Ber(1 − q) + Bin((k + 1)d − 1, q)", () => {
    const [d, q, k, value] = [4, 0.1, 3, 1];
    const users = Array.from({ length: USERS }, () => flipMessages(value, d, q, k, random));
    for (const m of users) assert.deepEqual(m, [...m].sort((x, y) => x - y));
    const fake = binomialPmf(k, q);
    const cells = 6;
    assertFits(tally(users.map((m) => countOf(m, value)), cells), closeTail(convolve([q, 1 - q], fake, cells), cells), "flip value bin");
    assertFits(tally(users.map((m) => countOf(m, 3)), cells), closeTail(convolve([1 - q, q], fake, cells), cells), "flip other bin");
    const total = convolve([q, 1 - q], binomialPmf((k + 1) * d - 1, q), 16);
    assertFits(tally(users.map((m) => m.length), 12), closeTail(total, 12), "flip messages per user");
  });
});

describe("correlated", () => {
  // Shapes of order one (m = 2) so that every part of the law is visible in 40,000 users.
  const [d, alpha, r, qf, m, value] = [3, 0.5, 2, 0.6, 2, 1];
  const users = Array.from({ length: USERS }, () => correlatedMessages(value, d, alpha, r, qf, m, random));
  const share = nbPmf(1 / m, alpha, 60);
  const flood = nbPmf(r / m, qf, 60);

  it("sorted, with exactly one more (x, +1) than noise alone gives", () => {
    for (const u of users) {
      assert.deepEqual(u, [...u].sort((x, y) => x - y));
      assert.ok(u.includes(2 * value));
    }
  });

  it("(j, +1) and (j, −1) counts: NB(1/m, α) shares plus the same NB(r/m, q) flooding (joint law)", () => {
    // P(N+ = a, N− = b) = Σ_w P(W = w) P(A = a − w) P(A′ = b − w), on a 7 × 7 grid plus the rest.
    const side = 7;
    const joint: number[] = [];
    for (let a = 0; a < side; a++) {
      for (let b = 0; b < side; b++) {
        let p = 0;
        for (let w = 0; w <= Math.min(a, b); w++) p += (flood[w] as number) * (share[a - w] as number) * (share[b - w] as number);
        joint.push(p);
      }
    }
    joint.push(1 - joint.reduce((x, y) => x + y, 0));
    for (const j of [0, 2]) {
      const counts = new Array<number>(side * side + 1).fill(0);
      for (const u of users) {
        const a = countOf(u, 2 * j);
        const b = countOf(u, 2 * j + 1);
        const cell = a < side && b < side ? a * side + b : side * side;
        counts[cell] = (counts[cell] as number) + 1;
      }
      assertFits(counts, joint, `correlated bin ${j} (N+, N-)`);
    }
    // The value's bin: the same law shifted by the value message.
    const plus = convolve(share, flood, 60);
    assertFits(tally(users.map((u) => countOf(u, 2 * value) - 1), 10), closeTail(plus, 10), "correlated value bin N+ - 1");
  });

  it("messages per user: 1 + NB(2d/m, α) + 2·NB(d·r/m, q)", () => {
    const noise = nbPmf((2 * d) / m, alpha, 200);
    const doubled = new Array<number>(200).fill(0);
    nbPmf((d * r) / m, qf, 100).forEach((p, w) => (doubled[2 * w] = p));
    const total = convolve(noise, doubled, 200);
    assertFits(tally(users.map((u) => u.length - 1), 40), closeTail(total, 40), "correlated messages per user");
  });

  it("at a real calibration's tiny shapes (m = 1000, d = 100): P((j, −1) sent) with enough users to see a 5% error", () => {
    // A task calibrated at n = 1000, d = 100, epsilon 1, delta 1e-6 (shuffledp task create).
    const [d2, a2, r2, q2, m2] = [100, 0.6342253320600151, 15.762249441942016, 0.9507356856424147, 1000];
    // (j, −1) appears iff A′_j + W_j > 0: p = 1 − (1 − α)^{1/m}(1 − q)^{r/m}. The same
    // argument as random.test.ts: N·p ≥ ((z + 3.09)/0.05)² (user, bin) cells see a 5% error in p.
    const p = -Math.expm1(Math.log1p(-a2) / m2 + (r2 / m2) * Math.log1p(-q2));
    const z = normalQuantileTwoSided(FALSE_FAILURE);
    const cells = Math.ceil(((z + 3.09) / 0.05) ** 2 / p);
    const count = Math.ceil(cells / (d2 - 1));
    let hits = 0;
    for (let i = 0; i < count; i++) {
      const sent = new Set(correlatedMessages(0, d2, a2, r2, q2, m2, random).filter((x) => x % 2 === 1 && x !== 1));
      hits += sent.size;
    }
    const n = count * (d2 - 1);
    const sd = Math.sqrt(n * p * (1 - p));
    assert.ok(Math.abs(hits - n * p) <= z * sd, `${hits} of ${n} (user, bin) cells sent (j, -1), expected ${(n * p).toFixed(0)} ± ${(z * sd).toFixed(0)}`);
  });
});

describe("augmented and the message bound", () => {
  it("an augmented client sends its value, alone", () => {
    for (let value = 0; value < 4; value++) {
      assert.deepEqual(PROTOCOLS.augmented?.randomize(value, 4, {}, random, 1), [value]);
    }
  });

  it("drawing more than max_messages_per_submission stops with MessageBoundError", () => {
    // With m = 2 and d = 50 a user draws no noise with probability (1 − α)^{d/m}(1 − q)^{dr/m}.
    assert.throws(() => correlatedMessages(0, 50, 0.5, 2, 0.6, 2, random, 1), MessageBoundError);
    assert.throws(() => flipMessages(0, 50, 0.4, 10, random, 2), MessageBoundError);
    assert.throws(() => PROTOCOLS.krr?.randomize(0, 3, { epsilon0: 1 }, random, 0), MessageBoundError);
  });
});
