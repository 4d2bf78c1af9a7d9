#!/usr/bin/env python3
"""Reads a comlrl run's TensorBoard event files with the `tensorboard` package and compares every
scalar with the run's metrics.jsonl: the same tags, and per tag the same (step, value) points in the
same order (values as float32, as TensorBoard stores them; a null in metrics.jsonl is NaN).

Usage: python3 scripts/tensorboard-readback.py RUN_DIR [--quiet]
Needs `tensorboard` importable (pip install tensorboard, or PYTHONPATH=<folder it is in>).
Prints one line per tag and a verdict; exits 0 when everything matches, 1 on any difference,
2 when the run directory or the tensorboard package is missing.
"""
import json
import math
import os
import struct
import sys


def float32(v):
    """The float32 TensorBoard stores for a JSON number (booleans as 1/0, null as NaN)."""
    if v is None:
        return math.nan
    v = float(v)
    try:
        return struct.unpack("<f", struct.pack("<f", v))[0]
    except OverflowError:
        return math.copysign(math.inf, v)


def same(a, b):
    return (math.isnan(a) and math.isnan(b)) or a == b


def read_metrics(path):
    """metrics.jsonl's rows; a torn last line (a crash mid-write) is dropped, as comlrl does."""
    with open(path, encoding="utf-8") as f:
        lines = [line for line in f.read().split("\n") if line.strip()]
    rows = []
    for i, line in enumerate(lines):
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            if i == len(lines) - 1:
                break
            raise SystemExit(f"{path}:{i + 1}: not valid JSON")
    return rows


def expected_points(rows):
    """tag -> [(step, float32 value)] in row order, for every non-string value of every row."""
    points = {}
    for row in rows:
        step = row["step"]
        for key, value in row.items():
            if key == "step" or isinstance(value, str):
                continue
            points.setdefault(key, []).append((step, float32(value)))
    return points


def main(argv):
    args = [a for a in argv if not a.startswith("--")]
    quiet = "--quiet" in argv
    if len(args) != 1:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    run = args[0]
    metrics_path = os.path.join(run, "metrics.jsonl")
    tb_dir = os.path.join(run, "tensorboard")
    for p in (metrics_path, tb_dir):
        if not os.path.exists(p):
            print(f"missing {p} (was the run trained with logging.tensorboard: true?)", file=sys.stderr)
            return 2
    try:
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    except ImportError as e:
        print(f"cannot import tensorboard ({e}); pip install tensorboard, or set PYTHONPATH", file=sys.stderr)
        return 2

    # size_guidance 0: keep every point (the default samples 10,000 per tag).
    acc = EventAccumulator(tb_dir, size_guidance={"scalars": 0})
    acc.Reload()
    actual = {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}
    expected = expected_points(read_metrics(metrics_path))

    problems = []
    for tag in sorted(set(expected) | set(actual)):
        want, got = expected.get(tag), actual.get(tag)
        if want is None:
            problems.append(f"{tag}: in TensorBoard, not in metrics.jsonl")
            continue
        if got is None:
            problems.append(f"{tag}: in metrics.jsonl, not in TensorBoard")
            continue
        if len(want) != len(got):
            problems.append(f"{tag}: {len(want)} points in metrics.jsonl, {len(got)} in TensorBoard")
        for i, ((ws, wv), (gs, gv)) in enumerate(zip(want, got)):
            if ws != gs or not same(wv, gv):
                problems.append(f"{tag}: point {i}: metrics.jsonl step {ws} value {wv!r}, TensorBoard step {gs} value {gv!r}")
                break
        if not quiet:
            last_step, last_value = got[-1]
            print(f"{tag:48s} {len(got):5d} points  steps {got[0][0]}..{last_step}  last {last_value:.6g}")

    points = sum(len(v) for v in actual.values())
    if problems:
        for p in problems:
            print(f"MISMATCH {p}")
        print(f"FAILED: {len(problems)} difference(s) between {tb_dir} and {metrics_path}")
        return 1
    print(f"OK: {len(actual)} tags, {points} points in {tb_dir} match {metrics_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
