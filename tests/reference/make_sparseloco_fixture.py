"""Writes tests/fixtures/sparseloco.safetensors: rounds of SparseLoCo's error feedback, sparse exchange and outer
step on known numbers (tests/reference/sparseloco_ref.py), for the C++ test of the codec and the accumulator
(tests/unit/sparse_topk_test.cpp).

    /usr/bin/python3 tests/reference/make_sparseloco_fixture.py [OUT_DIR]

Deterministic. Tensors (all float32, except indices and codes as int64), for case C, round t, replica r and
tensor name n (shapes in the metadata):
    C/theta0/n, C/delta/t/r/n                      inputs
    C/e/t/r/n, C/indices/t/r/n, C/codes/t/r/n,
    C/lookup/t/r/n, C/shift/t/r/n, C/theta/t/n      expected after round t
Metadata "cases": JSON {C: {k, bits, beta, eta, replicas, rounds, shapes: {n: [..]}}}.
"""

import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sparseloco_ref as ref  # noqa: E402
from safetensors_io import save_file  # noqa: E402

SHAPES = {"w2d": [32, 128], "odd2d": [40, 30], "bias": [96], "prime": [7]}
CASES = {
    "two_bit": {"k": 64, "bits": 2, "beta": 0.95, "eta": 1.0, "replicas": 3, "rounds": 2, "seed": 7},
    "four_bit": {"k": 32, "bits": 4, "beta": 0.9, "eta": 0.7, "replicas": 2, "rounds": 2, "seed": 11},
}


def run_case(name, case, out):
    g = torch.Generator().manual_seed(case["seed"])
    theta = {n: torch.randn(s, generator=g, dtype=torch.float32) for n, s in SHAPES.items()}
    for n, t in theta.items():
        out[f"{name}/theta0/{n}"] = t.clone()
    e = [{n: torch.zeros(s, dtype=torch.float32) for n, s in SHAPES.items()} for _ in range(case["replicas"])]
    for t in range(case["rounds"]):
        contributions = {n: [] for n in SHAPES}
        for r in range(case["replicas"]):
            for n, s in SHAPES.items():
                # Pseudo-gradients of mixed scale, so that tiles differ and the quantiser's bins are all used.
                delta = torch.randn(s, generator=g, dtype=torch.float32) * (0.01 * (1 + r))
                out[f"{name}/delta/{t}/{r}/{n}"] = delta
                e[r][n], indices, sent, codes, lookup, shift = ref.error_feedback(
                    e[r][n], delta, case["beta"], case["k"], case["bits"])
                out[f"{name}/e/{t}/{r}/{n}"] = e[r][n].clone()
                out[f"{name}/indices/{t}/{r}/{n}"] = torch.tensor(indices, dtype=torch.int64)
                out[f"{name}/codes/{t}/{r}/{n}"] = codes.clone()
                out[f"{name}/lookup/{t}/{r}/{n}"] = lookup.clone()
                out[f"{name}/shift/{t}/{r}/{n}"] = shift.reshape(1).clone()
                contributions[n].append((indices, sent))
        for n in SHAPES:
            aggregated = ref.aggregate(contributions[n], theta[n].numel())
            theta[n] = ref.outer_step(theta[n], aggregated, case["eta"])
            out[f"{name}/theta/{t}/{n}"] = theta[n].clone()


def self_checks():
    # The reference's own rules on hand-computed numbers, so that the transcription is not only self-consistent.
    assert ref.largest_divisor_at_most(96, 64) == 48 and ref.largest_divisor_at_most(7, 64) == 7
    assert ref.tile_k(64, 7) == 6 and ref.tile_k(64, 4096) == 64 and ref.tile_k(1, 1) == 1 and ref.tile_k(64, 3) == 2
    assert ref.tiles([2, 3])[0] == [0, 1, 2, 3, 4, 5]
    e = torch.tensor([0.5, -3.0, 2.0, -2.0, 0.1, 1.0], dtype=torch.float32)
    assert ref.select(e, (6,), 2) == [1, 2]  # |-3| first; 2.0 and -2.0 tie, the lower index wins
    codes, lookup, shift = ref.quantise(torch.tensor([1.0, -1.0, 1.0, -1.0]), 2)
    # mean 0, sigma = sqrt(4/3), scale = 1.5 sigma: c / scale = +-0.577 -> round(2.577) = 3, round(1.423) = 1
    assert codes.tolist() == [3, 1, 3, 1] and shift.item() == 0.0
    assert lookup.tolist() == [0.0, -1.0, 0.0, 1.0]


def main():
    self_checks()
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "fixtures")
    tensors = {}
    for name, case in CASES.items():
        run_case(name, case, tensors)
    cases = {name: {**{k: v for k, v in case.items() if k != "seed"}, "shapes": SHAPES} for name, case in CASES.items()}
    save_file(tensors, os.path.join(out_dir, "sparseloco.safetensors"),
              {"cases": json.dumps(cases, sort_keys=True), "generator": "tests/reference/make_sparseloco_fixture.py"})
    print(f"wrote {len(tensors)} tensors")


if __name__ == "__main__":
    main()
