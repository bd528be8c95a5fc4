"""Writes the distributed-algorithm parity fixtures to tests/fixtures/algorithms_*.safetensors
(see tests/fixtures/README.md, "Algorithm fixtures"; update rules in tests/reference/algo_ref.py).

    /usr/bin/python3 tests/reference/make_algo_fixtures.py [OUT_DIR]

Deterministic: the same torch version writes byte-identical files. Asserts its own cross-checks
(data parallel = large batch, Streaming tau=0 P=1 = DiLoCo, ...) before writing.
"""

import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import algo_ref  # noqa: E402
from algo_ref import INNER, random_batch  # noqa: E402
from make_fixtures import GQA_CONFIG, make_model  # noqa: E402
from safetensors_io import load_file, save_file  # noqa: E402

GENERATOR = "tests/reference/make_algo_fixtures.py"
MODEL_SEED = 1234  # the llama_gqa fixture's parameters
BATCH_SEED = 100  # replica m's batch: torch.Generator seeded BATCH_SEED + m


def initial_model():
    return make_model(GQA_CONFIG, MODEL_SEED)[0]


def batches(replicas):
    return [random_batch(GQA_CONFIG["vocab_size"], BATCH_SEED + m) for m in range(replicas)]


def prefixed(prefix, params):
    return {f"{prefix}/{n}": t.detach().clone() for n, t in params.items()}


def batch_tensors(prefix, data):
    out = {}
    for m, (ids, labels) in enumerate(data):
        out[f"{prefix}input_ids/{m}"] = ids
        out[f"{prefix}labels/{m}"] = labels
    return out


def loss_tensors(prefix, losses):
    return {f"{prefix}loss/{m}/{k}": loss for m, per in enumerate(losses)
            for k, loss in enumerate(per)}


def max_diff(a, b):
    return max((a[n] - b[n]).abs().max().item() for n in a)


def write(path, tensors, hyperparameters):
    meta = {"config": json.dumps(GQA_CONFIG, sort_keys=True),
            "inner": json.dumps(INNER, sort_keys=True),
            "hyperparameters": json.dumps(hyperparameters, sort_keys=True),
            "generator": GENERATOR}
    save_file(tensors, path, meta)
    print(f"wrote {path} ({os.path.getsize(path)} bytes)")


def ddp_fixture(path):
    data = batches(2)
    steps = 2
    losses, after = algo_ref.run_data_parallel_large_batch(initial_model, data, steps)
    # Self-check: the mean of the replicas' gradients is the large batch's gradient.
    rep_losses, rep_params = algo_ref.run_data_parallel_replicas(initial_model, data, steps)
    for m in range(2):
        assert max_diff(rep_params[m], after) < 1e-13, "DDP replicas != large batch"
    assert all(abs(a - b) < 1e-14 for a, b in zip(losses, rep_losses))
    tensors = {**prefixed("param", algo_ref.named(initial_model())), **batch_tensors("", data),
               **{f"loss/{k}": loss for k, loss in enumerate(losses)}, **prefixed("after", after)}
    write(path, tensors, {"replicas": 2, "steps": steps,
                          "reference": "one model on the (4, 7) concatenation of the replicas' "
                                       "rows (replica 0 first), loss = mean over all positions"})


DILOCO = {"replicas": 2, "sync_every": 3, "rounds": 2, "outer_lr": 0.7, "outer_momentum": 0.9}
LOCALSGD = {"replicas": 2, "sync_every": 3, "rounds": 1, "outer_lr": 1.0, "outer_momentum": 0.0}


def diloco_fixture(path):
    data = batches(DILOCO["replicas"])
    losses, globals_, buffers = algo_ref.run_diloco(
        initial_model, data, DILOCO["sync_every"], DILOCO["rounds"], DILOCO["outer_lr"],
        DILOCO["outer_momentum"])
    sgd_losses, sgd_globals, _ = algo_ref.run_diloco(
        initial_model, data, LOCALSGD["sync_every"], LOCALSGD["rounds"], LOCALSGD["outer_lr"],
        LOCALSGD["outer_momentum"])
    # Self-checks: both start like DiLoCo; Local SGD's global is the plain average of the replicas.
    assert all(torch.equal(a, b) for a, b in zip(losses[0][:3], sgd_losses[0][:3]))
    replicas = [algo_ref.Replica(initial_model, b) for b in data]
    for k in range(3):
        for r in replicas:
            r.inner_step(k)
    assert max_diff(sgd_globals[0], algo_ref.mean_of([r.params() for r in replicas])) < 1e-15
    tensors = {**prefixed("param", algo_ref.named(initial_model())), **batch_tensors("", data),
               **loss_tensors("", losses), **prefixed("momentum/1", buffers[1]),
               **prefixed("localsgd/global", sgd_globals[0])}
    for r, theta in enumerate(globals_):
        tensors.update(prefixed(f"global/{r}", theta))
    write(path, tensors, {"diloco": DILOCO, "localsgd": LOCALSGD})
    return globals_


NOLOCO = {"sync_every": 2, "rounds": 2, "momentum": 0.5, "beta": 0.7, "gamma": 0.6,
          "groups": "one group holding every replica (M = 2 or 3)"}


def noloco_fixture(path):
    tensors = {**prefixed("param", algo_ref.named(initial_model()))}
    for replicas in (2, 3):
        data = batches(replicas)
        losses, phis = algo_ref.run_noloco(initial_model, data, NOLOCO["sync_every"],
                                           NOLOCO["rounds"], NOLOCO["momentum"], NOLOCO["beta"],
                                           NOLOCO["gamma"])
        # Self-check: one group starting from identical weights keeps identical slow weights, so
        # each round's phi is stored once (phi/<round>/<name>) and holds for every replica.
        for phi in phis:
            assert all(max_diff(phi[0], p) == 0 for p in phi[1:])
        prefix = f"m{replicas}/"
        tensors.update(batch_tensors(prefix, data))
        tensors.update(loss_tensors(prefix, losses))
        for r, phi in enumerate(phis):
            tensors.update(prefixed(f"{prefix}phi/{r}", phi[0]))
    write(path, tensors, {"noloco": NOLOCO, "cases": ["m2/", "m3/"],
                          "phi": "phi/<round>/<name>: identical on every replica of the case"})


NOLOCO_M4 = dict(NOLOCO, replicas=4, groups=[[[0, 1], [2, 3]], [[0, 2], [1, 3]]])
NOLOCO_M4["groups_note"] = ("groups[r]: the pairs of round r; pairs change between rounds so that the "
                            "slow weights of a pair differ and the gamma term is exercised")


def noloco_m4_fixture(path):
    data = batches(4)
    c = NOLOCO_M4
    losses, phis = algo_ref.run_noloco(initial_model, data, c["sync_every"], c["rounds"],
                                       c["momentum"], c["beta"], c["gamma"], c["groups"])
    # Self-check: pairs share phi after round 0; after round 1 every replica's phi is its own.
    assert max_diff(phis[0][0], phis[0][1]) == 0 and max_diff(phis[0][2], phis[0][3]) == 0
    assert max_diff(phis[0][0], phis[0][2]) > 1e-3
    assert min(max_diff(phis[1][i], phis[1][j]) for i in range(4) for j in range(i)) > 1e-4
    tensors = {**prefixed("param", algo_ref.named(initial_model())), **batch_tensors("", data),
               **loss_tensors("", losses)}
    for m, p in enumerate(phis[1]):
        tensors.update(prefixed(f"phi/1/{m}", p))
    write(path, tensors, {"noloco": c})


def strided_fragments(names):
    """P = 2 strided fragments of the 2-layer model: layer 0 + embeddings, layer 1 + norm + head."""
    first = [n for n in names if n.startswith("model.layers.0.") or n == "model.embed_tokens.weight"]
    second = [n for n in names if n not in first]
    assert all(n.startswith("model.layers.1.") or n in ("model.norm.weight", "lm_head.weight")
               for n in second)
    return [first, second]


STREAMING = {"replicas": 2, "fragments": 2, "assignment": "strided", "sync_every": 4,
             "overlap": 1, "mix": 0.5, "outer_lr": 0.4, "outer_momentum": 0.9, "steps": 7,
             "exchange": "full precision (fp32 codec, no quantisation)"}
STREAMING_TAU0 = {"replicas": 2, "fragments": 1, "sync_every": 3, "overlap": 0,
                  "outer_lr": 0.7, "outer_momentum": 0.9, "steps": 6}


def streaming_fixture(path, diloco_globals):
    data = batches(STREAMING["replicas"])
    names = list(algo_ref.named(initial_model()))
    fragments = strided_fragments(names)
    s = STREAMING
    losses, theta_g, theta_m, events = algo_ref.run_streaming(
        initial_model, data, fragments, s["sync_every"], s["overlap"], s["mix"], s["outer_lr"],
        s["outer_momentum"], s["steps"])
    assert events == ["send fragment 1 at 2", "apply fragment 1 at 3", "send fragment 0 at 4",
                      "apply fragment 0 at 5", "send fragment 1 at 6", "apply fragment 1 at 7",
                      "final sync fragment 0 at 7", "final sync fragment 1 at 7"], events
    for params in theta_m:
        assert max_diff(params, theta_g) == 0
    s0 = STREAMING_TAU0
    tau0_losses, tau0_g, tau0_m, tau0_events = algo_ref.run_streaming(
        initial_model, data, [names], s0["sync_every"], 0, 0.5, s0["outer_lr"],
        s0["outer_momentum"], s0["steps"])
    assert tau0_events == ["sync fragment 0 at 3", "final sync fragment 0 at 6"], tau0_events
    for params in tau0_m:
        assert max_diff(params, tau0_g) == 0
    # Self-check: tau = 0, P = 1 is DiLoCo (docs/algorithm-reference.md §4).
    assert max_diff(tau0_g, diloco_globals[1]) < 1e-15, max_diff(tau0_g, diloco_globals[1])
    tensors = {**prefixed("param", algo_ref.named(initial_model())), **batch_tensors("", data),
               **loss_tensors("", losses), **prefixed("global", theta_g),
               **loss_tensors("tau0/", tau0_losses), **prefixed("tau0/global", tau0_g)}
    for m, params in enumerate(theta_m):
        tensors.update(prefixed(f"replica/{m}", params))
    write(path, tensors, {"streaming": STREAMING, "tau0": STREAMING_TAU0,
                          "fragments": {str(p): f for p, f in enumerate(fragments)},
                          "events": events, "tau0_events": tau0_events})


def negative_controls(out):
    """Wrong variants the C++ tests must be able to tell apart: each differs from the fixture by far
    more than the tests' 1e-10 tolerance. Prints the max |difference| of each."""
    def load(name):
        return load_file(os.path.join(out, f"algorithms_{name}.safetensors"))[0]

    def group(tensors, prefix):
        return {k[len(prefix) + 1:]: v for k, v in tensors.items() if k.startswith(prefix + "/")}

    margins = {}
    ddp = load("ddp")
    alone = algo_ref.run_diloco(initial_model, batches(1), 2, 1, 1.0, 0.0)[1][0]
    margins["ddp: replica 0 alone (no gradient averaging)"] = max_diff(alone, group(ddp, "after"))
    diloco = load("diloco")
    g1 = group(diloco, "global/1")
    for label, eta, mu in [("plain average (eta 1, mu 0)", 1.0, 0.0),
                           ("flipped sign (eta -0.7)", -0.7, 0.9), ("no momentum (mu 0)", 0.7, 0.0)]:
        wrong = algo_ref.run_diloco(initial_model, batches(2), 3, 2, eta, mu)[1][1]
        margins[f"diloco global/1: {label}"] = max_diff(wrong, g1)
    noloco = load("noloco")
    for replicas in (2, 3):
        phi = group(noloco, f"m{replicas}/phi/1")
        for label, a, b, c in [("beta and gamma swapped", 0.5, 0.6, 0.7),
                               ("no momentum (alpha 0)", 0.0, 0.7, 0.6)]:
            wrong = algo_ref.run_noloco(initial_model, batches(replicas), 2, 2, a, b, c)[1][1][0]
            margins[f"noloco m{replicas} phi/1: {label}"] = max_diff(wrong, phi)
    m4 = load("noloco_m4")
    c = NOLOCO_M4
    for label, a, b, g, groups in [("no consensus term (gamma 0)", 0.5, 0.7, 0.0, c["groups"]),
                                   ("beta and gamma swapped", 0.5, 0.6, 0.7, c["groups"]),
                                   ("one group of four", 0.5, 0.7, 0.6, None)]:
        wrong = algo_ref.run_noloco(initial_model, batches(4), 2, 2, a, b, g, groups)[1][1]
        margins[f"noloco_m4 phi/1: {label}"] = max(
            max_diff(wrong[m], group(m4, f"phi/1/{m}")) for m in range(4))
    streaming = load("streaming")
    theta_g = group(streaming, "global")
    names = list(theta_g)
    frags = strided_fragments(names)
    for label, fr, tau, mix in [("no mixing (alpha 0)", frags, 1, 0.0), ("tau 0", frags, 0, 0.5),
                                ("fragment offsets swapped", frags[::-1], 1, 0.5),
                                ("one fragment", [names], 1, 0.5)]:
        wrong = algo_ref.run_streaming(initial_model, batches(2), fr, 4, tau, mix, 0.4, 0.9, 7)[1]
        margins[f"streaming global: {label}"] = max_diff(wrong, theta_g)
    for label, margin in margins.items():
        print(f"negative control {label}: max |diff| {margin:.3g}")
        assert margin > 1e-3, label


def write_fixtures(out):
    os.makedirs(out, exist_ok=True)
    torch.set_num_threads(1)  # reductions in one fixed order
    ddp_fixture(os.path.join(out, "algorithms_ddp.safetensors"))
    diloco_globals = diloco_fixture(os.path.join(out, "algorithms_diloco.safetensors"))
    noloco_fixture(os.path.join(out, "algorithms_noloco.safetensors"))
    noloco_m4_fixture(os.path.join(out, "algorithms_noloco_m4.safetensors"))
    streaming_fixture(os.path.join(out, "algorithms_streaming.safetensors"), diloco_globals)
    negative_controls(out)


def main():
    default_out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures")
    write_fixtures(os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else default_out))


if __name__ == "__main__":
    main()
