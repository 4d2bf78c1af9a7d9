#!/usr/bin/python3
"""Regenerates test/fixtures/reference-kl/: for each LoRA fixture of test/fixtures/lora/, the float64
reference log-probs of its BASE model (adapter off) on the adapter's cases, from
../shared/reference/ref_logprobs.py, and the k3 KL of the adapted model to its base per case,
computed in float64 from those and the adapter fixture's expected.json (the merged model's log-probs):
    KL = sum_t exp(d_t) - d_t - 1,  d_t = log p_base(y_t) - log p_adapted(y_t).

usage: /usr/bin/python3 scripts/make_kl_fixtures.py [SHARED_DIR]   (needs Debian's python3-torch)
Writes <name>.json = {"base_logprobs": [[...]], "kl": [...]} per LoRA fixture.
"""
import json, math, os, subprocess, sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, '..', 'shared')
REF = os.path.join(SHARED, 'reference')
LORA = os.path.join(ROOT, 'test', 'fixtures', 'lora')
MODELS = os.path.join(ROOT, 'test', 'fixtures', 'model')
OUT = os.path.join(ROOT, 'test', 'fixtures', 'reference-kl')

def k3_sum(policy, reference):
    total = 0.0
    for p, r in zip(policy, reference):
        d = r - p
        total += math.expm1(d) - d
    return total

def main():
    os.makedirs(OUT, exist_ok=True)
    for name in sorted(os.listdir(LORA)):
        d = os.path.join(LORA, name)
        if not os.path.isdir(d):
            continue
        base = open(os.path.join(d, 'base.txt')).read().strip()
        res = subprocess.run([sys.executable, os.path.join(REF, 'ref_logprobs.py'), os.path.join(MODELS, base), os.path.join(d, 'cases.json')],
                             check=True, capture_output=True, text=True)
        base_lps = json.loads(res.stdout)
        adapted = json.load(open(os.path.join(d, 'expected.json')))
        kl = [k3_sum(p, r) for p, r in zip(adapted, base_lps)]
        json.dump({'base_logprobs': base_lps, 'kl': kl}, open(os.path.join(OUT, name + '.json'), 'w'))
        print(name, 'ok', [round(v, 6) for v in kl])

if __name__ == '__main__':
    main()
