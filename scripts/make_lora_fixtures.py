#!/usr/bin/python3
"""Regenerates test/fixtures/lora/: PEFT-format LoRA adapters (random A and B, seeded) on the model
fixtures of test/fixtures/model/, and the float64 reference log-probs of the MERGED model
(W + scale * B @ A, written to a temporary directory) from ../shared/reference/ref_logprobs.py.

usage: /usr/bin/python3 scripts/make_lora_fixtures.py [SHARED_DIR]   (needs Debian's python3-torch)
Each fixture dir gets adapter_config.json + adapter_model.safetensors (PEFT's names and layout),
base.txt (the base fixture's name), cases.json and expected.json. Deterministic: same seed, same files.
"""
import json, os, random, shutil, struct, subprocess, sys, tempfile
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, '..', 'shared')
REF = os.path.join(SHARED, 'reference')
MODELS = os.path.join(ROOT, 'test', 'fixtures', 'model')
OUT = os.path.join(ROOT, 'test', 'fixtures', 'lora')

# name: (base fixture, seed, r, lora_alpha, use_rslora, target_modules, layers_to_transform)
FIXTURES = {
    # tied embeddings + q/k/v bias: the frozen base keeps only the transposed table
    'qwen2-tied-qv': ('qwen2-tied-bias-f16', 21, 4, 8, False, ['q_proj', 'v_proj'], None),
    # every linear, grouped-query attention with its own head_dim, rank-stabilised scale
    'qwen3-all-linear-rslora': ('qwen3-own-dims-f32', 22, 8, 16, True, 'all-linear', None),
    # MLP only, second layer only
    'llama-mlp-layer1': ('llama-bf16', 23, 2, 5, False, ['gate_proj', 'up_proj', 'down_proj'], [1]),
}
LINEAR = {'q_proj': 'self_attn', 'k_proj': 'self_attn', 'v_proj': 'self_attn', 'o_proj': 'self_attn',
          'gate_proj': 'mlp', 'up_proj': 'mlp', 'down_proj': 'mlp'}

def read_safetensors(path):
    with open(path, 'rb') as f:
        n = struct.unpack('<Q', f.read(8))[0]
        header = json.loads(f.read(n)); base = 8 + n
        out = {}
        for name, meta in header.items():
            if name == '__metadata__':
                continue
            a, b = meta['data_offsets']; f.seek(base + a); raw = f.read(b - a)
            if meta['dtype'] == 'BF16':
                arr = (np.frombuffer(raw, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)
            elif meta['dtype'] == 'F16':
                arr = np.frombuffer(raw, dtype=np.float16).astype(np.float32)
            else:
                arr = np.frombuffer(raw, dtype=np.float32)
            out[name] = arr.reshape(meta['shape']).astype(np.float64)
    return out

def write_f32_safetensors(path, tensors):
    header, blobs, off = {}, [], 0
    for name, arr in tensors.items():
        b = np.ascontiguousarray(arr, dtype=np.float32).tobytes()
        header[name] = {'dtype': 'F32', 'shape': list(arr.shape), 'data_offsets': [off, off + len(b)]}
        blobs.append(b); off += len(b)
    header['__metadata__'] = {'format': 'pt'}
    h = json.dumps(header, separators=(',', ':')).encode()
    h += b' ' * ((8 - len(h) % 8) % 8)
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(h))); f.write(h)
        for b in blobs: f.write(b)

def load_base(d):
    W = {}
    for fn in sorted(os.listdir(d)):
        if fn.endswith('.safetensors'):
            W.update(read_safetensors(os.path.join(d, fn)))
    return W

def cases(vocab, seed):
    rnd = random.Random(seed)
    shapes = [(1, 4), (7, 12), (23, 27), (3, 1), (12, 0), (5, 9)]
    return [{'prompt': [rnd.randrange(vocab) for _ in range(p)], 'completion': [rnd.randrange(vocab) for _ in range(c)]}
            for p, c in shapes]

def main():
    os.makedirs(OUT, exist_ok=True)
    for name, (base, seed, r, alpha, rslora, targets, layers) in FIXTURES.items():
        bdir = os.path.join(MODELS, base)
        cfg = json.load(open(os.path.join(bdir, 'config.json')))
        W = load_base(bdir)
        rng = np.random.RandomState(seed)
        leaves = list(LINEAR) if targets == 'all-linear' else targets
        scale = alpha / (r ** 0.5) if rslora else alpha / r
        adapter, merged = {}, dict(W)
        for l in range(cfg['num_hidden_layers']):
            if layers is not None and l not in layers:
                continue
            for leaf in leaves:
                mod = f'model.layers.{l}.{LINEAR[leaf]}.{leaf}'
                w = W[mod + '.weight']
                out_f, in_f = w.shape
                # Nonzero B (a trained adapter), values stored as float32 so both sides read the same numbers.
                A = rng.uniform(-1, 1, (r, in_f)).astype(np.float32) / np.sqrt(in_f)
                B = (rng.standard_normal((out_f, r)) * 0.05).astype(np.float32)
                adapter[f'base_model.model.{mod}.lora_A.weight'] = A
                adapter[f'base_model.model.{mod}.lora_B.weight'] = B
                merged[mod + '.weight'] = w + scale * (B.astype(np.float64) @ A.astype(np.float64))
        d = os.path.join(OUT, name)
        shutil.rmtree(d, ignore_errors=True); os.makedirs(d)
        write_f32_safetensors(os.path.join(d, 'adapter_model.safetensors'), adapter)
        acfg = {'peft_type': 'LORA', 'task_type': 'CAUSAL_LM', 'base_model_name_or_path': f'../../model/{base}',
                'r': r, 'lora_alpha': alpha, 'lora_dropout': 0.0, 'use_rslora': rslora, 'bias': 'none',
                'fan_in_fan_out': False, 'target_modules': targets, 'layers_to_transform': layers,
                'modules_to_save': None, 'inference_mode': True, 'init_lora_weights': True, 'use_dora': False}
        json.dump(acfg, open(os.path.join(d, 'adapter_config.json'), 'w'), indent=2)
        open(os.path.join(d, 'base.txt'), 'w').write(base + '\n')
        cs = cases(cfg['vocab_size'], seed)
        json.dump(cs, open(os.path.join(d, 'cases.json'), 'w'))
        with tempfile.TemporaryDirectory() as tmp:
            shutil.copy(os.path.join(bdir, 'config.json'), tmp)
            # ref_logprobs.py reads float64 from the file: store the merged weights as float64-exact? F32 is what comlrl merges into.
            write_f32_safetensors(os.path.join(tmp, 'model.safetensors'), {k: v.astype(np.float32) for k, v in merged.items()})
            json.dump(cs, open(os.path.join(tmp, 'cases.json'), 'w'))
            res = subprocess.run([sys.executable, os.path.join(REF, 'ref_logprobs.py'), tmp, os.path.join(tmp, 'cases.json')],
                                 check=True, capture_output=True, text=True)
        json.dump(json.loads(res.stdout), open(os.path.join(d, 'expected.json'), 'w'))
        print(name, 'ok')

if __name__ == '__main__':
    main()
