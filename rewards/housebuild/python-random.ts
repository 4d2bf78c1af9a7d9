/**
 * CPython's `random.Random` (MT19937 with `init_by_array` seeding) for the draws the HouseBuild
 * reference makes: `random.Random(seed).randint(low, high)` fixes the spider attacks of a run, and
 * the vectors record the results by seed, so the generator must be Python's, bit for bit.
 */

const N = 624;
const M = 397;
const MATRIX_A = 0x9908b0df;
const UPPER_MASK = 0x80000000;
const LOWER_MASK = 0x7fffffff;

/** A `random.Random` with CPython 3.11 semantics for integer seeds. */
export class PythonRandom {
  private readonly mt = new Uint32Array(N);
  private mti = N + 1;

  /** Same as `random.Random(seed)` for an int seed (negative seeds use their absolute value). */
  constructor(seed: number | bigint) {
    this.seed(seed);
  }

  /** `random.seed(seed)` for an int: the 32-bit words of |seed|, least significant first. */
  seed(seed: number | bigint): void {
    if (typeof seed === 'number' && !Number.isSafeInteger(seed)) {
      throw new Error(`PythonRandom: seed must be an integer, got ${seed}`);
    }
    let n = BigInt(seed);
    if (n < 0n) n = -n;
    const key: number[] = [];
    while (n > 0n) {
      key.push(Number(n & 0xffffffffn));
      n >>= 32n;
    }
    if (key.length === 0) key.push(0);
    this.initByArray(key);
  }

  private initGenrand(s: number): void {
    const mt = this.mt;
    mt[0] = s >>> 0;
    for (let i = 1; i < N; i++) {
      const prev = mt[i - 1] ^ (mt[i - 1] >>> 30);
      mt[i] = (Math.imul(1812433253, prev) + i) >>> 0;
    }
    this.mti = N;
  }

  private initByArray(key: readonly number[]): void {
    const mt = this.mt;
    this.initGenrand(19650218);
    let i = 1;
    let j = 0;
    for (let k = Math.max(N, key.length); k > 0; k--) {
      const prev = mt[i - 1] ^ (mt[i - 1] >>> 30);
      mt[i] = ((mt[i] ^ Math.imul(prev, 1664525)) + key[j] + j) >>> 0;
      i++;
      j++;
      if (i >= N) {
        mt[0] = mt[N - 1];
        i = 1;
      }
      if (j >= key.length) j = 0;
    }
    for (let k = N - 1; k > 0; k--) {
      const prev = mt[i - 1] ^ (mt[i - 1] >>> 30);
      mt[i] = ((mt[i] ^ Math.imul(prev, 1566083941)) - i) >>> 0;
      i++;
      if (i >= N) {
        mt[0] = mt[N - 1];
        i = 1;
      }
    }
    mt[0] = 0x80000000;
  }

  /** One 32-bit output of MT19937 (`genrand_uint32`). */
  nextUint32(): number {
    const mt = this.mt;
    if (this.mti >= N) {
      let kk = 0;
      for (; kk < N - M; kk++) {
        const y = (mt[kk] & UPPER_MASK) | (mt[kk + 1] & LOWER_MASK);
        mt[kk] = mt[kk + M] ^ (y >>> 1) ^ (y & 1 ? MATRIX_A : 0);
      }
      for (; kk < N - 1; kk++) {
        const y = (mt[kk] & UPPER_MASK) | (mt[kk + 1] & LOWER_MASK);
        mt[kk] = mt[kk + (M - N)] ^ (y >>> 1) ^ (y & 1 ? MATRIX_A : 0);
      }
      const y = (mt[N - 1] & UPPER_MASK) | (mt[0] & LOWER_MASK);
      mt[N - 1] = mt[M - 1] ^ (y >>> 1) ^ (y & 1 ? MATRIX_A : 0);
      this.mti = 0;
    }
    let y = mt[this.mti++];
    y ^= y >>> 11;
    y ^= (y << 7) & 0x9d2c5680;
    y ^= (y << 15) & 0xefc60000;
    y ^= y >>> 18;
    return y >>> 0;
  }

  /** `random.random()`: 53-bit float in [0, 1). */
  random(): number {
    const a = this.nextUint32() >>> 5;
    const b = this.nextUint32() >>> 6;
    return (a * 67108864.0 + b) * (1.0 / 9007199254740992.0);
  }

  /** `random.getrandbits(k)` for 0 ≤ k ≤ 53 (words are filled least significant first). */
  getrandbits(k: number): number {
    if (!Number.isInteger(k) || k < 0 || k > 53) throw new Error(`getrandbits: k must be in 0..53, got ${k}`);
    if (k === 0) return 0;
    if (k <= 32) return this.nextUint32() >>> (32 - k);
    const low = this.nextUint32();
    const high = this.nextUint32() >>> (64 - k);
    return high * 4294967296 + low;
  }

  /** `_randbelow(n)`: rejection sampling on `n.bit_length()` random bits. */
  randbelow(n: number): number {
    if (!Number.isSafeInteger(n) || n <= 0) throw new Error(`randbelow: n must be a positive integer, got ${n}`);
    const k = n.toString(2).length;
    let r = this.getrandbits(k);
    while (r >= n) r = this.getrandbits(k);
    return r;
  }

  /** `random.randrange(start, stop)` (step 1). */
  randrange(start: number, stop: number): number {
    const width = stop - start;
    if (width <= 0) throw new Error(`empty range in randrange(${start}, ${stop})`);
    return start + this.randbelow(width);
  }

  /** `random.randint(a, b)`: an integer in [a, b], both included. */
  randint(a: number, b: number): number {
    return this.randrange(a, b + 1);
  }

  /** `random.choice(seq)`. */
  choice<T>(seq: readonly T[]): T {
    if (seq.length === 0) throw new Error('cannot choose from an empty sequence');
    return seq[this.randbelow(seq.length)];
  }
}
