#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpora, tests/fuzz/corpus/TARGET/ (docs/fuzzing.md).

Each target gets what loco itself writes, in the formats of its writers (encode_safetensors, ShardWriter,
write_dataset_meta, write_checkpoint's state.json, the configs/ presets, the membership messages), and
edge cases next to them: the smallest valid input, every dtype or field type, and inputs just past a
limit (a length one byte too long, an offset one past the end, a wrong version). The seeds are committed;
run this again after a format changes: python3 tests/fuzz/make_corpus.py
"""

import json
import pathlib
import shutil
import struct
import subprocess
import zlib

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
CORPUS = HERE / "corpus"

# As model.safetensors, optimizer.safetensors and tokenizer.json (the files every checkpoint has) in the
# checkpoint_state target's directory (checkpoint_state_fuzzer.cpp).
FUZZ_MODEL_BYTES = b"loco fuzz"
FUZZ_FILES = ("model.safetensors", "optimizer.safetensors", "tokenizer.json")


def write(target, name, data):
    path = CORPUS / target / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data if isinstance(data, bytes) else data.encode())


# --- safetensors: u64 header length, JSON header, data (io/safetensors.h) ---------------------------------

ELEMENT_BYTES = {"F64": 8, "F32": 4, "BF16": 2, "F16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1,
                 "BOOL": 1}


def safetensors(tensors, metadata=None, pad=True):
    """As encode_safetensors: metadata first, tensors in the order given, data aligned to 8 bytes."""
    header, data = {}, b""
    if metadata:
        header["__metadata__"] = metadata
    for name, dtype, shape in tensors:
        count = 1
        for d in shape:
            count *= d
        size = count * ELEMENT_BYTES[dtype]
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + size]}
        data += bytes((i * 37 + 11) % 256 for i in range(size))
    text = json.dumps(header, separators=(",", ":"))
    if pad:
        text += " " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text.encode() + data


def raw_safetensors(header_text, data=b""):
    return struct.pack("<Q", len(header_text)) + header_text.encode() + data


def safetensors_seeds():
    t = "safetensors"
    write(t, "valid_model", safetensors(
        [("model.embed_tokens.weight", "F32", [4, 2]), ("model.norm.weight", "F32", [2])], {"format": "pt"}))
    write(t, "valid_every_dtype", safetensors([(f"t_{d.lower()}", d, [3]) for d in ELEMENT_BYTES]))
    write(t, "valid_scalar_and_empty", safetensors([("scalar", "F64", []), ("empty", "F32", [0, 5])]))
    write(t, "valid_snapshot", safetensors(
        [("model/w", "BF16", [2, 2]), ("optimizer/exp_avg/w", "F32", [2, 2]), ("strategy/outer/w", "F32", [2])],
        {"format": "loco-replica-snapshot",
         "state": json.dumps({"step": 3, "tokens": 96, "optimizer_steps": 3, "elapsed_s": 0.5,
                              "sampler": {"position": 7}, "strategy": {}, "communication": {}})}))
    write(t, "valid_no_tensors", safetensors([]))
    write(t, "valid_unpadded", safetensors([("x", "I8", [5])], pad=False))
    write(t, "edge_empty_file", b"")
    write(t, "edge_seven_bytes", b"\x02\x00\x00\x00\x00\x00\x00")
    write(t, "edge_length_past_end", struct.pack("<Q", 3) + b"{}")
    write(t, "edge_huge_length", struct.pack("<Q", 2**64 - 1) + b"{}")
    write(t, "edge_not_json", raw_safetensors("{\"x\":"))
    write(t, "edge_array_header", raw_safetensors("[1,2]"))
    write(t, "edge_offsets_past_end", raw_safetensors('{"x":{"dtype":"U8","shape":[2],"data_offsets":[0,3]}}', b"ab"))
    write(t, "edge_offsets_reversed", raw_safetensors('{"x":{"dtype":"U8","shape":[0],"data_offsets":[2,1]}}', b"ab"))
    write(t, "edge_shape_overflow",
          raw_safetensors('{"x":{"dtype":"F32","shape":[4611686018427387904,8],"data_offsets":[0,0]}}'))
    write(t, "edge_zero_then_huge",
          raw_safetensors('{"x":{"dtype":"U8","shape":[0,9223372036854775807,9223372036854775807],'
                          '"data_offsets":[0,0]}}'))
    write(t, "edge_negative_dim", raw_safetensors('{"x":{"dtype":"U8","shape":[-1],"data_offsets":[0,0]}}'))
    write(t, "edge_unknown_dtype", raw_safetensors('{"x":{"dtype":"F8_E4M3","shape":[1],"data_offsets":[0,1]}}', b"a"))
    write(t, "edge_wrong_types", raw_safetensors('{"x":{"dtype":7,"shape":"2","data_offsets":{"a":1}}}'))
    write(t, "edge_metadata_not_strings", raw_safetensors('{"__metadata__":{"a":1,"b":[2]}}'))
    write(t, "edge_deep_nesting", raw_safetensors('{"__metadata__":' + "[" * 2000 + "]" * 2000 + "}"))


# --- token shards: 32-byte header, then tokens (data/shard.h) ---------------------------------------------

def shard(tokens, bytes_per_token=2, magic=b"LOCOTOK1", version=1, count=None):
    header = magic + struct.pack("<IIQQ", version, bytes_per_token, len(tokens) if count is None else count, 0)
    return header + b"".join(t.to_bytes(bytes_per_token, "little") for t in tokens)


def shard_seeds():
    t = "shard"
    write(t, "valid_uint16", shard([1, 258, 65535, 0, 7]))
    write(t, "valid_uint32", shard([1, 70000, 2**32 - 1], bytes_per_token=4))
    write(t, "valid_empty", shard([]))
    write(t, "edge_truncated_header", shard([1, 2])[:31])
    write(t, "edge_bad_magic", shard([1], magic=b"LOCOTOK2"))
    write(t, "edge_version_2", shard([1], version=2))
    write(t, "edge_three_bytes_per_token", shard([], bytes_per_token=3) + b"abc")
    write(t, "edge_count_one_too_many", shard([1, 2], count=3))
    write(t, "edge_huge_count", shard([1, 2], count=2**63 + 1))
    write(t, "edge_odd_size", shard([1, 2]) + b"x")


# --- meta.json of a prepared data directory (data/dataset_meta.h) -----------------------------------------

def meta(**changes):
    doc = {"bytes_per_token": 2,
           "checksums": {"train_000.bin": "80d61618", "val_000.bin": "60d17fb4"},
           "format": "loco-tokens", "seed": 1234, "sources": ["data/brown-text"],
           "tokenizer": {"bos_id": 1, "eos_id": 2, "kind": "sentencepiece-bpe", "model_file": "tokenizer.model",
                         "vocab_size": 4096},
           "train": {"documents": 490, "shards": ["train_000.bin"], "tokens": 1644618},
           "val": {"documents": 10, "shards": ["val_000.bin"], "tokens": 33653},
           "val_fraction": 0.02, "version": 1, "vocab_size": 4096}
    for key, value in changes.items():
        if value is None:
            del doc[key]
        else:
            doc[key] = value
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


def dataset_meta_seeds():
    t = "dataset_meta"
    write(t, "valid_bpe", meta())  # as data/brown/meta.json
    write(t, "valid_byte", meta(tokenizer={"bos_id": 256, "eos_id": 257, "kind": "byte", "vocab_size": 258},
                                vocab_size=258, checksums={}, sources=["a.txt", "b.jsonl"]))
    write(t, "valid_many_shards", meta(bytes_per_token=4, vocab_size=100000,
                                       train={"documents": 2, "shards": ["train_000.bin", "train_001.bin"],
                                              "tokens": 2**28 + 5}))
    write(t, "edge_other_format", meta(format="loco-tokens-2"))
    write(t, "edge_version_string", meta(version="1"))
    write(t, "edge_no_train", meta(train=None))
    write(t, "edge_negative_vocab", meta(vocab_size=-1))
    write(t, "edge_vocab_past_uint32", meta(vocab_size=2**32))
    write(t, "edge_split_not_object", meta(val=[1, 2]))
    write(t, "edge_not_object", "[1, 2, 3]\n")
    write(t, "edge_not_json", "{\"format\": \"loco-tokens\",")


# --- corpus files of loco prepare (data/byte_stream.h, data/corpus_stream.h) ------------------------------
# The first byte picks the kind, as corpus_file_fuzzer.cpp reads it.
KINDS = {"jsonl": 0, "jsonl.gz": 1, "jsonl.zst": 2, "txt.gz": 3, "txt.zst": 4, "txt": 5}


def gzip_member(data):
    compressor = zlib.compressobj(6, zlib.DEFLATED, 15 + 16)
    return compressor.compress(data) + compressor.flush()


def zstd_frame(data):
    """Through the zstd tool (scripts/setup.sh installs it): Python's standard library has no zstd."""
    return subprocess.run(["zstd", "-q", "-c", "-3"], input=data, stdout=subprocess.PIPE, check=True).stdout


def corpus_file_seeds():
    t = "corpus_file"
    jsonl = b"".join(json.dumps({"id": i, "text": f"document {i}\nwith two lines"}).encode() + b"\n"
                     for i in range(5))
    write(t, "valid_jsonl", bytes([KINDS["jsonl"]]) + jsonl + b"\n  \n" + b'{"text": "last, no newline"}')
    write(t, "valid_jsonl_gz", bytes([KINDS["jsonl.gz"]]) + gzip_member(jsonl))
    write(t, "valid_jsonl_gz_two_members", bytes([KINDS["jsonl.gz"]]) + gzip_member(jsonl) + gzip_member(jsonl))
    write(t, "valid_jsonl_zst", bytes([KINDS["jsonl.zst"]]) + zstd_frame(jsonl))
    write(t, "valid_jsonl_zst_two_frames", bytes([KINDS["jsonl.zst"]]) + zstd_frame(jsonl) + zstd_frame(jsonl))
    write(t, "valid_txt_gz", bytes([KINDS["txt.gz"]]) + gzip_member(b"a text document\n"))
    write(t, "valid_txt_zst", bytes([KINDS["txt.zst"]]) + zstd_frame(b"a text document\n"))
    write(t, "valid_txt", bytes([KINDS["txt"]]) + b"plain text")
    write(t, "edge_gz_cut", bytes([KINDS["jsonl.gz"]]) + gzip_member(jsonl)[:-9])
    write(t, "edge_zst_cut", bytes([KINDS["jsonl.zst"]]) + zstd_frame(jsonl)[:-3])
    write(t, "edge_gz_empty", bytes([KINDS["jsonl.gz"]]))
    write(t, "edge_zst_empty", bytes([KINDS["jsonl.zst"]]))
    write(t, "edge_gz_trailing_zeros", bytes([KINDS["jsonl.gz"]]) + gzip_member(jsonl) + bytes(8))
    write(t, "edge_bad_json_line", bytes([KINDS["jsonl"]]) + b'{"text": "fine"}\n{"text": 3}\n{"text": \n')
    write(t, "edge_not_compressed", bytes([KINDS["jsonl.zst"]]) + jsonl)


# --- state.json of a checkpoint (train/checkpoint_state.h) ------------------------------------------------

def config_json():
    """The resolved config of configs/tiny.toml as to_json writes it (a subset: missing keys keep defaults)."""
    return {"data": {"dir": "data/brown", "seq_len": 128},
            "dist": {"algorithm": "diloco", "backend": "local", "batch": "split", "replicas": 4, "elastic": False,
                     "clip_radius": 1.0, "churn": ""},
            "model": {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 4096,
                      "rms_norm_eps": 1e-05, "tie_word_embeddings": False},
            "optim": {"lr": 0.003, "warmup_steps": 20},
            "train": {"steps": 200, "batch_size": 16, "out_dir": "runs/tiny", "tokens": 0}}


def matching_files():
    entry = {"bytes": len(FUZZ_MODEL_BYTES), "crc32": f"{zlib.crc32(FUZZ_MODEL_BYTES):08x}"}
    return {name: dict(entry) for name in FUZZ_FILES}


def state(**changes):
    doc = {"format": "loco-checkpoint", "version": 1, "step": 400, "tokens": 819200, "optimizer_steps": 400,
           "elapsed_s": 39.5, "sampler": {"epoch": 0, "position": 6400, "seed": 1234},
           "strategy": {"outer_steps": 13}, "communication": {"bytes_sent": 53027856, "comm_s": 1.48},
           "config": config_json(), "files": matching_files()}
    for key, value in changes.items():
        if value is None:
            del doc[key]
        else:
            doc[key] = value
    return json.dumps(doc, indent=2) + "\n"


def checkpoint_state_seeds():
    t = "checkpoint_state"
    write(t, "valid_matching_files", state())
    write(t, "valid_inference_skips_optimizer",
          state(files={**matching_files(), "optimizer.safetensors": {"bytes": 1, "crc32": "00000000"}}))
    write(t, "valid_no_communication", state(communication=None))
    write(t, "edge_checksum_mismatch", state(files={"model.safetensors": {"bytes": 9, "crc32": "deadbeef"}}))
    write(t, "edge_missing_file", state(files={"tokenizer.json": {"bytes": 2, "crc32": "00000000"}}))
    write(t, "edge_file_is_directory", state(files={".": {"bytes": 0, "crc32": "00000000"}}))
    write(t, "edge_file_outside", state(files={"../state.json": {"bytes": 0, "crc32": "00000000"}}))
    write(t, "edge_version_2", state(version=2))
    write(t, "edge_version_string", state(version="1"))
    write(t, "edge_other_format", state(format="loco-tokens"))
    write(t, "edge_unknown_config_key", state(config={"model": {"hidden_size": 64, "heads": 4}}))
    write(t, "edge_config_wrong_type", state(config={"train": {"steps": "many"}}))
    write(t, "edge_steps_and_tokens_disagree", state(config={"train": {"steps": 3, "tokens": 100000}}))
    write(t, "edge_step_not_integer", state(step=1.5))
    write(t, "edge_no_files", state(files=None))
    write(t, "edge_files_emptied", state(files={}))
    write(t, "edge_model_unlisted", state(files={k: v for k, v in matching_files().items() if k != "model.safetensors"}))
    write(t, "edge_unknown_file_listed", state(files={**matching_files(), "notes.txt": {"bytes": 0, "crc32": "0"}}))
    write(t, "edge_negative_step", state(step=-5))
    write(t, "edge_negative_elapsed", state(elapsed_s=-1.5))
    write(t, "edge_config_heads_zero", state(config={"model": {"hidden_size": 64, "num_attention_heads": 0}}))
    write(t, "edge_config_vocab_zero", state(config={**config_json(), "model": {"hidden_size": 64, "vocab_size": 0}}))
    write(t, "edge_not_json", "{\"format\": \"loco-checkpoint\"")


# --- TOML configs (config/load_config.h) -----------------------------------------------------------------

def config_seeds():
    t = "config"
    for preset in sorted((ROOT / "configs").glob("*.toml")):
        shutil.copyfile(preset, (CORPUS / t).joinpath("preset_" + preset.stem))
    write(t, "valid_elastic_churn", """[dist]
algorithm = "diloco"
backend = "local"
replicas = 3
batch = "per_replica"
elastic = true
churn = "2@40:leave, 2@80:return, 1@60:stall=3"

[train]
steps = 100
""")
    write(t, "valid_random_churn", '[dist]\nelastic = true\nreplicas = 4\nbatch = "per_replica"\n'
                                   'algorithm = "ddp"\nchurn = "random:7:4"\n[train]\nsteps = 50\n')
    write(t, "valid_adversary", '[dist]\nalgorithm = "diloco"\nreplicas = 4\naggregation = "centered_clip"\n'
                                'adversary = "3@100:scale=-1"\n[train]\nsteps = 10\n')
    write(t, "valid_links", '[dist]\nalgorithm = "streaming"\nreplicas = 2\n[comm]\nbandwidth_mbps = "100,10"\n'
                            'latency_ms = "5"\ncodec = "fp4"\n[streaming]\nfragments = 2\n[train]\ntokens = 100000\n')
    write(t, "edge_top_level_value", "steps = 3\n")
    write(t, "edge_unknown_key", "[model]\nhidden = 64\n")
    write(t, "edge_wrong_type", "[train]\nsteps = \"ten\"\n")
    write(t, "edge_every_toml_type", """[train]
steps = 1_000
out_dir = 'literal'
[optim]
lr = 1e-3
beta1 = inf
[data]
dir = \"\"\"multi
line\"\"\"
[model]
when = 1979-05-27T07:32:00Z
list = [1, [2, 3], {a = 1}]
""")
    write(t, "edge_steps_tokens_overflow", "[train]\nsteps = 9223372036854775807\ntokens = 9223372036854775807\n"
                                           "batch_size = 9223372036854775807\n")
    write(t, "edge_bad_churn", '[dist]\nelastic = true\nchurn = "9@-1:stall=nan"\n')
    write(t, "edge_not_toml", "[model\nhidden_size = \n")
    write(t, "edge_deep_array", "[model]\nx = " + "[" * 500 + "]" * 500 + "\n")


# --- membership messages (membership/wire.h; the routes of coordinator_server.cpp) ------------------------

def wire_seeds():
    t = "wire"
    who = {"member_id": "m-3f2a", "incarnation": 8070450532247928832}
    messages = {
        "join": {"run_id": "my-run", "name": "host-1/123", "nonce": "ab" * 32, "timestamp": 1732460000,
                 "mac": "cd" * 32},
        "heartbeat": {**who, "seq": 5},
        "quorum_request": {**who, "seq": 6, "step": 120, "received": 17, "wait_s": 30.0},
        "vote_commit": {**who, "seq": 7, "quorum_id": 4, "step": 150, "ok": True, "hash": "ef" * 32,
                        "wait_s": 30, "rejected": ["m-1b2c"]},
        "vote_abort": {**who, "seq": 8, "quorum_id": 4, "step": 150, "ok": False, "wait_s": 0.5},
        "leave": {**who, "seq": 9, "reason": "finished", "finished": True},
        "quorum_reply": {"quorum_id": 4, "incarnation": 8070450532247928832, "members": ["m-1b2c", "m-3f2a"],
                         "rank": 1, "store_prefix": "loco/8070450532247928832/q4/", "step": 150,
                         "steps": [150, 120], "serial": 18, "run_finished": False},
        "commit_reply": {"outcome": "commit", "canonical_hash": "ef" * 32, "heal": True, "outliers": ["m-1b2c"],
                         "reason": ""},
        "join_reply": {"member_id": "m-3f2a", "incarnation": 8070450532247928832, "heartbeat_interval_s": 1.0,
                       "heartbeat_timeout_s": 10.0, "store_port": 29401},
        "refusal": {"error": "m-3f2a is not a member of this run (expired?)", "refusal": "unknown_member"},
    }
    for name, message in messages.items():
        write(t, "valid_" + name, json.dumps(message))
    write(t, "edge_rank_outside", json.dumps({**messages["quorum_reply"], "rank": 2}))
    write(t, "edge_rank_past_int", json.dumps({**messages["quorum_reply"], "rank": 2**32 + 1}))
    write(t, "edge_steps_short", json.dumps({**messages["quorum_reply"], "steps": [150]}))
    write(t, "edge_negative_incarnation", json.dumps({**who, "incarnation": -1}))
    write(t, "edge_wait_huge", json.dumps({**messages["quorum_request"], "wait_s": 1e308}))
    write(t, "edge_refusal_not_string", json.dumps({"error": 5, "refusal": 7}))
    write(t, "edge_not_object", "[\"member_id\"]")
    write(t, "edge_not_json", "{\"member_id\": ")
    write(t, "edge_empty", "")
    write(t, "edge_deep_array", "[" * 65536)  # as deep as the coordinator's 64 KiB allow (issue 35)
    write(t, "edge_step_huge", json.dumps({**messages["quorum_request"], "step": 2**63 - 1}))
    write(t, "edge_seq_huge", json.dumps({**who, "seq": 2**64 - 1}))


# --- request heads (http/http_request.h; the coordinator's HTTP server) -----------------------------

def http_request_seeds():
    t = "http_request"
    write(t, "valid_post", "POST /v1/heartbeat HTTP/1.1\r\nHost: 10.0.0.1:29400\r\nContent-Type: application/json\r\n"
                           "X-Loco-Mac: " + "ab" * 32 + "\r\nContent-Length: 97\r\n")
    write(t, "valid_get_token", "GET /?token=" + "cd" * 32 + "&x=%41+b HTTP/1.1\r\nHost: x\r\n")
    write(t, "edge_chunked", "POST /v1/join HTTP/1.1\r\nTransfer-Encoding: chunked\r\n")
    write(t, "edge_gzip", "POST /v1/join HTTP/1.1\r\nContent-Length: 60000\r\nContent-Encoding: gzip\r\n")
    write(t, "edge_no_length", "POST /v1/join HTTP/1.1\r\nHost: x\r\n")
    write(t, "edge_length_huge", "POST /v1/join HTTP/1.1\r\nContent-Length: 184467440737095516160\r\n")
    write(t, "edge_two_lengths", "POST /v1/join HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n")
    write(t, "edge_folded", "GET / HTTP/1.1\r\nX: a\r\n b\r\n")
    write(t, "edge_bare_lf", "GET / HTTP/1.1\nHost: x\n")
    write(t, "edge_percent_at_end", "GET /?token=%4 HTTP/1.1\r\n")
    write(t, "edge_empty", "")


def main():
    if CORPUS.exists():
        shutil.rmtree(CORPUS)
    (CORPUS / "config").mkdir(parents=True)
    for seeds in (safetensors_seeds, shard_seeds, dataset_meta_seeds, checkpoint_state_seeds, config_seeds,
                  corpus_file_seeds, wire_seeds, http_request_seeds):
        seeds()
    for target in sorted(CORPUS.iterdir()):
        print(f"{target.name}: {len(list(target.iterdir()))} seeds")


if __name__ == "__main__":
    main()
