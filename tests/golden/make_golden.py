#!/usr/bin/python3
"""make_golden.py - regenerate the golden cases and the demo weight set.

    /usr/bin/python3 tests/golden/make_golden.py     (or: make golden)

Writes config/weights/demo.safetensors and tests/golden/<case>.safetensors
(see mha_cases.py for what a case file holds and how PyTorch's answers are
computed). Everything is seeded: running it again gives the same files on the
same machine (PyTorch's float64 results rounded to float32). Stale case files
from an earlier run are removed.
"""

import glob
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

import torch  # noqa: E402

import mha_cases as mc  # noqa: E402

DEMO_SEED = 20240101
DEMO_SPEC = dict(E=64, H=4, bias=True)


def write_demo(path):
    layer = mc.Layer(DEMO_SPEC, DEMO_SEED)
    meta = {
        "num_heads": "4",
        "add_zero_attn": "false",
        "description": "demo: torch.nn.MultiheadAttention(64, 4), bias=True, seed %d, "
                       "biases drawn from U(-0.5, 0.5); made by tests/golden/make_golden.py"
                       % DEMO_SEED,
    }
    mc.write_safetensors(path, layer.tensors(), meta)
    return layer


def bools(rows):
    """Nested lists of 0/1 -> bool tensor."""
    return torch.tensor(rows, dtype=torch.bool)


def main():
    os.makedirs(os.path.join(ROOT, "config", "weights"), exist_ok=True)
    demo_path = os.path.join(ROOT, "config", "weights", "demo.safetensors")
    demo = write_demo(demo_path)

    for old in glob.glob(os.path.join(HERE, "*.safetensors")):
        os.remove(old)

    made = []

    def case(name, spec, seed, **kw):
        layer = spec if isinstance(spec, mc.Layer) else mc.Layer(spec, seed)
        path = os.path.join(HERE, name + ".safetensors")
        exp = mc.build_case(path, name, layer, seed=seed + 7, **kw)
        made.append((name, os.path.getsize(path), exp["fully"]))

    def masks(seed, B, H, n, m, kpm=None, mask=None, p=0.25):
        g = torch.Generator().manual_seed(seed)
        return mc.random_masks(g, B, H, n, m, kpm, mask, p=p)

    # ---- the demo geometry (the shipped weights themselves)
    case("demo_self", demo, 1, B=1, n=7, self_attention=True,
         description="the demo weights, self-attention, no mask")
    k, _ = masks(2, 3, 4, 9, 9, kpm="bool", p=0.2)
    k[:, 0] = False  # no fully masked row here
    case("demo_batch3_kpm_bool", demo, 2, B=3, n=9, self_attention=True, kpm=k,
         description="the demo weights, B=3, key_padding_mask bool [B,m]")

    # ---- geometries
    _, a = masks(3, 2, 6, 6, 6, mask="float2")
    case("e48_h6_nobias_maskfloat", dict(E=48, H=6, bias=False), 3, B=2, n=6,
         self_attention=True, attn_mask=a,
         description="E=48 H=6 bias=False, attn_mask float [n,m] with some -inf")
    k, _ = masks(4, 2, 4, 5, 7, kpm="float")
    case("cross_kdim24_vdim40", dict(E=32, H=4, kdim=24, vdim=40), 4, B=2, n=5, m=7, kpm=k,
         description="cross-attention kdim=24 vdim=40 (q/k/v_proj_weight), key_padding_mask float [B,m]")
    case("cross_separate_same_dims", dict(E=16, H=2, layout="torch-separate"), 5, B=2, n=3, m=4,
         description="q/k/v_proj_weight layout although kdim = vdim = E")
    case("n1", dict(E=16, H=4), 6, B=2, n=1, m=5, description="one query token, cross-attention")
    case("m1", dict(E=16, H=4), 7, B=2, n=4, m=1, description="one key token")
    case("h1", dict(E=16, H=1), 8, B=2, n=5, self_attention=True, description="one head")
    case("h8_e8", dict(E=8, H=8), 9, B=2, n=5, m=6, description="H = E: head dim 1")
    case("batch3_cross", dict(E=24, H=3, kdim=10, vdim=10), 10, B=3, n=4, m=6,
         description="B=3 cross-attention, kdim = vdim = 10")
    case("peaked_softmax", dict(E=32, H=2), 11, B=1, n=6, m=8, scale=4.0,
         description="inputs x4: large scores, nearly one-hot softmax")

    # ---- bias_kv / zero_attn
    k = bools([[0, 0, 1, 0, 0], [1, 1, 1, 1, 1]])
    case("bias_kv_kpm_all_masked", dict(E=32, H=4, add_bias_kv=True), 12, B=2, n=5,
         self_attention=True, kpm=k,
         description="add_bias_kv; batch 1 has every given key masked: the bias_k position "
                     "is never masked, so no row is fully masked (PyTorch finite)")
    a = torch.zeros(4, 6, dtype=torch.bool)
    a[1, :] = True
    a[3, 2] = True
    case("zero_attn_full_row", dict(E=32, H=4, add_zero_attn=True), 13, B=2, n=4, m=6,
         attn_mask=a,
         description="add_zero_attn; attn_mask row 1 all true: the zero position remains")
    k, _ = masks(14, 2, 2, 6, 6, kpm="bool")
    case("bias_kv_zero_attn_causal", dict(E=16, H=2, add_bias_kv=True, add_zero_attn=True,
                                          bias=False), 14,
         B=2, n=6, self_attention=True, kpm=k, causal=True,
         description="add_bias_kv and add_zero_attn with bias=False, causal, kpm bool")
    case("zero_attn_from_opts", dict(E=16, H=2, add_zero_attn=True, zero_attn_in_file=False),
         15, B=1, n=3, m=4,
         description="add_zero_attn absent from the file, given as the loader option")
    _, a = masks(16, 2, 2, 4, 5, mask="float4")
    case("bias_kv_separate_mask4", dict(E=16, H=2, kdim=12, vdim=20, add_bias_kv=True), 16,
         B=2, n=4, m=5, attn_mask=a,
         description="add_bias_kv with kdim/vdim != E, attn_mask float [B,H,n,m]")

    # ---- masks
    k, _ = masks(17, 3, 2, 5, 6, kpm="bool1d", p=0.3)
    k[0] = False
    case("kpm_bool_1d", dict(E=16, H=2), 17, B=3, n=5, m=6, kpm=k,
         description="key_padding_mask bool [m] shared by the batch")
    k = torch.tensor([[0.5, -1.0, float("-inf"), 2.0, 0.0, -3.0],
                      [float("-inf"), 0.25, 0.0, -0.5, 1.0, float("-inf")]])
    case("kpm_float", dict(E=16, H=2), 18, B=2, n=4, m=6, kpm=k,
         description="key_padding_mask float [B,m] with -inf entries")
    k, _ = masks(19, 2, 2, 4, 4, kpm="float1d")
    case("kpm_float_1d", dict(E=16, H=2), 19, B=2, n=4, self_attention=True, kpm=k,
         description="key_padding_mask float [m]")
    _, a = masks(20, 2, 4, 5, 7, mask="bool2", p=0.3)
    a[:, 0] = False
    case("mask_bool_2d", dict(E=32, H=4), 20, B=2, n=5, m=7, attn_mask=a,
         description="attn_mask bool [n,m]")
    _, a = masks(21, 2, 4, 5, 5, mask="float2")
    case("mask_float_2d", dict(E=32, H=4), 21, B=2, n=5, self_attention=True, attn_mask=a,
         description="attn_mask float [n,m]")
    _, a = masks(22, 2, 4, 5, 6, mask="bool3", p=0.3)
    a[:, :, 5] = False
    case("mask_bool_heads", dict(E=32, H=4), 22, B=2, n=5, m=6, attn_mask=a,
         description="attn_mask bool [H,n,m]")
    _, a = masks(23, 2, 4, 5, 6, mask="float3")
    case("mask_float_heads", dict(E=32, H=4), 23, B=2, n=5, m=6, attn_mask=a,
         description="attn_mask float [H,n,m]")
    _, a = masks(24, 3, 2, 4, 5, mask="bool4", p=0.3)
    a[..., 1] = False
    case("mask_bool_batch_heads", dict(E=16, H=2), 24, B=3, n=4, m=5, attn_mask=a,
         description="attn_mask bool [B,H,n,m]")
    _, a = masks(25, 3, 2, 4, 5, mask="float4")
    a[..., 2] = 0.0
    case("mask_float_batch_heads", dict(E=16, H=2), 25, B=3, n=4, m=5, attn_mask=a,
         description="attn_mask float [B,H,n,m] with -inf entries")
    k, a = masks(26, 2, 2, 5, 6, kpm="bool", mask="float2", p=0.2)
    k[:, 3] = False
    case("mask_float_kpm_bool", dict(E=16, H=2), 26, B=2, n=5, m=6, kpm=k, attn_mask=a,
         description="attn_mask float [n,m] + key_padding_mask bool [B,m]")
    k, a = masks(27, 2, 2, 5, 6, kpm="float", mask="bool2", p=0.2)
    a[:, 4] = False
    case("mask_bool_kpm_float", dict(E=16, H=2), 27, B=2, n=5, m=6, kpm=k, attn_mask=a,
         description="attn_mask bool [n,m] + key_padding_mask float [B,m], summed "
                     "(PyTorch 1.13 would or them as booleans; 2.x adds them)")
    k, a = masks(28, 2, 2, 4, 6, kpm="float1d", mask="float3")
    case("mask_float_heads_kpm_float", dict(E=16, H=2), 28, B=2, n=4, m=6, kpm=k, attn_mask=a,
         description="attn_mask float [H,n,m] + key_padding_mask float [m], summed")

    # ---- causal
    case("causal_self", dict(E=32, H=4), 29, B=2, n=8, self_attention=True, causal=True,
         description="causal self-attention")
    case("causal_m_gt_n", dict(E=16, H=2), 30, B=1, n=4, m=9, causal=True,
         description="causal with m > n (top-left aligned: query i sees keys 0..i)")
    case("causal_m_lt_n", dict(E=16, H=2), 31, B=2, n=7, m=3, causal=True,
         description="causal with m < n")
    k, a = masks(32, 2, 2, 6, 6, kpm="bool", mask="float2", p=0.15)
    k[:, 0] = False
    case("causal_mask_kpm", dict(E=16, H=2), 32, B=2, n=6, self_attention=True, causal=True,
         kpm=k, attn_mask=a, description="causal + attn_mask float [n,m] + kpm bool")

    # ---- fully masked rows (PyTorch: NaN; contract: zero weights, output = out_proj.bias)
    k = bools([[0, 1, 0, 0, 1], [1, 1, 1, 1, 1]])
    case("full_kpm_batch", dict(E=16, H=2), 33, B=2, n=3, m=5, kpm=k,
         description="batch 1: every key padded; its rows are fully masked")
    a = torch.zeros(5, 4, dtype=torch.bool)
    a[2, :] = True
    a[0, 1] = True
    case("full_row_bool_2d", dict(E=16, H=4), 34, B=2, n=5, m=4, attn_mask=a,
         description="attn_mask bool row 2 all true")
    a = torch.zeros(4, 5, 5, dtype=torch.bool)
    a[1, 0, :] = True
    a[3, 4, :] = True
    a[2, 1, 3] = True
    case("full_row_one_head", dict(E=16, H=4), 35, B=2, n=5, self_attention=True, attn_mask=a,
         description="attn_mask bool [H,n,m]: only head 1 row 0 and head 3 row 4 fully "
                     "masked; the other heads of those rows still contribute")
    k = bools([[1, 0, 0, 0], [0, 0, 1, 0]])
    case("full_causal_kpm", dict(E=16, H=2), 36, B=2, n=4, self_attention=True, causal=True,
         kpm=k, description="causal + key 0 padded in batch 0: its row 0 sees no key")
    a = torch.randn(4, 5, generator=torch.Generator().manual_seed(37))
    a[1, :] = float("-inf")
    a[3, :] = -1e30
    case("full_row_float_inf", dict(E=16, H=2, bias=False), 37, B=1, n=4, m=5, attn_mask=a,
         description="float attn_mask: row 1 all -inf (fully masked, bias=False so output 0); "
                     "row 3 all -1e30 (finite: uniform weights)")
    k = torch.tensor([[0.0, float("-inf"), 1.0], [float("-inf")] * 3])
    case("full_kpm_float", dict(E=8, H=2), 38, B=2, n=2, m=3, kpm=k,
         description="float key_padding_mask all -inf in batch 1")

    # ---- layouts of other libraries
    dummy = [("model.embed_tokens.weight", "F32", torch.randn(11, 16)),
             ("model.layers.0.input_layernorm.weight", "F32", torch.ones(16)),
             ("model.layers.0.mlp.up_proj.weight", "F32", torch.randn(24, 16)),
             ("model.norm.weight", "F32", torch.ones(16))]
    other = mc.Layer(dict(E=16, H=4, layout="hf", prefix="model.layers.1.self_attn.",
                          heads_in_file=False), 391)
    dummy += other.tensors()
    case("hf_llama_prefix", dict(E=16, H=4, layout="hf", prefix="model.layers.0.self_attn.",
                                 heads_in_file=False), 39, B=2, n=5, self_attention=True,
         causal=True, extra_tensors=dummy,
         description="Hugging Face q/k/v/o_proj under prefix model.layers.0.self_attn. in a "
                     "checkpoint with a second layer and other tensors; num_heads from the option")
    case("hf_out_proj_nobias", dict(E=16, H=2, layout="hf", hf_out="out_proj", bias=False), 40,
         B=1, n=4, m=6, description="Hugging Face q/k/v_proj + out_proj, no biases, no prefix")
    case("hf_whisper_k_nobias", dict(E=16, H=2, layout="hf", hf_out="out_proj",
                                     hf_k_bias=False), 41,
         B=2, n=3, m=5,
         description="Whisper-style: q_proj, v_proj, out_proj have biases, k_proj has none "
                     "(the contract: each .weight and optional .bias)")
    dummy = [("bert.embeddings.word_embeddings.weight", "F32", torch.randn(13, 16)),
             ("bert.encoder.layer.1.attention.output.LayerNorm.weight", "F32", torch.ones(16)),
             ("bert.encoder.layer.1.attention.output.LayerNorm.bias", "F32", torch.zeros(16)),
             ("bert.encoder.layer.1.intermediate.dense.weight", "F32", torch.randn(32, 16)),
             ("bert.encoder.layer.1.intermediate.dense.bias", "F32", torch.randn(32))]
    other = mc.Layer(dict(E=16, H=4, layout="bert", prefix="bert.encoder.layer.0."), 421)
    dummy = other.tensors() + dummy
    k = bools([[0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 1, 1]])
    case("bert_prefix", dict(E=16, H=4, layout="bert", prefix="bert.encoder.layer.1.",
                             heads_in_file=False), 42,
         B=2, n=6, self_attention=True, kpm=k, extra_tensors=dummy,
         description="BERT attention.self.{query,key,value} + attention.output.dense under "
                     "prefix bert.encoder.layer.1. (layer 0 also present); padding mask")

    # ---- storage dtypes
    k, _ = masks(43, 2, 4, 5, 5, kpm="bool", p=0.2)
    k[:, 0] = False
    case("dtype_f16", dict(E=32, H=4, dtype="F16"), 43, B=2, n=5, self_attention=True, kpm=k,
         description="weights stored F16")
    case("dtype_bf16", dict(E=32, H=4, dtype="BF16"), 44, B=2, n=5, m=4,
         description="weights stored BF16")
    case("dtype_f64", dict(E=32, H=4, dtype="F64", add_bias_kv=True), 45, B=2, n=4, m=6,
         description="weights stored F64 (not float32-exact: the engine rounds them)")
    case("dtype_bf16_hf", dict(E=16, H=2, dtype="BF16", layout="hf"), 46, B=1, n=3, m=3,
         description="Hugging Face layout stored BF16")

    # ---- longer sequences (cross row blocks and key tiles)
    k, _ = masks(47, 1, 2, 70, 150, kpm="bool", p=0.1)
    case("long_cross", dict(E=16, H=2), 47, B=1, n=70, m=150, kpm=k,
         description="n=70 m=150: several query blocks and key tiles, kpm bool")
    case("long_causal", dict(E=16, H=2), 48, B=1, n=96, self_attention=True, causal=True,
         description="causal self-attention n=m=96")

    # Read every file back: the writer round-trips and the sizes stay small.
    total = 0
    for name, size, fully in made:
        meta, t = mc.read_safetensors(os.path.join(HERE, name + ".safetensors"))
        assert meta["case.name"] == name and "expect.output" in t
        total += size
        print("%-32s %7d bytes  fully-masked rows %d" % (name, size, fully))
    mc.read_safetensors(demo_path)
    print("%d cases, %d bytes; demo %d bytes" % (len(made), total, os.path.getsize(demo_path)))
    assert total < 2_000_000


if __name__ == "__main__":
    main()
