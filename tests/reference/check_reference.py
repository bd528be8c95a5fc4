"""Self-checks of the reference code: run before trusting regenerated fixtures.

    /usr/bin/python3 tests/reference/check_reference.py

Checks llama_ref against autograd gradcheck, against a loop-by-loop forward written from the
formulas, GQA against MHA with duplicated key/value heads, RoPE's relative-position property,
causality; safetensors_io round trips and rejects malformed files; AdamW + clipping against the
update rule written out by hand; and the fixture files on disk against a fresh computation.
"""

import json
import math
import os
import struct
import sys
import tempfile

import torch
import torch.nn.functional as F
from torch.nn.utils.stateless import functional_call

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_fixtures  # noqa: E402
from llama_ref import LlamaForCausalLM, causal_lm_loss, decay_groups  # noqa: E402
from safetensors_io import SafetensorsError, deserialize, load_file, serialize  # noqa: E402

TINY = {"vocab_size": 11, "hidden_size": 8, "intermediate_size": 12, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "rope_theta": 100.0,
        "rms_norm_eps": 1e-5, "tie_word_embeddings": False}
FAILURES = []


def check(name, ok, detail=""):
    print(f"{'ok  ' if ok else 'FAIL'} {name} {detail}")
    if not ok:
        FAILURES.append(name)


def randomised(config, seed=0):
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config).double()
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(1.0 + 0.1 * torch.randn_like(p) if p.dim() == 1 else 0.3 * torch.randn_like(p))
    return model


def naive_logits(params, cfg, ids):
    """Loop-by-loop forward for one sequence, from the formulas, no shared helpers."""
    c, nh, nkv = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    d, eps, theta = c // nh, cfg["rms_norm_eps"], cfg["rope_theta"]

    def rms(x, w):
        return w * x / math.sqrt(sum(v * v for v in x.tolist()) / len(x) + eps)

    def rope(vec, pos):
        out = vec.clone()
        for j in range(d // 2):
            a = pos / theta ** (2 * j / d)
            x1, x2 = vec[j], vec[j + d // 2]
            out[j] = x1 * math.cos(a) - x2 * math.sin(a)
            out[j + d // 2] = x2 * math.cos(a) + x1 * math.sin(a)
        return out

    xs = [params["model.embed_tokens.weight"][i].clone() for i in ids.tolist()]
    for layer in range(cfg["num_hidden_layers"]):
        p = {k.split(f"model.layers.{layer}.")[1]: v for k, v in params.items()
             if k.startswith(f"model.layers.{layer}.")}
        hs = [rms(x, p["input_layernorm.weight"]) for x in xs]
        q = [(p["self_attn.q_proj.weight"] @ h).view(nh, d) for h in hs]
        k = [(p["self_attn.k_proj.weight"] @ h).view(nkv, d) for h in hs]
        v = [(p["self_attn.v_proj.weight"] @ h).view(nkv, d) for h in hs]
        new_xs = []
        for t in range(len(xs)):
            heads = []
            for h in range(nh):
                g = h // (nh // nkv)
                qt = rope(q[t][h], t)
                scores = torch.stack([rope(k[s][g], s) @ qt / math.sqrt(d) for s in range(t + 1)])
                w = torch.exp(scores - scores.max())
                w = w / w.sum()
                heads.append(sum(w[s] * v[s][g] for s in range(t + 1)))
            x = xs[t] + p["self_attn.o_proj.weight"] @ torch.cat(heads)
            hn = rms(x, p["post_attention_layernorm.weight"])
            gate = p["mlp.gate_proj.weight"] @ hn
            act = gate / (1 + torch.exp(-gate)) * (p["mlp.up_proj.weight"] @ hn)
            new_xs.append(x + p["mlp.down_proj.weight"] @ act)
        xs = new_xs
    out_w = params.get("lm_head.weight", params["model.embed_tokens.weight"])
    return torch.stack([out_w @ rms(x, params["model.norm.weight"]) for x in xs])


def check_model():
    for cfg in (TINY, dict(TINY, num_key_value_heads=4, tie_word_embeddings=True),
                dict(TINY, num_key_value_heads=1)):
        model = randomised(cfg)
        ids = torch.tensor([[3, 1, 4, 1, 5], [9, 2, 6, 5, 3]])
        logits = model(ids)
        params = {n: p.detach() for n, p in model.named_parameters()}
        expect = torch.stack([naive_logits(params, model.config, row) for row in ids])
        diff = (logits - expect).abs().max().item()
        check(f"forward == naive loops (kv={cfg['num_key_value_heads']}, "
              f"tied={cfg['tie_word_embeddings']})", diff < 1e-12, f"max diff {diff:.2e}")

    # GQA equals MHA whose key/value heads are duplicated: query head h reads kv head h // n_rep.
    gqa = randomised(TINY)
    mha = LlamaForCausalLM(dict(TINY, num_key_value_heads=4)).double()
    d = TINY["hidden_size"] // TINY["num_attention_heads"]
    with torch.no_grad():
        for (name, p_mha), p_gqa in zip(mha.named_parameters(), gqa.parameters()):
            if name.endswith(("k_proj.weight", "v_proj.weight")):
                p_mha.copy_(p_gqa.view(2, d, -1).repeat_interleave(2, dim=0).reshape(p_mha.shape))
            else:
                p_mha.copy_(p_gqa)
    ids = torch.randint(0, TINY["vocab_size"], (3, 6))
    diff = (gqa(ids) - mha(ids)).abs().max().item()
    check("GQA == MHA with duplicated kv heads", diff < 1e-12, f"max diff {diff:.2e}")

    # Causality: changing a later token leaves earlier logits unchanged.
    ids2 = ids.clone()
    ids2[:, 4] = (ids2[:, 4] + 1) % TINY["vocab_size"]
    a, b = gqa(ids), gqa(ids2)
    check("causal", torch.equal(a[:, :4], b[:, :4]) and not torch.equal(a[:, 4:], b[:, 4:]))

    # RoPE: q.k after rotation depends on positions only through their difference.
    from llama_ref import apply_rotary, rotary_cos_sin
    cos, sin = rotary_cos_sin(12, 8, 100.0, torch.float64)
    q, k = torch.randn(8, dtype=torch.float64), torch.randn(8, dtype=torch.float64)
    rq = apply_rotary(q.expand(1, 1, 12, 8), cos, sin)[0, 0]
    rk = apply_rotary(k.expand(1, 1, 12, 8), cos, sin)[0, 0]
    dots = [rq[m] @ rk[m - 3] for m in range(3, 12)]
    spread = (max(dots) - min(dots)).item()
    check("RoPE relative position", spread < 1e-12, f"spread {spread:.2e}")

    # Gradients: gradcheck of loss w.r.t. every parameter at once.
    model = randomised(dict(TINY, num_hidden_layers=1))
    names = [n for n, _ in model.named_parameters()]
    shapes = [p.shape for p in model.parameters()]
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()]).requires_grad_()
    ids = torch.tensor([[1, 7, 3, 10], [0, 2, 2, 5]])
    labels = torch.tensor([[7, 3, 10, 4], [2, 2, 5, 9]])

    def loss_of(vec):
        params, i = {}, 0
        for n, s in zip(names, shapes):
            params[n] = vec[i:i + s.numel()].view(s)
            i += s.numel()
        return causal_lm_loss(functional_call(model, params, (ids,)), labels)

    check("gradcheck loss w.r.t. all parameters",
          torch.autograd.gradcheck(loss_of, (flat,), eps=1e-6, atol=1e-7, rtol=1e-5))

    # float32 model agrees with float64 to float32 precision; RMSNorm keeps float32 stats.
    m64 = randomised(TINY)
    m32 = randomised(TINY).float()
    ids = torch.randint(0, TINY["vocab_size"], (2, 5))
    diff = (m64(ids) - m32(ids).double()).abs().max().item()
    check("float32 forward ~ float64 forward", diff < 1e-5, f"max diff {diff:.2e}")


def check_safetensors():
    tensors = {"b": torch.randn(3, 2, dtype=torch.float64), "a": torch.arange(5),
               "c": torch.randn(4).to(torch.bfloat16), "s": torch.tensor(2.5),
               "e": torch.zeros(0, 3), "f": torch.tensor([True, False]),
               "h": torch.randn(3).half(), "i": torch.tensor([-1, 2], dtype=torch.int32),
               "u": torch.tensor([1, 255], dtype=torch.uint8)}
    blob = serialize(tensors, {"k": "v"})
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    check("safetensors header padded to 8", (8 + n) % 8 == 0 and blob[8 + n - 1:8 + n] in b" }")
    names = [k for k in header if k != "__metadata__"]
    check("safetensors names sorted, laid out in order",
          names == sorted(names) and [header[k]["data_offsets"][0] for k in names]
          == sorted(header[k]["data_offsets"][0] for k in names))
    back, meta = deserialize(blob)
    same = set(back) == set(tensors) and all(
        back[k].dtype == t.dtype and back[k].shape == t.shape and torch.equal(back[k], t)
        for k, t in tensors.items())
    check("safetensors round trip", same and meta == {"k": "v"})
    check("safetensors scalar shape []", header["s"]["shape"] == [] and back["s"].dim() == 0)

    def rejects(blob_bad):
        try:
            deserialize(blob_bad)
        except SafetensorsError:
            return True
        return False

    def with_header(h, data):
        hb = json.dumps(h).encode()
        return struct.pack("<Q", len(hb)) + hb + data

    good = {"x": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}
    check("safetensors accepts minimal file", not rejects(with_header(good, bytes(8))))
    bad_cases = {
        "truncated": blob[:-1],
        "trailing bytes": blob + b"\0",
        "short": b"\1\2",
        "huge header length": struct.pack("<Q", 1 << 40) + blob[8:],
        "not json": struct.pack("<Q", 3) + b"{x}",
        "bad dtype": with_header({"x": dict(good["x"], dtype="F99")}, bytes(8)),
        "size mismatch": with_header({"x": dict(good["x"], shape=[3])}, bytes(8)),
        "gap": with_header({"x": dict(good["x"], data_offsets=[4, 12])}, bytes(12)),
        "overlap": with_header({"x": good["x"], "y": good["x"]}, bytes(8)),
        "metadata not strings": with_header({**good, "__metadata__": {"a": 1}}, bytes(8)),
    }
    for name, bad in bad_cases.items():
        check(f"safetensors rejects {name}", rejects(bad))


def check_adamw_rule():
    """torch AdamW + clip_grad_norm_ == the update written out (what the C++ side implements)."""
    model = randomised(TINY, seed=3)
    manual = {n: p.detach().clone() for n, p in model.named_parameters()}
    m = {n: torch.zeros_like(p) for n, p in manual.items()}
    v = {n: torch.zeros_like(p) for n, p in manual.items()}
    b1, b2, eps, wd, clip = 0.9, 0.95, 1e-8, 0.1, 0.5
    opt = torch.optim.AdamW(decay_groups(model, wd), lr=1.0, betas=(b1, b2), eps=eps)
    ids = torch.randint(0, TINY["vocab_size"], (2, 6))
    labels = torch.randint(0, TINY["vocab_size"], (2, 6))
    for step, lr in enumerate([3e-2, 2e-2, 1e-2], start=1):
        for g in opt.param_groups:
            g["lr"] = lr
        opt.zero_grad(set_to_none=True)
        causal_lm_loss(model(ids), labels).backward()
        grads = {n: p.grad.detach().clone() for n, p in model.named_parameters()}
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        total = math.sqrt(sum(float((g ** 2).sum()) for g in grads.values()))
        coef = min(1.0, clip / (total + 1e-6))
        for n, p in manual.items():
            g = grads[n] * coef
            p.mul_(1 - lr * (wd if p.dim() >= 2 else 0.0))
            m[n] = b1 * m[n] + (1 - b1) * g
            v[n] = b2 * v[n] + (1 - b2) * g * g
            denom = (v[n] / (1 - b2 ** step)).sqrt() + eps
            p.sub_(lr * (m[n] / (1 - b1 ** step)) / denom)
    diff = max((manual[n] - p).abs().max().item() for n, p in model.named_parameters())
    check("AdamW + clip == written-out rule", diff < 1e-12, f"max diff {diff:.2e}")


def check_fixture_files():
    fixtures = os.path.join(HERE, "..", "fixtures")
    with tempfile.TemporaryDirectory() as tmp:
        make_fixtures.write_fixtures(tmp)
        for name in ("llama_gqa", "llama_tied", "adamw"):
            committed = os.path.join(fixtures, f"{name}.safetensors")
            if not os.path.exists(committed):
                check(f"{name} fixture exists", False)
                continue
            with open(committed, "rb") as f1, open(os.path.join(tmp, f"{name}.safetensors"),
                                                   "rb") as f2:
                check(f"{name} fixture is reproducible byte for byte", f1.read() == f2.read())
    gqa, meta = load_file(os.path.join(fixtures, "llama_gqa.safetensors"))
    adamw, _ = load_file(os.path.join(fixtures, "adamw.safetensors"))
    same_start = all(torch.equal(adamw[k], t) for k, t in gqa.items()
                     if k.startswith("param/") or k in ("input_ids", "labels"))
    check("adamw starts from llama_gqa's params and batch", same_start)
    check("adamw loss/0 == llama_gqa loss", torch.equal(adamw["loss/0"], gqa["loss"]))
    config = json.loads(meta["config"])
    model = LlamaForCausalLM(config).double()
    model.load_state_dict({k[len("param/"):]: t for k, t in gqa.items() if k.startswith("param/")})
    logits = model(gqa["input_ids"])
    check("llama_gqa logits reproduce from its params", torch.allclose(logits, gqa["logits"],
                                                                       rtol=0, atol=1e-14))


def check_export_checker():
    """check_export.py: 0 on a faithful export, 1 on wrong logits, 2 on malformed exports."""
    import subprocess
    from safetensors_io import save_file
    config = dict(make_fixtures.GQA_CONFIG, model_type="llama",
                  architectures=["LlamaForCausalLM"], torch_dtype="float32")
    model = randomised(make_fixtures.GQA_CONFIG).float()
    ids = torch.randint(0, 32, (2, 9))
    with torch.no_grad():
        logits = model(ids)
    weights = {n: p.detach() for n, p in model.named_parameters()}

    def run(cfg, tensors, expected_logits, metadata=None):
        with tempfile.TemporaryDirectory() as tmp:
            with open(os.path.join(tmp, "config.json"), "w") as f:
                json.dump(cfg, f)
            save_file(tensors, os.path.join(tmp, "model.safetensors"), metadata)
            save_file({"input_ids": ids, "logits": expected_logits}, os.path.join(tmp, "e.st"))
            return subprocess.run([sys.executable, os.path.join(HERE, "check_export.py"), tmp,
                                   os.path.join(tmp, "e.st")], capture_output=True).returncode

    pt = {"format": "pt"}
    check("check_export accepts a faithful export", run(config, weights, logits, pt) == 0)
    check("check_export exit 1 on wrong logits", run(config, weights, logits + 1e-3, pt) == 1)
    no_eps = {k: v for k, v in config.items() if k != "rms_norm_eps"}
    cases = {
        "missing config key": run(no_eps, weights, logits, pt),
        "missing tensor": run(config, {k: v for k, v in weights.items()
                                       if k != "lm_head.weight"}, logits, pt),
        "unexpected tensor": run(config, {**weights, "extra": torch.zeros(1)}, logits, pt),
        "float64 tensors": run(config, {k: v.double() for k, v in weights.items()}, logits, pt),
        "bad metadata format": run(config, weights, logits, {"format": "np"}),
        "logits shape": run(config, weights, logits[:, :-1], pt),
    }
    for name, code in cases.items():
        check(f"check_export exit 2 on {name}", code == 2, f"(got {code})")

    tied_cfg = dict(config, tie_word_embeddings=True)
    tied = randomised(tied_cfg).float()
    with torch.no_grad():
        tied_logits = tied(ids)
    tied_weights = {n: p.detach() for n, p in tied.named_parameters()}
    check("check_export accepts a tied export without lm_head",
          run(tied_cfg, tied_weights, tied_logits, pt) == 0)
    check("check_export exit 2 on lm_head in a tied export",
          run(tied_cfg, {**tied_weights, "lm_head.weight": tied_weights[
              "model.embed_tokens.weight"].clone()}, tied_logits, pt) == 2)


if __name__ == "__main__":
    torch.set_num_threads(1)
    check_model()
    check_export_checker()
    check_safetensors()
    check_adamw_rule()
    check_fixture_files()
    print(f"{len(FAILURES)} failure(s)" + (": " + ", ".join(FAILURES) if FAILURES else ""))
    sys.exit(1 if FAILURES else 0)
