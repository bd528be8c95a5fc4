"""Loads a `loco export` directory the way transformers' from_pretrained would and checks its
logits against expected ones.

    /usr/bin/python3 tests/reference/check_export.py EXPORT_DIR EXPECTED.safetensors

EXPORT_DIR holds config.json (Hugging Face Llama keys) and model.safetensors (HF tensor names,
F32). EXPECTED holds `input_ids` (I64, (B, T)) and `logits` (F32, (B, T, V)). The model is built
from config.json, loaded strictly (every tensor present, none unexpected, shapes exact), run in
float32 on input_ids and compared with logits.

Exit 0: max |diff| <= 1e-4. Exit 1: larger difference. Exit 2: malformed input (message on
stderr): unreadable files, missing config keys, wrong/missing/unexpected tensors, wrong dtypes.
"""

import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llama_ref import LlamaForCausalLM  # noqa: E402
from safetensors_io import load_file  # noqa: E402

TOLERANCE = 1e-4
# Keys an export must state explicitly: transformers has defaults for the last five, but a default
# that differs from what loco trained (e.g. rms_norm_eps 1e-6) would silently change the model.
REQUIRED_CONFIG = {
    "vocab_size": int, "hidden_size": int, "intermediate_size": int, "num_hidden_layers": int,
    "num_attention_heads": int, "num_key_value_heads": int, "max_position_embeddings": int,
    "rope_theta": (int, float), "rms_norm_eps": (int, float), "tie_word_embeddings": bool,
}
# Optional keys that, when present, must say what the reference model computes.
MUST_EQUAL_IF_PRESENT = {"hidden_act": "silu", "attention_bias": False, "mlp_bias": False,
                         "rope_scaling": None, "pretraining_tp": 1}
# transformers accepts safetensors files whose metadata is absent or has one of these formats.
ACCEPTED_FORMATS = ("pt", "tf", "flax", "mlx")


class Malformed(Exception):
    pass


def read_config(export_dir):
    path = os.path.join(export_dir, "config.json")
    try:
        with open(path) as f:
            config = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise Malformed(f"cannot read {path}: {e}") from None
    if not isinstance(config, dict):
        raise Malformed(f"{path}: not a JSON object")
    if config.get("model_type") != "llama":
        raise Malformed(f"{path}: model_type must be \"llama\", got {config.get('model_type')!r}")
    architectures = config.get("architectures", ["LlamaForCausalLM"])
    if "LlamaForCausalLM" not in architectures:
        raise Malformed(f"{path}: architectures {architectures!r} lack LlamaForCausalLM")
    for key, kind in REQUIRED_CONFIG.items():
        if key not in config:
            raise Malformed(f"{path}: missing required key {key!r}")
        value = config[key]
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise Malformed(f"{path}: {key} has the wrong type: {value!r}")
    for key, expected in MUST_EQUAL_IF_PRESENT.items():
        if key in config and config[key] != expected:
            raise Malformed(f"{path}: {key} = {config[key]!r}, the reference supports only "
                            f"{expected!r}")
    head_dim = config["hidden_size"] // max(config["num_attention_heads"], 1)
    if config.get("head_dim", head_dim) != head_dim:
        raise Malformed(f"{path}: head_dim {config['head_dim']} != hidden_size / heads")
    return config


def read_safetensors(path):
    try:
        return load_file(path)
    except (OSError, ValueError) as e:
        raise Malformed(f"cannot read {path}: {e}") from None


def build_model(export_dir, config):
    try:
        model = LlamaForCausalLM(config)
    except (KeyError, ValueError) as e:
        raise Malformed(f"config.json: {e}") from None
    path = os.path.join(export_dir, "model.safetensors")
    tensors, metadata = read_safetensors(path)
    if metadata is not None and metadata.get("format") not in ACCEPTED_FORMATS:
        raise Malformed(f"{path}: __metadata__ format must be one of {ACCEPTED_FORMATS} "
                        f"(transformers refuses the file otherwise), got {metadata.get('format')!r}")
    expected = dict(model.named_parameters())
    missing = sorted(set(expected) - set(tensors))
    unexpected = sorted(set(tensors) - set(expected))
    if missing or unexpected:
        raise Malformed(f"{path}: missing tensors {missing}, unexpected tensors {unexpected}")
    for name, param in expected.items():
        t = tensors[name]
        if t.dtype != torch.float32:
            raise Malformed(f"{path}: {name} is {t.dtype}, expected F32")
        if t.shape != param.shape:
            raise Malformed(f"{path}: {name} has shape {list(t.shape)}, expected "
                            f"{list(param.shape)}")
    model.load_state_dict(tensors, strict=True)
    return model


def main(argv):
    if len(argv) != 3:
        raise Malformed("usage: check_export.py EXPORT_DIR EXPECTED.safetensors")
    export_dir, expected_path = argv[1], argv[2]
    config = read_config(export_dir)
    model = build_model(export_dir, config)
    expected, _ = read_safetensors(expected_path)
    for name, dtype, dims in (("input_ids", torch.int64, 2), ("logits", torch.float32, 3)):
        if name not in expected:
            raise Malformed(f"{expected_path}: no tensor {name!r}")
        if expected[name].dtype != dtype or expected[name].dim() != dims:
            raise Malformed(f"{expected_path}: {name} must be {dtype} with {dims} dims")
    input_ids, want = expected["input_ids"], expected["logits"]
    if input_ids.numel() and (input_ids.min() < 0 or input_ids.max() >= config["vocab_size"]):
        raise Malformed(f"{expected_path}: input_ids outside [0, {config['vocab_size']})")
    if want.shape != (*input_ids.shape, config["vocab_size"]):
        raise Malformed(f"{expected_path}: logits shape {list(want.shape)} does not match "
                        f"input_ids {list(input_ids.shape)} and vocab {config['vocab_size']}")
    with torch.no_grad():
        got = model(input_ids)
    diff = (got - want).abs().max().item() if want.numel() else 0.0
    ok = diff <= TOLERANCE
    print(f"check_export: max abs diff {diff:.3e} (tolerance {TOLERANCE:g}) "
          f"{'OK' if ok else 'MISMATCH'}")
    return 0 if ok else 1


if __name__ == "__main__":
    torch.set_num_threads(1)
    try:
        sys.exit(main(sys.argv))
    except Malformed as e:
        print(f"check_export: error: {e}", file=sys.stderr)
        sys.exit(2)
