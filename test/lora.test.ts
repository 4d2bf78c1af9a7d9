import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { initBackend, setBackendLogger } from '../src/backend/index.js';
import { backendUnderTest } from './backend-under-test.js';
import { AdamW } from '../src/optim/adamw.js';
import {
  createTinyModel,
  frozenLinear,
  liveFrozenBases,
  loadCausalLM,
  loraSectionSchema,
  loraSettings,
  readSafetensorsHeader,
  type TfCausalLM,
} from '../src/model/index.js';

// Expected values: float64 PyTorch log-probs of the MERGED model (W + scale·B·A) from
// ../shared/reference/ref_logprobs.py, written by scripts/make_lora_fixtures.py next to each adapter.
const LORA = path.join(import.meta.dirname, 'fixtures', 'lora');
const MODELS = path.join(import.meta.dirname, 'fixtures', 'model');
const NAMES = ['qwen2-tied-qv', 'qwen3-all-linear-rslora', 'llama-mlp-layer1'];
const TOL = 2e-4;

interface Case {
  prompt: number[];
  completion: number[];
}

function fixture(name: string): { adapter: string; base: string; cases: Case[]; expected: number[][] } {
  const adapter = path.join(LORA, name);
  return {
    adapter,
    base: path.join(MODELS, fs.readFileSync(path.join(adapter, 'base.txt'), 'utf8').trim()),
    cases: JSON.parse(fs.readFileSync(path.join(adapter, 'cases.json'), 'utf8')) as Case[],
    expected: JSON.parse(fs.readFileSync(path.join(adapter, 'expected.json'), 'utf8')) as number[][],
  };
}

async function lps(model: TfCausalLM, cases: Case[]): Promise<number[][]> {
  return model.tokenLogProbs(
    cases.map((c) => c.prompt),
    cases.map((c) => c.completion),
  );
}

function worst(a: number[][], b: number[][]): number {
  let w = 0;
  a.forEach((row, i) => row.forEach((v, j) => (w = Math.max(w, Math.abs(v - b[i][j])))));
  return w;
}

const settings = (over: Record<string, unknown> = {}) => loraSettings(loraSectionSchema.parse({ r: 4, lora_alpha: 8, target_modules: 'all-linear', ...over }));

let tmp: string;
let tiny: string;

beforeAll(async () => {
  setBackendLogger(null);
  await initBackend(backendUnderTest('wasm'));
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'comlrl-lora-'));
  tiny = path.join(tmp, 'tiny');
  await createTinyModel({ dir: tiny, arch: 'qwen3', seed: 3, hiddenSize: 32, numLayers: 2, numHeads: 4, numKvHeads: 2, intermediateSize: 48 });
});
afterAll(() => {
  setBackendLogger((l) => console.error(l));
  fs.rmSync(tmp, { recursive: true, force: true });
});

describe('LoRA adapters against PyTorch (merged model)', () => {
  for (const name of NAMES) {
    it(`${name}: adapter log-probs match the merged model's float64 reference within ${TOL}`, async () => {
      const f = fixture(name);
      const base = await loadCausalLM(f.base);
      const model = await loadCausalLM(f.base, { adapter: f.adapter });
      try {
        const got = await lps(model, f.cases);
        expect(got.map((r) => r.length)).toEqual(f.cases.map((c) => c.completion.length));
        expect(worst(got, f.expected)).toBeLessThan(TOL);
        // The adapter does change the model (else the comparison above would prove little).
        expect(worst(await lps(base, f.cases), f.expected)).toBeGreaterThan(1e-2);
        // The merged full model, saved and loaded without the adapter, gives the same numbers.
        const merged = path.join(tmp, `${name}-merged`);
        await model.saveMerged(merged);
        expect(fs.existsSync(path.join(merged, 'adapter_config.json'))).toBe(false);
        const m = await loadCausalLM(merged);
        try {
          expect(m.loraInfo).toBeNull();
          expect(worst(await lps(m, f.cases), f.expected)).toBeLessThan(TOL);
        } finally {
          m.dispose();
        }
      } finally {
        model.dispose();
        base.dispose();
      }
    });
  }

  it('an adapter directory alone loads onto the base its adapter_config.json names', async () => {
    const f = fixture('qwen2-tied-qv');
    const model = await loadCausalLM(f.adapter);
    try {
      expect(model.loraInfo?.r).toBe(4);
      expect(worst(await lps(model, f.cases), f.expected)).toBeLessThan(TOL);
    } finally {
      model.dispose();
    }
  });
});

describe('fresh adapters', () => {
  it('with B = 0 the log-probs and greedy generations equal the base model', async () => {
    const base = await loadCausalLM(tiny);
    const model = await loadCausalLM(tiny, { lora: { settings: settings(), seed: 'a' } });
    try {
      const prompts = [[1, 2, 3, 4], [5, 6], [7, 8, 9]];
      const comps = [[10, 11, 12], [13, 14, 15, 16], [17]];
      const a = await base.tokenLogProbs(prompts, comps);
      const b = await model.tokenLogProbs(prompts, comps);
      expect(worst(a, b)).toBeLessThan(1e-5);
      const ga = await base.generate(prompts, { maxNewTokens: 6, greedy: true });
      const gb = await model.generate(prompts, { maxNewTokens: 6, greedy: true });
      expect(gb.sequences).toEqual(ga.sequences);
      // A is kaiming-uniform: nonzero, within ±1/√in.
      const [a0] = model.trainableVariables();
      const vals = Array.from(await a0.data());
      expect(vals.some((v) => v !== 0)).toBe(true);
      expect(Math.max(...vals.map(Math.abs))).toBeLessThanOrEqual(1 / Math.sqrt(32));
    } finally {
      model.dispose();
      base.dispose();
    }
  });

  it('trains only the adapter: variables are A/B with PEFT names, gradients reach only them', async () => {
    const model = await loadCausalLM(tiny, { lora: { settings: settings({ target_modules: ['q_proj', 'down_proj'] }), seed: 'b' } });
    try {
      const names = model.weightNames();
      expect(names).toEqual([
        'base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight',
        'base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight',
        'base_model.model.model.layers.0.mlp.down_proj.lora_A.weight',
        'base_model.model.model.layers.0.mlp.down_proj.lora_B.weight',
        'base_model.model.model.layers.1.self_attn.q_proj.lora_A.weight',
        'base_model.model.model.layers.1.self_attn.q_proj.lora_B.weight',
        'base_model.model.model.layers.1.mlp.down_proj.lora_A.weight',
        'base_model.model.model.layers.1.mlp.down_proj.lora_B.weight',
      ]);
      const vars = model.trainableVariables();
      expect(vars.map((v) => v.shape)).toEqual([[4, 32], [32, 4], [4, 48], [32, 4], [4, 32], [32, 4], [4, 48], [32, 4]]);
      expect(model.decoder.layerTrainables(1)).toEqual(vars.slice(4));
      const { grads } = tf.variableGrads(() => tf.sum(model.scoreCompletions([[1, 2, 3]], [[4, 5]]).tokenLogProbs) as tf.Scalar, vars);
      // B starts at 0, so only B gets a gradient at first (dA = Bᵀ·…); it must be nonzero.
      const gB = grads[vars[1].name];
      expect(Math.max(...Array.from(await gB.data()).map(Math.abs))).toBeGreaterThan(0);
      tf.dispose(Object.values(grads));
    } finally {
      model.dispose();
    }
  });

  it('rejects unsupported PEFT options and unknown modules with a message naming the field', () => {
    expect(() => loraSectionSchema.parse({ modules_to_save: ['lm_head'] })).toThrow(/modules_to_save is not supported/);
    expect(() => loraSectionSchema.parse({ use_dora: true })).toThrow(/DoRA/);
    expect(() => loraSectionSchema.parse({ bias: 'all' })).toThrow(/bias/);
    expect(() => loraSectionSchema.parse({ rr: 3 })).toThrow(/rr/);
    return expect(loadCausalLM(tiny, { lora: { settings: settings({ target_modules: ['q_proj', 'c_attn'] }), seed: 'x' } })).rejects.toThrow(/'c_attn' name no module/);
  });
});

describe('LoRA gradients', () => {
  it('frozenLinear: value and input gradient equal x·W and dy·W, also when the backward pass works in row blocks of W', () => tf.tidy(() => {
    const x = tf.randomNormal([5, 6], 0, 1, 'float32', 1) as tf.Tensor2D;
    const w = tf.randomNormal([7, 6], 0, 1, 'float32', 2) as tf.Tensor2D; // [out, in]
    const dy = tf.randomNormal([5, 7], 0, 1, 'float32', 3);
    const ref = tf.grad((v: tf.Tensor) => tf.sum(tf.mul(tf.matMul(v as tf.Tensor2D, w, false, true), dy)))(x);
    for (const block of [1_000_000, 12, 6]) {
      const y = frozenLinear(x, w, block);
      expect(Math.max(...Array.from(tf.abs(tf.sub(y, tf.matMul(x, w, false, true))).dataSync()))).toBeLessThan(1e-5);
      const g = tf.grad((v: tf.Tensor) => tf.sum(tf.mul(frozenLinear(v as tf.Tensor2D, w, block), dy)))(x);
      expect(Math.max(...Array.from(tf.abs(tf.sub(g, ref)).dataSync()))).toBeLessThan(1e-5);
    }
  }));

  it('dL/dB of a fresh adapter equals scale · dL/dW · Aᵀ of the full model (chain rule through the frozen layers)', async () => {
    const full = await loadCausalLM(tiny);
    const model = await loadCausalLM(tiny, { lora: { settings: settings(), seed: 'g' } });
    try {
      const loss = (m: TfCausalLM) => () => tf.sum(m.scoreCompletions([[1, 2, 3, 4], [5, 6]], [[7, 8, 9], [10, 11]]).tokenLogProbs) as tf.Scalar;
      const fv = full.trainableVariables();
      const names = full.weightNames();
      const { grads: gFull } = tf.variableGrads(loss(full), fv);
      const lv = model.trainableVariables();
      const { grads: gLora } = tf.variableGrads(loss(model), lv);
      const scale = model.lora!.adapter.scale;
      // Layer 0's q_proj and down_proj: the gradient reaches them through every frozen layer above.
      for (const mod of ['model.layers.0.self_attn.q_proj', 'model.layers.0.mlp.down_proj']) {
        const i = model.weightNames().indexOf(`base_model.model.${mod}.lora_B.weight`);
        const a = lv[i - 1];
        const dW = gFull[fv[names.indexOf(`${mod}.weight`)].name];
        const expected = tf.mul(tf.matMul(dW, a, false, true), scale);
        const got = gLora[lv[i].name];
        const err = tf.max(tf.abs(tf.sub(got, expected))).dataSync()[0];
        const mag = tf.max(tf.abs(expected)).dataSync()[0];
        expect(mag).toBeGreaterThan(1e-4);
        expect(err / mag).toBeLessThan(1e-4);
      }
      tf.dispose([...Object.values(gFull), ...Object.values(gLora)]);
    } finally {
      model.dispose();
      full.dispose();
    }
  });
});

describe('LoRA dropout', () => {
  it('drops only under a tape, with masks fixed by (seed, pass, module): the same pass recomputed gives the same loss', async () => {
    const model = await loadCausalLM(tiny, { lora: { settings: settings({ lora_dropout: 0.5 }), seed: 'd' } });
    try {
      const vars = model.trainableVariables();
      // Move B off zero so that dropout changes the output.
      for (const v of vars) v.assign(tf.randomNormal(v.shape, 0, 0.2, 'float32', 11));
      const prompts = [[1, 2, 3]];
      const comps = [[4, 5, 6]];
      const taped = () => {
        const { value, grads } = tf.variableGrads(() => tf.sum(model.scoreCompletions(prompts, comps).tokenLogProbs) as tf.Scalar, vars);
        tf.dispose(Object.values(grads));
        const out = value.dataSync()[0];
        value.dispose();
        return out;
      };
      const plain = (await model.tokenLogProbs(prompts, comps))[0].reduce((a, b) => a + b, 0);
      expect((await model.tokenLogProbs(prompts, comps))[0].reduce((a, b) => a + b, 0)).toBe(plain);
      expect(model.lora!.adapter.dropoutPasses).toBe(0);
      const first = taped();
      expect(model.lora!.adapter.dropoutPasses).toBe(1);
      expect(Math.abs(first - plain)).toBeGreaterThan(1e-4);
      const second = taped();
      expect(second).not.toBe(first); // a new pass, new masks
      model.lora!.adapter.dropoutPasses = 0; // replay pass 1
      expect(taped()).toBe(first);
    } finally {
      model.dispose();
    }
  });
});

describe('saving adapters in PEFT format', () => {
  it('writes adapter_config.json and adapter_model.safetensors with PEFT names, fields and shapes; loads back identically', async () => {
    const model = await loadCausalLM(tiny, { lora: { settings: settings({ r: 2, lora_alpha: 4, lora_dropout: 0.1, target_modules: ['v_proj', 'q_proj'], layers_to_transform: [1] }), seed: 'c' } });
    const dir = path.join(tmp, 'adapter-c');
    try {
      // Move B off zero so the round trip checks real values.
      for (const v of model.trainableVariables()) v.assign(tf.randomNormal(v.shape, 0, 0.1, 'float32', 7));
      await model.save(dir);
      expect(fs.readdirSync(dir).sort()).toEqual(['adapter_config.json', 'adapter_model.safetensors', 'comlrl_adapter_state.json']);
      const cfg = JSON.parse(fs.readFileSync(path.join(dir, 'adapter_config.json'), 'utf8')) as Record<string, unknown>;
      expect(cfg).toMatchObject({
        peft_type: 'LORA',
        task_type: 'CAUSAL_LM',
        r: 2,
        lora_alpha: 4,
        lora_dropout: 0.1,
        target_modules: ['q_proj', 'v_proj'],
        layers_to_transform: [1],
        bias: 'none',
        fan_in_fan_out: false,
        use_rslora: false,
        use_dora: false,
        modules_to_save: null,
        inference_mode: true,
        base_model_name_or_path: path.resolve(tiny),
      });
      const header = readSafetensorsHeader(path.join(dir, 'adapter_model.safetensors'));
      expect([...header.entries.keys()].sort()).toEqual([
        'base_model.model.model.layers.1.self_attn.q_proj.lora_A.weight',
        'base_model.model.model.layers.1.self_attn.q_proj.lora_B.weight',
        'base_model.model.model.layers.1.self_attn.v_proj.lora_A.weight',
        'base_model.model.model.layers.1.self_attn.v_proj.lora_B.weight',
      ]);
      expect(header.entries.get('base_model.model.model.layers.1.self_attn.v_proj.lora_B.weight')!.shape).toEqual([16, 2]);
      expect(header.entries.get('base_model.model.model.layers.1.self_attn.q_proj.lora_A.weight')!.shape).toEqual([2, 32]);
      const back = await loadCausalLM(tiny, { adapter: dir });
      try {
        const a = await model.tokenLogProbs([[1, 2, 3]], [[4, 5, 6]]);
        const b = await back.tokenLogProbs([[1, 2, 3]], [[4, 5, 6]]);
        expect(b).toEqual(a);
      } finally {
        back.dispose();
      }
    } finally {
      model.dispose();
    }
  });
});

describe('bad adapters are refused with messages naming the file', () => {
  it('wrong base (shapes), missing tensor, foreign base name, pickle-only adapter', async () => {
    const f = fixture('qwen2-tied-qv');
    // The qwen2 adapter on the llama fixture: shapes differ.
    // The qwen2 adapter (3 layers) on a 2-layer base: keys for a layer it lacks.
    await expect(loadCausalLM(path.join(MODELS, 'qwen3-own-dims-f32'), { adapter: f.adapter })).rejects.toThrow(/adapter_model\.safetensors: tensors for modules this base model lacks .*layers\.2\.self_attn\.q_proj\.lora_A\.weight/);
    // ... and on a base with another head_dim: q_proj's B has the wrong shape.
    await expect(loadCausalLM(path.join(MODELS, 'qwen3-sharded-bf16'), { adapter: f.adapter })).rejects.toThrow(/tensor 'base_model\.model\.model\.layers\.0\.self_attn\.q_proj\.lora_B\.weight' has shape \[64,4\], the base model and r imply \[96,4\]/);
    const bad = path.join(tmp, 'bad-adapter');
    fs.mkdirSync(bad, { recursive: true });
    const cfg = JSON.parse(fs.readFileSync(path.join(f.adapter, 'adapter_config.json'), 'utf8')) as Record<string, unknown>;
    fs.writeFileSync(path.join(bad, 'adapter_config.json'), JSON.stringify({ ...cfg, target_modules: ['q_proj', 'v_proj', 'k_proj'] }));
    fs.copyFileSync(path.join(f.adapter, 'adapter_model.safetensors'), path.join(bad, 'adapter_model.safetensors'));
    await expect(loadCausalLM(f.base, { adapter: bad })).rejects.toThrow(/k_proj\.lora_A\.weight' missing/);
    fs.writeFileSync(path.join(bad, 'adapter_config.json'), JSON.stringify({ ...cfg, base_model_name_or_path: 'Qwen/Qwen2.5-0.5B' }));
    await expect(loadCausalLM(bad)).rejects.toThrow(/base model 'Qwen\/Qwen2\.5-0\.5B' is not a local model directory/);
    fs.rmSync(path.join(bad, 'adapter_model.safetensors'));
    fs.writeFileSync(path.join(bad, 'adapter_model.bin'), 'x');
    await expect(loadCausalLM(f.base, { adapter: bad })).rejects.toThrow(/adapter_model\.bin is a pickle/);
    // Nothing stays loaded after the failures.
    expect(await liveFrozenBases()).toEqual([]);
  });
});

describe('one frozen base shared by many adapters', () => {
  it('loads the base once for N models, frees it with the last one, and keeps heterogeneous bases apart', async () => {
    const before = tf.memory().numTensors;
    const a = await loadCausalLM(tiny, { lora: { settings: settings(), seed: 'm0' } });
    const afterOne = tf.memory().numTensors;
    const [b, c] = await Promise.all([
      loadCausalLM(tiny, { lora: { settings: settings(), seed: 'm1' } }),
      loadCausalLM(tiny, { lora: { settings: settings(), seed: 'm2' } }),
    ]);
    const adapterTensors = a.trainableVariables().length;
    // Two more models cost only their adapters.
    expect(tf.memory().numTensors - afterOne).toBe(2 * adapterTensors);
    expect(a.lora!.base).toBe(b.lora!.base);
    expect(a.lora!.base.references).toBe(3);
    // Different seeds, different A.
    expect(Array.from(await a.trainableVariables()[0].data())).not.toEqual(Array.from(await b.trainableVariables()[0].data()));
    a.dispose();
    // The others keep working on the shared base.
    expect((await b.tokenLogProbs([[1, 2]], [[3]]))[0]).toHaveLength(1);
    const other = path.join(tmp, 'tiny-other');
    await createTinyModel({ dir: other, arch: 'llama', seed: 4, hiddenSize: 32, numLayers: 1, numHeads: 4, numKvHeads: 4, intermediateSize: 40 });
    const d = await loadCausalLM(other, { lora: { settings: settings(), seed: 'h' } });
    expect(d.lora!.base).not.toBe(b.lora!.base);
    expect((await liveFrozenBases()).length).toBe(2);
    b.dispose();
    c.dispose();
    d.dispose();
    expect(await liveFrozenBases()).toEqual([]);
    expect(tf.memory().numTensors).toBe(before);
  });
});

describe('LoRA training memory', () => {
  it('tensor count stays flat over 200 LoRA steps (dropout on), and AdamW holds moments only for the adapter', async () => {
    const model = await loadCausalLM(tiny, { lora: { settings: settings({ lora_dropout: 0.1 }), seed: 'mem' } });
    try {
      const vars = model.trainableVariables();
      const opt = new AdamW(vars, { lr: 1e-2 });
      const prompts = [[1, 2, 3], [4, 5]];
      const comps = [[6, 7], [8, 9, 10]];
      const step = () => {
        const { value, grads } = tf.variableGrads(() => tf.neg(tf.mean(model.scoreCompletions(prompts, comps).tokenLogProbs)) as tf.Scalar, vars);
        opt.step(vars.map((v) => grads[v.name]));
        value.dispose();
        tf.dispose(Object.values(grads));
      };
      const first = await model.tokenLogProbs(prompts, comps);
      step();
      const count = tf.memory().numTensors;
      for (let i = 0; i < 199; i++) step();
      expect(tf.memory().numTensors).toBe(count);
      expect(model.lora!.adapter.dropoutPasses).toBe(200);
      const state = opt.getState();
      expect(state.m.length).toBe(vars.length);
      // Training moved the completions' likelihood up.
      const last = await model.tokenLogProbs(prompts, comps);
      expect(last.flat().reduce((s, v) => s + v, 0)).toBeGreaterThan(first.flat().reduce((s, v) => s + v, 0));
      opt.dispose();
    } finally {
      model.dispose();
    }
  }, 120_000);
});

describe('a tied frozen base in a training pass', () => {
  it('its embedding table is not copied onto the gradient tape (peak below one table)', async () => {
    // vocab × hidden (5.1 M floats) is larger than the head's backward row block (4 M floats), so
    // a table-sized buffer in the pass can only be a copy of the table.
    const dir = path.join(tmp, 'tied-wide');
    await createTinyModel({ dir, arch: 'qwen3', seed: 5, hiddenSize: 128, numLayers: 2, numHeads: 4, numKvHeads: 2, intermediateSize: 64, vocabSize: 40_000, tieWordEmbeddings: true });
    const model = await loadCausalLM(dir, { lora: { settings: settings(), seed: 'tied' } });
    try {
      const tableBytes = 40_000 * 128 * 4;
      const vars = model.trainableVariables();
      const held = tf.memory().numBytes;
      const profile = await tf.profile(() => {
        const { value, grads } = tf.variableGrads(() => tf.neg(tf.mean(model.scoreCompletions([[1, 2, 3, 4, 5, 6]], [[7, 8, 9]]).tokenLogProbs)) as tf.Scalar, vars);
        value.dispose();
        tf.dispose(Object.values(grads));
      });
      const largest = Math.max(...profile.kernels.map((k) => k.bytesAdded));
      expect(largest).toBeLessThan(tableBytes);
      expect(profile.peakBytes - held).toBeLessThan(tableBytes);
    } finally {
      model.dispose();
    }
  }, 120_000);
});
