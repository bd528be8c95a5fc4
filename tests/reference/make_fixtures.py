"""Writes the Llama and AdamW parity fixtures to tests/fixtures/ (see tests/fixtures/README.md).

    /usr/bin/python3 tests/reference/make_fixtures.py [OUT_DIR]

Deterministic: the same torch version writes byte-identical files.
"""

import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llama_ref import LlamaForCausalLM, causal_lm_loss, decay_groups  # noqa: E402
from safetensors_io import save_file  # noqa: E402

GENERATOR = "tests/reference/make_fixtures.py"

GQA_CONFIG = {
    "vocab_size": 32,
    "hidden_size": 16,
    "intermediate_size": 40,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 16,
    "rope_theta": 10000.0,
    "rms_norm_eps": 1e-5,
    "tie_word_embeddings": False,
    "initializer_range": 0.02,
}
TIED_CONFIG = dict(GQA_CONFIG, tie_word_embeddings=True, num_key_value_heads=4)
BATCH, SEQ = 2, 7

ADAMW = {"betas": [0.9, 0.95], "eps": 1e-8, "weight_decay": 0.1, "max_grad_norm": 1.0,
         "lrs": [1e-2, 5e-3, 2.5e-3],
         "decay": "weight_decay applies to parameters with >= 2 dims; 1-d (norm) weights get 0",
         "clip": "torch.nn.utils.clip_grad_norm_ over all parameters before each step",
         "loss_i": "loss at the parameters before step i, same batch every step"}


def make_model(config, seed):
    """Float64 model with weights ~ normal(0, 0.2) and norm weights ~ 1 + normal(0, 0.1)."""
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config).double()
    with torch.no_grad():
        for _, p in model.named_parameters():
            if p.dim() == 1:
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, dtype=torch.float64))
            else:
                p.copy_(0.2 * torch.randn(p.shape, dtype=torch.float64))
    input_ids = torch.randint(0, config["vocab_size"], (BATCH, SEQ), dtype=torch.int64)
    labels = torch.randint(0, config["vocab_size"], (BATCH, SEQ), dtype=torch.int64)
    return model, input_ids, labels


def prefixed(prefix, named):
    return {f"{prefix}/{name}": t.detach().clone() for name, t in named}


def forward_fixture(config, seed, path):
    model, input_ids, labels = make_model(config, seed)
    params = prefixed("param", model.named_parameters())
    logits = model(input_ids)
    loss = causal_lm_loss(logits, labels)
    loss.backward()
    tensors = {**params, "input_ids": input_ids, "labels": labels,
               "logits": logits.detach(), "loss": loss.detach().reshape([]),
               **prefixed("grad", ((n, p.grad) for n, p in model.named_parameters()))}
    save_file(tensors, path, {"config": json.dumps(config, sort_keys=True),
                              "generator": GENERATOR})


def adamw_fixture(config, seed, path):
    model, input_ids, labels = make_model(config, seed)
    tensors = {**prefixed("param", model.named_parameters()),
               "input_ids": input_ids, "labels": labels}
    optimizer = torch.optim.AdamW(decay_groups(model, ADAMW["weight_decay"]),
                                  lr=ADAMW["lrs"][0], betas=tuple(ADAMW["betas"]),
                                  eps=ADAMW["eps"])
    for step, lr in enumerate(ADAMW["lrs"]):
        for group in optimizer.param_groups:
            group["lr"] = lr
        optimizer.zero_grad(set_to_none=True)
        loss = causal_lm_loss(model(input_ids), labels)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), ADAMW["max_grad_norm"])
        optimizer.step()
        tensors[f"loss/{step}"] = loss.detach().reshape([])
        tensors[f"grad_norm/{step}"] = grad_norm.detach().to(torch.float64).reshape([])
    tensors.update(prefixed("after", model.named_parameters()))
    for name, p in model.named_parameters():
        state = optimizer.state[p]
        tensors[f"exp_avg/{name}"] = state["exp_avg"].clone()
        tensors[f"exp_avg_sq/{name}"] = state["exp_avg_sq"].clone()
    save_file(tensors, path, {"config": json.dumps(config, sort_keys=True),
                              "hyperparameters": json.dumps(ADAMW, sort_keys=True),
                              "generator": GENERATOR})


def write_fixtures(out):
    os.makedirs(out, exist_ok=True)
    torch.set_num_threads(1)  # reductions in one fixed order
    jobs = [("llama_gqa.safetensors", lambda p: forward_fixture(GQA_CONFIG, 1234, p)),
            ("llama_tied.safetensors", lambda p: forward_fixture(TIED_CONFIG, 5678, p)),
            ("adamw.safetensors", lambda p: adamw_fixture(GQA_CONFIG, 1234, p))]
    for name, job in jobs:
        path = os.path.join(out, name)
        job(path)
        print(f"wrote {path} ({os.path.getsize(path)} bytes)")


def main():
    default_out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures")
    write_fixtures(os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else default_out))


if __name__ == "__main__":
    main()
