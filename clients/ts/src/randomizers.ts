/**
 * One user's messages for every protocol the services serve, as src/shuffledp/randomizers/
 * draws them (same law, not the same bytes), and what a message's index means.
 *
 * - flip (bitflip.py, Alg. 1-2 of the FLIP paper): the one-hot vector of the value and
 *   `fake_users` all-zero vectors of d bits, every bit flipped with probability q; one
 *   message (the bin index) per set bit.
 * - krr (krr.py): the value with probability a = 1/(1 + (d − 1)e^{−ε₀}), else a uniform
 *   other value.
 * - correlated (correlated.py): (x, +1), and per bin j NB(1/m, α) copies of (j, +1),
 *   NB(1/m, α) of (j, −1) and NB(r/m, q) pairs of both; over the d bins each NB is a
 *   Poisson(d·λ) number of clusters, λ = −shape·ln(1 − q), each in a uniform bin with a
 *   Logarithmic(q) size. A message (j, s) is the index 2j + (1 if s = −1).
 * - augmented (the client's one plain message): the value.
 *
 * A user's messages are returned sorted (service/client.py sorts them: their order says
 * nothing about which was the value).
 */
import { MessageBoundError } from "./errors.js";
import type { Random } from "./random.js";

/** What a task's `parameters` hold, read by {@link PROTOCOLS}' randomizers. */
export type Parameters = Readonly<Record<string, unknown>>;

/** A protocol as a client runs it. */
export interface ClientProtocol {
  /** Distinct message indices over d bins (correlated: 2d, (bin, sign) pairs). */
  messageDomainSize(domainSize: number): number;
  /**
   * One user's message indices, sorted. Drawing stops with {@link MessageBoundError} as soon
   * as more than `maxMessages` are drawn (the user then does not submit).
   */
  randomize(value: number, domainSize: number, parameters: Parameters, random: Random, maxMessages: number): number[];
}

function num(parameters: Parameters, name: string): number {
  const value = parameters[name];
  if (typeof value !== "number") throw new TypeError(`parameter ${name} must be a number`);
  return value;
}

class Messages {
  readonly indices: number[] = [];
  readonly #max: number;

  constructor(max: number) {
    this.#max = max;
  }

  add(index: number, copies = 1): void {
    if (this.indices.length + copies > this.#max) {
      throw new MessageBoundError(
        `the randomizer drew more than the task's bound of ${this.#max} messages; not submitting ` +
          "(this happens with probability at most 1e-30 and does not depend on the value)",
      );
    }
    for (let i = 0; i < copies; i++) this.indices.push(index);
  }

  sorted(): number[] {
    return this.indices.sort((a, b) => a - b);
  }
}

/** FLIP: Ber(1 − q) for the value's bit, Ber(q) for each other bit and each fake user's bit. */
export function flipMessages(value: number, d: number, q: number, fakeUsers: number, random: Random, max = Infinity): number[] {
  const out = new Messages(max);
  for (let j = 0; j < d; j++) {
    const bit = j === value ? !random.bernoulli(q) : random.bernoulli(q);
    if (bit) out.add(j);
  }
  for (let f = 0; f < fakeUsers; f++) {
    for (let j = 0; j < d; j++) if (random.bernoulli(q)) out.add(j);
  }
  return out.sorted();
}

/** k-RR's probabilities (a, b) of the true value and of each other one, as krr_probabilities. */
export function krrProbabilities(epsilon0: number, k: number): [number, number] {
  const shrink = Math.exp(-epsilon0);
  const denom = 1 + (k - 1) * shrink;
  return [1 / denom, shrink / denom];
}

/** k-RR: the value with probability a, else a uniform one of the d − 1 others. */
export function krrMessage(value: number, d: number, epsilon0: number, random: Random): number {
  const [keep] = krrProbabilities(epsilon0, d);
  if (random.bernoulli(keep)) return value;
  const shift = random.uniformInt(d - 1);
  return shift + (shift >= value ? 1 : 0);
}

/**
 * `cells` i.i.d. NB(shape, q) counts as clusters (negative_binomial_clusters): a
 * Poisson(cells·λ) number of clusters, λ = −shape·ln(1 − q), each with a uniform cell and a
 * Logarithmic(q) size. `visit(cell, size)` is called per cluster.
 */
export function negativeBinomialClusters(
  cells: number,
  shape: number,
  q: number,
  random: Random,
  visit: (cell: number, size: number) => void,
): void {
  if (!(shape >= 0 && Number.isFinite(shape))) throw new RangeError(`shape must be a finite number >= 0, got ${shape}`);
  if (!(q >= 0 && q < 1)) throw new RangeError(`q must be in [0, 1), got ${q}`);
  if (cells === 0 || shape === 0 || q === 0) return;
  const rate = -shape * Math.log1p(-q);
  const total = random.poisson(cells * rate);
  for (let i = 0; i < total; i++) visit(random.uniformInt(cells), random.logarithmic(q));
}

/** The correlated protocol's messages of one user (indices 2·bin + (sign == −1)). */
export function correlatedMessages(
  value: number,
  d: number,
  alpha: number,
  floodR: number,
  floodQ: number,
  minHonest: number,
  random: Random,
  max = Infinity,
): number[] {
  const out = new Messages(max);
  out.add(2 * value);
  const shareShape = 1 / minHonest;
  for (const offset of [0, 1]) {
    negativeBinomialClusters(d, shareShape, alpha, random, (cell, size) => out.add(2 * cell + offset, size));
  }
  negativeBinomialClusters(d, floodR / minHonest, floodQ, random, (cell, size) => {
    out.add(2 * cell, size);
    out.add(2 * cell + 1, size);
  });
  return out.sorted();
}

/**
 * The protocols this client runs, by the name a task's `protocol` gives. A name the task
 * schema allows but this table lacks is refused as unsupported (a test checks they agree).
 */
export const PROTOCOLS: Readonly<Record<string, ClientProtocol>> = {
  flip: {
    messageDomainSize: (d) => d,
    randomize: (value, d, p, random, max) => flipMessages(value, d, num(p, "q"), num(p, "fake_users"), random, max),
  },
  krr: {
    messageDomainSize: (d) => d,
    randomize: (value, d, p, random, max) => {
      if (max < 1) throw new MessageBoundError("the task allows no message per submission");
      return [krrMessage(value, d, num(p, "epsilon0"), random)];
    },
  },
  correlated: {
    messageDomainSize: (d) => 2 * d,
    randomize: (value, d, p, random, max) =>
      correlatedMessages(value, d, num(p, "alpha"), num(p, "flood_r"), num(p, "flood_q"), num(p, "min_honest"), random, max),
  },
  augmented: {
    messageDomainSize: (d) => d,
    randomize: (value, _d, _p, _random, max) => {
      if (max < 1) throw new MessageBoundError("the task allows no message per submission");
      return [value];
    },
  },
};
