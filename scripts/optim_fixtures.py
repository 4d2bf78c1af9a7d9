#!/usr/bin/env python3
"""Writes test/fixtures/optim/*.json: torch.optim.AdamW trajectories and clip_grad_norm_ results in float64.

The TypeScript tests replay the same parameters and gradients in float32 and compare.
Run with Debian's torch: /usr/bin/python3 scripts/optim_fixtures.py
"""
import json
import os

import numpy as np
import torch

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test", "fixtures", "optim")
SHAPES = [[3, 4], [5], [2, 3]]


def tolist(t):
    return t.detach().reshape(-1).tolist()


def adamw_case(name, seed, steps, options, lr_changes=None, skip=None, grad_scale=1.0):
    """Runs `steps` AdamW steps; `skip` maps step -> param indices with no grad; `lr_changes` maps step -> lr."""
    rng = np.random.default_rng(seed)
    params = [torch.tensor(rng.standard_normal(s), dtype=torch.float64, requires_grad=True) for s in SHAPES]
    initial = [tolist(p) for p in params]
    opt = torch.optim.AdamW(params, **options)
    trajectory = []
    for step in range(steps):
        if lr_changes and step in lr_changes:
            for g in opt.param_groups:
                g["lr"] = lr_changes[step]
        grads = [rng.standard_normal(s) * grad_scale for s in SHAPES]
        missing = (skip or {}).get(step, [])
        for i, p in enumerate(params):
            p.grad = None if i in missing else torch.tensor(grads[i], dtype=torch.float64)
        opt.step()
        trajectory.append({
            "grads": [None if i in missing else grads[i].reshape(-1).tolist() for i in range(len(params))],
            "lr": opt.param_groups[0]["lr"],
            "params": [tolist(p) for p in params],
        })
    return {
        "name": name,
        "shapes": SHAPES,
        "options": {"lr": options.get("lr", 1e-3), "betas": list(options.get("betas", (0.9, 0.999))),
                    "eps": options.get("eps", 1e-8), "weight_decay": options.get("weight_decay", 1e-2)},
        "initial": initial,
        "steps": trajectory,
    }


def clip_case(name, seed, max_norm, scale):
    rng = np.random.default_rng(seed)
    grads = [rng.standard_normal(s) * scale for s in SHAPES]
    params = [torch.zeros(s, dtype=torch.float64, requires_grad=True) for s in SHAPES]
    for p, g in zip(params, grads):
        p.grad = torch.tensor(g, dtype=torch.float64)
    total = torch.nn.utils.clip_grad_norm_(params, max_norm)
    return {
        "name": name,
        "shapes": SHAPES,
        "max_norm": max_norm,
        "grads": [g.reshape(-1).tolist() for g in grads],
        "total_norm": float(total),
        "clipped": [tolist(p.grad) for p in params],
    }


def main():
    os.makedirs(OUT, exist_ok=True)
    adamw = [
        adamw_case("defaults_lr1e-2", 1, 6, {"lr": 1e-2}),
        adamw_case("custom_betas_eps_wd", 2, 6, {"lr": 3e-3, "betas": (0.8, 0.99), "eps": 1e-6, "weight_decay": 0.1}),
        adamw_case("lr_change_and_missing_grads", 3, 6, {"lr": 1e-2, "weight_decay": 0.05},
                   lr_changes={3: 5e-3}, skip={0: [2], 1: [2], 4: [0]}),
        adamw_case("small_grads_eps_dominates", 4, 4, {"lr": 1e-2}, grad_scale=1e-7),
    ]
    clip = [
        clip_case("clipped", 5, 1.0, 1.0),
        clip_case("not_clipped", 6, 100.0, 1.0),
        clip_case("tiny_max_norm", 7, 1e-3, 3.0),
    ]
    meta = {"generator": "scripts/optim_fixtures.py", "torch": torch.__version__, "dtype": "float64"}
    with open(os.path.join(OUT, "adamw.json"), "w") as f:
        json.dump({**meta, "cases": adamw}, f)
    with open(os.path.join(OUT, "clip.json"), "w") as f:
        json.dump({**meta, "cases": clip}, f)


if __name__ == "__main__":
    main()
