/**
 * Value heads: small networks that map a final-norm hidden state h [H] to one scalar value.
 *
 * Built in: `linear` (h → 1) and `mlp` (h → d → tanh → 1), both initialised N(0, 0.02) with
 * zero biases (CoMLRL's `ValueHead`). Users add their own kinds with {@link registerCriticHead}.
 * Weights use the Hugging Face / torch `nn.Linear` layout ([out, in]) so a saved head reads
 * naturally next to a checkpoint.
 *
 * Numeric m_t (config `critic_global_features`): a head built with `featureSize` F > 0 reads
 * [h; f], the F global features concatenated after h, so its first layer's weight is
 * [out, H + F]. The F feature columns start at zero: a head with features computes what the
 * featureless head of the same seed computes until its first step (the seeded draws are the same),
 * and the gradient reaches them from that step on.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { linear } from '../backend/ops.js';
import { readSafetensors, writeSafetensors, type NamedTensor } from '../model/safetensors.js';
import type { Rng } from '../util/rng.js';

/** Standard deviation of the normal initialisation of every head weight (CoMLRL's 0.02). */
export const HEAD_INIT_STD = 0.02;

/** File names a saved head uses inside its directory. */
export const HEAD_WEIGHTS_FILE = 'value_head.safetensors';
export const HEAD_CONFIG_FILE = 'value_head.json';

/** What a head kind is built from: its registered name plus kind-specific options. */
export interface CriticHeadSpec {
  /** Registered kind: `linear`, `mlp`, or a name passed to {@link registerCriticHead}. */
  type: string;
  /** Width of the hidden layer for kinds that have one (`mlp`). */
  hiddenDim?: number;
  /** Extra options for user kinds (JSON-serializable: it is saved with the weights). */
  options?: Record<string, unknown>;
}

/** A value head: [N, hidden] (and [N, featureSize] global features) → [N]. Owns its variables. */
export interface CriticHead {
  /** The spec it was built from (saved beside the weights). */
  readonly spec: CriticHeadSpec;
  /** Input width (the backbone's hidden size). */
  readonly inputSize: number;
  /** Width of the numeric m_t it reads beside h (saved with the head); absent or 0: none. */
  readonly featureSize?: number;
  /**
   * Values for a batch of hidden states; differentiable w.r.t. the head's variables, `h` and
   * `features`. `features` [N, featureSize] is required when `featureSize` > 0, refused otherwise.
   */
  apply(h: tf.Tensor2D, features?: tf.Tensor2D | null): tf.Tensor1D;
  /** Trainable variables, in the order of {@link CriticHead.weightNames}. */
  trainableVariables(): tf.Variable[];
  /** Tensor names used when saving, aligned with {@link CriticHead.trainableVariables}. */
  weightNames(): string[];
  /** Frees the variables. */
  dispose(): void;
}

/**
 * Builds a head of one kind. `rng` is the seeded init stream; `featureSize` the width of the
 * global features it reads beside h (0: none). A kind that does not read features may ignore it:
 * {@link createCriticHead} then refuses it for a feature-reading critic.
 */
export type CriticHeadFactory = (inputSize: number, spec: CriticHeadSpec, rng: Rng, featureSize: number) => CriticHead;

/** A [rows, cols] variable drawn from N(0, std²) with the given stream. */
export function normalVariable(rows: number, cols: number, rng: Rng, name: string, std = HEAD_INIT_STD): tf.Variable {
  const data = new Float32Array(rows * cols);
  for (let i = 0; i < data.length; i++) data[i] = rng.normal() * std;
  return ownedVariable(tf.tensor2d(data, [rows, cols]), name);
}

// tf.variable shares the initial tensor's data but leaves that tensor alive; free it here so that
// disposing the variable frees everything.
function ownedVariable(init: tf.Tensor, name: string): tf.Variable {
  const v = tf.variable(init, true, name);
  init.dispose();
  return v;
}

let headCounter = 0;
function uniqueName(base: string): string {
  headCounter += 1;
  return `comlrl_head_${headCounter}_${base}`;
}

function zerosVariable(n: number, name: string): tf.Variable {
  return ownedVariable(tf.zeros([n]), name);
}

function assertWidth(kind: string, expected: number, h: tf.Tensor): void {
  if (h.rank !== 2 || h.shape[1] !== expected) {
    throw new Error(`${kind} value head: expected hidden states [N, ${expected}], got [${h.shape.join(', ')}]`);
  }
}

/**
 * The head's input [h; f]: h alone without features, else the F features concatenated after it.
 * Checks that features come exactly when the head reads them, with F columns and h's rows.
 */
function headInput(kind: string, featureSize: number, h: tf.Tensor2D, features: tf.Tensor2D | null | undefined): tf.Tensor2D {
  if (featureSize === 0) {
    if (features) throw new Error(`${kind} value head: given global features [${features.shape.join(', ')}] but built without them (featureSize 0)`);
    return h;
  }
  if (!features) throw new Error(`${kind} value head: reads ${featureSize} global features beside the hidden state, none given`);
  if (features.rank !== 2 || features.shape[0] !== h.shape[0] || features.shape[1] !== featureSize) {
    throw new Error(`${kind} value head: expected global features [${h.shape[0]}, ${featureSize}], got [${features.shape.join(', ')}]`);
  }
  return tf.concat([h, features], 1);
}

/**
 * The first layer's weight [rows, inputSize + featureSize]: the h columns drawn N(0, std²) as a
 * featureless head draws them, the feature columns zero (module comment).
 */
function firstLayerWeight(rows: number, inputSize: number, featureSize: number, rng: Rng, name: string): tf.Variable {
  const cols = inputSize + featureSize;
  const data = new Float32Array(rows * cols);
  for (let r = 0; r < rows; r++) for (let c = 0; c < inputSize; c++) data[r * cols + c] = rng.normal() * HEAD_INIT_STD;
  return ownedVariable(tf.tensor2d(data, [rows, cols]), name);
}

function checkFeatureSize(kind: string, featureSize: number): void {
  if (!Number.isInteger(featureSize) || featureSize < 0) throw new Error(`${kind} value head: featureSize must be an integer >= 0 (got ${featureSize})`);
}

/** Linear head h → 1 (CoMLRL's default when no hidden dim is set); [h; f] → 1 with features. */
export function createLinearHead(inputSize: number, spec: CriticHeadSpec, rng: Rng, featureSize = 0): CriticHead {
  checkFeatureSize('linear', featureSize);
  const w = firstLayerWeight(1, inputSize, featureSize, rng, uniqueName('w'));
  const b = zerosVariable(1, uniqueName('b'));
  return {
    spec: { type: spec.type },
    inputSize,
    featureSize,
    apply(h, features) {
      assertWidth('linear', inputSize, h);
      return tf.tidy(() => tf.reshape(linear(headInput('linear', featureSize, h, features), w as tf.Variable<tf.Rank.R2>, b as tf.Variable<tf.Rank.R1>), [-1]) as tf.Tensor1D);
    },
    trainableVariables: () => [w, b],
    weightNames: () => ['summary.weight', 'summary.bias'],
    dispose() {
      w.dispose();
      b.dispose();
    },
  };
}

/** MLP head h → d → tanh → 1 (CoMLRL's head when a hidden dim is set); [h; f] → d → tanh → 1 with features. */
export function createMlpHead(inputSize: number, spec: CriticHeadSpec, rng: Rng, featureSize = 0): CriticHead {
  const d = spec.hiddenDim;
  if (d === undefined || !Number.isInteger(d) || d < 1) {
    throw new Error(`mlp value head: hiddenDim must be an integer >= 1 (got ${String(d)})`);
  }
  checkFeatureSize('mlp', featureSize);
  // Draw order (w1 then w2) is part of the seeded contract: same seed, same head.
  const w1 = firstLayerWeight(d, inputSize, featureSize, rng, uniqueName('w1'));
  const b1 = zerosVariable(d, uniqueName('b1'));
  const w2 = normalVariable(1, d, rng, uniqueName('w2'));
  const b2 = zerosVariable(1, uniqueName('b2'));
  return {
    spec: { type: spec.type, hiddenDim: d },
    inputSize,
    featureSize,
    apply(h, features) {
      assertWidth('mlp', inputSize, h);
      return tf.tidy(() => {
        const z = tf.tanh(linear(headInput('mlp', featureSize, h, features), w1 as tf.Variable<tf.Rank.R2>, b1 as tf.Variable<tf.Rank.R1>));
        return tf.reshape(linear(z, w2 as tf.Variable<tf.Rank.R2>, b2 as tf.Variable<tf.Rank.R1>), [-1]) as tf.Tensor1D;
      });
    },
    trainableVariables: () => [w1, b1, w2, b2],
    weightNames: () => ['fc1.weight', 'fc1.bias', 'fc2.weight', 'fc2.bias'],
    dispose() {
      for (const v of [w1, b1, w2, b2]) v.dispose();
    },
  };
}

const registry = new Map<string, CriticHeadFactory>([
  ['linear', createLinearHead],
  ['mlp', createMlpHead],
]);

/**
 * Registers a head kind under `name` so configs and saved heads can refer to it. Re-registering a
 * name replaces it, except for the built-in kinds, which cannot be replaced.
 */
export function registerCriticHead(name: string, factory: CriticHeadFactory): void {
  if (name === 'linear' || name === 'mlp') {
    throw new Error(`registerCriticHead: '${name}' is a built-in head kind and cannot be replaced`);
  }
  if (!/^[A-Za-z0-9_.-]+$/.test(name)) {
    throw new Error(`registerCriticHead: name '${name}' must use letters, digits, '_', '.' or '-'`);
  }
  registry.set(name, factory);
}

/** Names of every registered head kind. */
export function listCriticHeads(): string[] {
  return [...registry.keys()];
}

/**
 * CoMLRL's rule for the head spec from a `*_value_head_hidden_dim` setting: a positive hidden dim
 * gives the MLP head, null/0 the linear head.
 */
export function headSpecFromHiddenDim(hiddenDim: number | null | undefined): CriticHeadSpec {
  return hiddenDim !== null && hiddenDim !== undefined && hiddenDim > 0 ? { type: 'mlp', hiddenDim } : { type: 'linear' };
}

/**
 * Builds a head of a registered kind, reading `featureSize` global features beside h (0: none).
 * A kind whose head does not report that `featureSize` is refused.
 */
export function createCriticHead(inputSize: number, spec: CriticHeadSpec, rng: Rng, featureSize = 0): CriticHead {
  const factory = registry.get(spec.type);
  if (!factory) {
    throw new Error(`unknown value head type '${spec.type}'; registered: ${listCriticHeads().join(', ')} (add one with registerCriticHead)`);
  }
  if (!Number.isInteger(inputSize) || inputSize < 1) throw new Error(`value head: inputSize must be an integer >= 1 (got ${inputSize})`);
  if (!Number.isInteger(featureSize) || featureSize < 0) throw new Error(`value head: featureSize must be an integer >= 0 (got ${featureSize})`);
  const head = factory(inputSize, spec, rng, featureSize);
  if (headFeatureSize(head) !== featureSize) {
    head.dispose();
    throw new Error(`value head '${spec.type}' was asked for ${featureSize} global features and reads ${headFeatureSize(head)}; a kind that reads numeric m_t sets featureSize from its factory's 4th argument`);
  }
  if (head.trainableVariables().length !== head.weightNames().length) {
    throw new Error(`value head '${spec.type}': ${head.trainableVariables().length} variables but ${head.weightNames().length} weight names`);
  }
  return head;
}

/** How many global features a head reads beside h (0 when it declares none). */
export function headFeatureSize(head: CriticHead): number {
  return head.featureSize ?? 0;
}

/**
 * Writes `value_head.safetensors` (float32) and `value_head.json` (spec, input size and, for a
 * head that reads global features, `feature_size`; absent means 0) into `dir`.
 */
export async function saveCriticHead(head: CriticHead, dir: string): Promise<void> {
  await fs.promises.mkdir(dir, { recursive: true });
  const names = head.weightNames();
  const tensors: NamedTensor[] = head.trainableVariables().map((v, i) => ({
    name: names[i],
    shape: [...v.shape],
    data: Float32Array.from(v.dataSync()),
  }));
  writeSafetensors(path.join(dir, HEAD_WEIGHTS_FILE), tensors, 'F32');
  const features = headFeatureSize(head);
  const config = { format: 'comlrl-value-head', version: 1, input_size: head.inputSize, ...(features > 0 ? { feature_size: features } : {}), spec: head.spec };
  await fs.promises.writeFile(path.join(dir, HEAD_CONFIG_FILE), `${JSON.stringify(config, null, 2)}\n`);
}

/**
 * Loads a head written by {@link saveCriticHead}, with the feature size it was saved with. Its
 * kind must be registered in this process. Weights must match the names and shapes the kind builds.
 */
export async function loadCriticHead(dir: string, rng: Rng): Promise<CriticHead> {
  const cfgPath = path.join(dir, HEAD_CONFIG_FILE);
  if (!fs.existsSync(cfgPath)) throw new Error(`${cfgPath}: value head config not found`);
  const raw = JSON.parse(await fs.promises.readFile(cfgPath, 'utf8')) as {
    input_size?: unknown;
    feature_size?: unknown;
    spec?: { type?: unknown; hiddenDim?: unknown; options?: unknown };
  };
  if (typeof raw.input_size !== 'number' || typeof raw.spec?.type !== 'string') {
    throw new Error(`${cfgPath}: expected fields input_size (number) and spec.type (string)`);
  }
  const featureSize = raw.feature_size ?? 0;
  if (typeof featureSize !== 'number' || !Number.isInteger(featureSize) || featureSize < 0) {
    throw new Error(`${cfgPath}: feature_size must be an integer >= 0 (got ${JSON.stringify(raw.feature_size)})`);
  }
  const spec: CriticHeadSpec = { type: raw.spec.type };
  if (typeof raw.spec.hiddenDim === 'number') spec.hiddenDim = raw.spec.hiddenDim;
  if (raw.spec.options && typeof raw.spec.options === 'object') spec.options = raw.spec.options as Record<string, unknown>;
  const head = createCriticHead(raw.input_size, spec, rng, featureSize);
  const weights = readSafetensors(path.join(dir, HEAD_WEIGHTS_FILE));
  const names = head.weightNames();
  head.trainableVariables().forEach((v, i) => {
    const t = weights.get(names[i]);
    if (!t) {
      head.dispose();
      throw new Error(`${path.join(dir, HEAD_WEIGHTS_FILE)}: missing tensor '${names[i]}'`);
    }
    if (t.shape.length !== v.shape.length || t.shape.some((d, j) => d !== v.shape[j])) {
      head.dispose();
      throw new Error(`${path.join(dir, HEAD_WEIGHTS_FILE)}: tensor '${names[i]}' has shape [${t.shape.join(',')}], expected [${v.shape.join(',')}]`);
    }
    tf.tidy(() => v.assign(tf.tensor(t.data, v.shape)));
  });
  return head;
}
