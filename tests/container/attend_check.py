#!/usr/bin/python3
"""Request and answer checks for POST /attend, used by test-container.sh.

  attend_check.py request OUT.json
      write the demo request: 5 tokens x E=64 self-attention, weights per head

  attend_check.py compare --request REQ --weights W.safetensors GOT.json [--against OTHER.json]
      compare the response GOT.json with PyTorch's nn.MultiheadAttention (eval)
      run on the same weights and input, and with OTHER.json (the answer of an
      independent run, e.g. the host binary) when given. Prints the largest
      differences; exit 1 when one is over tolerance, 2 when nothing could be
      compared.

Run with Debian's /usr/bin/python3 (python3-torch, python3-numpy). Without
torch, only the --against comparison is made.
"""
import argparse
import base64
import json
import struct
import sys

import numpy as np

N_TOKENS, EMBED = 5, 64
TOL_TORCH = 1e-4      # float32 rounding in a different summation order
TOL_SAME = 1e-5       # same code, different host / libraries


def make_request(path):
    # Smooth, distinct values with both signs; exact in float32 text form.
    x = [[round(np.sin(0.37 * i + 0.11 * j + 0.5) * 0.8, 4) for j in range(EMBED)]
         for i in range(N_TOKENS)]
    req = {"model": "demo", "embeddings": x, "need_weights": True, "average_heads": False}
    with open(path, "w") as f:
        json.dump(req, f)


def tensor(value):
    """A response tensor: nested lists, or a base64 float32 object."""
    if isinstance(value, dict):
        raw = base64.b64decode(value["base64"])
        return np.frombuffer(raw, dtype="<f4").reshape(value["shape"]).astype(np.float64)
    return np.asarray(value, dtype=np.float64)


# ------------------------------------------------------------- safetensors
DTYPES = {"F32": "<f4", "F64": "<f8", "F16": "<f2"}


def load_safetensors(path):
    with open(path, "rb") as f:
        blob = f.read()
    (hlen,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + hlen])
    base = 8 + hlen
    meta = header.pop("__metadata__", {}) or {}
    out = {}
    for name, info in header.items():
        b, e = info["data_offsets"]
        raw = blob[base + b: base + e]
        if info["dtype"] == "BF16":
            u16 = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
            arr = u16.view(np.float32)
        else:
            arr = np.frombuffer(raw, dtype=DTYPES[info["dtype"]])
        out[name] = arr.astype(np.float32).reshape(info["shape"])
    return out, meta


def torch_reference(weights_path, x):
    """Output [n,E] and per-head weights [H,n,n] from PyTorch, or None."""
    try:
        import torch
    except ImportError:
        return None
    t, meta = load_safetensors(weights_path)
    # Hugging Face style separate projections -> PyTorch names.
    for hf, pt in (("q_proj", "q"), ("k_proj", "k"), ("v_proj", "v")):
        if hf + ".weight" in t:
            t[pt + "_proj_weight"] = t.pop(hf + ".weight")
    if "o_proj.weight" in t:
        t["out_proj.weight"] = t.pop("o_proj.weight")
        if "o_proj.bias" in t:
            t["out_proj.bias"] = t.pop("o_proj.bias")
    if "q_proj.bias" in t:
        t["in_proj_bias"] = np.concatenate([t.pop(p + "_proj.bias") for p in "qkv"])
    if "q_proj_weight" in t and all(t[p + "_proj_weight"].shape[1] == t["q_proj_weight"].shape[0] for p in "kv"):
        t["in_proj_weight"] = np.concatenate([t.pop(p + "_proj_weight") for p in "qkv"])
    embed = t["out_proj.weight"].shape[0]
    heads = int(meta["num_heads"])
    has_bias = "in_proj_bias" in t
    if has_bias and "out_proj.bias" not in t:
        t["out_proj.bias"] = np.zeros(embed, np.float32)
    kdim = t["k_proj_weight"].shape[1] if "k_proj_weight" in t else embed
    vdim = t["v_proj_weight"].shape[1] if "v_proj_weight" in t else embed
    mha = torch.nn.MultiheadAttention(
        embed, heads, bias=has_bias, add_bias_kv="bias_k" in t,
        add_zero_attn=str(meta.get("add_zero_attn", "false")).lower() == "true",
        kdim=kdim, vdim=vdim, batch_first=True)
    mha.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in t.items()}, strict=True)
    mha.eval()
    with torch.no_grad():
        xt = torch.tensor(np.asarray(x, np.float32))[None]
        out, w = mha(xt, xt, xt, need_weights=True, average_attn_weights=False)
    return out[0].double().numpy(), w[0].double().numpy()


def compare(args):
    with open(args.request) as f:
        req = json.load(f)
    with open(args.got) as f:
        got = json.load(f)
    out, w = tensor(got["output"]), tensor(got["attention_weights"])
    print("response: output %s, attention_weights %s" % (list(out.shape), list(w.shape)))
    bad, compared = 0, 0

    def check(what, a, b, tol):
        nonlocal bad, compared
        compared += 1
        if a.shape != b.shape:
            print("%s: shape %s, expected %s" % (what, list(a.shape), list(b.shape)))
            bad += 1
            return
        d = float(np.max(np.abs(a - b))) if a.size else 0.0
        ok = d <= tol
        print("%s: max |diff| %.3g (tolerance %.0e) %s" % (what, d, tol, "ok" if ok else "TOO LARGE"))
        bad += not ok

    ref = torch_reference(args.weights, req["embeddings"])
    if ref is None:
        print("PyTorch not importable here: skipping the PyTorch comparison")
    else:
        check("output vs PyTorch", out, ref[0], TOL_TORCH)
        check("attention_weights vs PyTorch", w, ref[1], TOL_TORCH)
    if args.against:
        with open(args.against) as f:
            other = json.load(f)
        check("output vs %s" % args.against_name, out, tensor(other["output"]), TOL_SAME)
        check("attention_weights vs %s" % args.against_name, w, tensor(other["attention_weights"]), TOL_SAME)
    if compared == 0:
        return 2
    return 1 if bad else 0


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("request")
    r.add_argument("out")
    c = sub.add_parser("compare")
    c.add_argument("--request", required=True)
    c.add_argument("--weights", required=True)
    c.add_argument("--against")
    c.add_argument("--against-name", default="the other run")
    c.add_argument("got")
    a = p.parse_args()
    if a.cmd == "request":
        make_request(a.out)
        return 0
    return compare(a)


if __name__ == "__main__":
    sys.exit(main())
