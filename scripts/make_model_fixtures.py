#!/usr/bin/python3
"""Regenerates test/fixtures/model/: random HF checkpoints from ../shared/reference/make_model.py
and their float64 reference log-probs from ../shared/reference/ref_logprobs.py.

usage: /usr/bin/python3 scripts/make_model_fixtures.py [SHARED_DIR]   (needs Debian's python3-torch)
Each fixture dir gets the checkpoint, cases.json ([{prompt, completion}]) and expected.json.
"""
import json, os, random, shutil, subprocess, sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, '..', 'shared')
REF = os.path.join(SHARED, 'reference')
OUT = os.path.join(ROOT, 'test', 'fixtures', 'model')

# name: (arch, seed, extra make_model.py args, post-process of config.json)
def rope_parameters_style(cfg):
    cfg['rope_parameters'] = {'rope_type': 'default', 'rope_theta': cfg.pop('rope_theta')}
    return cfg

FIXTURES = {
    'qwen3-sharded-bf16': ('qwen3', 11, ['--shards', '3'], None),
    'qwen2-tied-bias-f16': ('qwen2', 12, ['--dtype', 'f16'], None),
    'llama-bf16': ('llama', 13, [], None),
    # own dims: 4 query heads on 1 KV head, head_dim decoupled, rope_parameters style, f32
    'qwen3-own-dims-f32': ('qwen3', 14, ['--dims', '97,32,2,4,1,64', '--head-dim', '16', '--dtype', 'f32'], rope_parameters_style),
    # head_dim 16 with original_max_position_embeddings 64 puts frequencies in all three llama3 bands
    'llama3-rope-scaling': ('llama', 15, ['--dims', '127,64,2,4,2,128', '--llama3-scaling'], None),
}

def cases(vocab, seed):
    rnd = random.Random(seed)
    shapes = [(1, 4), (7, 12), (23, 27), (3, 1), (12, 0), (5, 9)]
    return [{'prompt': [rnd.randrange(vocab) for _ in range(p)], 'completion': [rnd.randrange(vocab) for _ in range(c)]}
            for p, c in shapes]

def main():
    os.makedirs(OUT, exist_ok=True)
    for name, (arch, seed, extra, post) in FIXTURES.items():
        d = os.path.join(OUT, name)
        shutil.rmtree(d, ignore_errors=True)
        subprocess.run([sys.executable, os.path.join(REF, 'make_model.py'), d, arch, str(seed), *extra], check=True)
        cfg_path = os.path.join(d, 'config.json')
        cfg = json.load(open(cfg_path))
        if post:
            cfg = post(cfg)
            json.dump(cfg, open(cfg_path, 'w'), indent=2)
        cs = cases(cfg['vocab_size'], seed)
        json.dump(cs, open(os.path.join(d, 'cases.json'), 'w'))
        res = subprocess.run([sys.executable, os.path.join(REF, 'ref_logprobs.py'), d, os.path.join(d, 'cases.json')],
                             check=True, capture_output=True, text=True)
        json.dump(json.loads(res.stdout), open(os.path.join(d, 'expected.json'), 'w'))
        print(name, 'ok')

if __name__ == '__main__':
    main()
