"""mha_cases.py - golden cases for the attention engine, made by PyTorch.

Shared by make_golden.py (the fixed, committed cases) and check-live (fresh
random cases). Run with /usr/bin/python3 (Debian's python3-torch 1.13).

One case is one safetensors file that holds
  - the layer's weights, in the layout and dtype under test (optionally under a
    prefix, among unrelated tensors, as in a whole-model checkpoint);
  - the inputs:  case.query [B,n,E], case.key [B,m,kdim], case.value [B,m,vdim]
    (absent for self-attention: key = value = query), case.key_padding_mask
    [m] or [B,m], case.attn_mask [n,m], [H,n,m] or [B,H,n,m] (BOOL or F32);
  - PyTorch's answers: expect.output [B,n,E], expect.weights [B,H,n,M],
    expect.weights_avg [B,n,M] (M = m + add_bias_kv + add_zero_attn);
  - __metadata__: "num_heads"/"add_zero_attn" for the loader (when the file
    carries them) and "case.*" keys for the test: causal, self_attention,
    num_heads / add_zero_attn / prefix to pass as attn_weights_opts, and the
    geometry the loader is expected to find (E, H, kdim, vdim, bias, ...).

The numbers: weights are rounded to their storage dtype and inputs/masks to
float32, then PyTorch's nn.MultiheadAttention runs in float64 on exactly those
values (eval mode; parameters require grad so 1.13's native fast path is never
taken), with need_weights and average_attn_weights both ways. The results are
stored as F32.

Where the contract differs from PyTorch 1.13:
  - causal: 1.13's MHA has no is_causal, so the top-left aligned mask
    (key j > query i) is built explicitly and merged into attn_mask;
  - [H,n,m] and [B,H,n,m] masks are PyTorch's [B*H,n,m] (index b*H + h);
  - a float key_padding_mask together with an attn_mask is merged by 1.13
    with logical_or/masked_fill (a float treated as a boolean): the contract
    adds them, as PyTorch 2.x does, so such masks are summed here first and
    passed as one float attn_mask;
  - a query row whose keys are all masked is NaN in PyTorch; the contract
    gives it zero weights and a zero attention result for that head. Those
    entries are taken from rule_forward() below, a float64 re-implementation
    that applies the rule; it is first checked to equal PyTorch on every
    finite entry (to 1e-9 relative), and to be fully masked exactly where
    PyTorch gave NaN, so only the NaN entries come from the rule.
"""

import json
import math
import os
import struct
import sys

import torch

# The project's one safetensors writer and dtype table, the exporter's
# (tools/export_attention.py).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "tools"))
from export_attention import ST_DTYPES as _ST_DTYPES  # noqa: E402
from export_attention import write_safetensors  # noqa: E402,F401

torch.set_num_threads(1)  # the machine's cores are shared
torch.set_default_dtype(torch.float32)

FORMAT = "attention-server golden case v1"

# ---------------------------------------------------------------- safetensors


def read_safetensors(path):
    """Returns (metadata, {name: tensor}) - used to check what was written."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    meta = header.pop("__metadata__", {})
    data = raw[8 + n:]
    out = {}
    end = 0
    for name, e in header.items():
        b, en = e["data_offsets"]
        tdt, size = _ST_DTYPES[e["dtype"]]
        assert en - b == math.prod(e["shape"]) * size, name
        end = max(end, en)
        buf = bytearray(data[b:en])
        if e["dtype"] == "BOOL":
            t = torch.frombuffer(buf, dtype=torch.uint8).to(torch.bool) if buf else torch.zeros(0, dtype=torch.bool)
        else:
            t = torch.frombuffer(buf, dtype=tdt) if buf else torch.zeros(0, dtype=tdt)
        out[name] = t.reshape(e["shape"])
    assert end == len(data), f"{path}: {len(data) - end} trailing bytes"
    return meta, out


# -------------------------------------------------------------------- layers


def _round_to(t, dtype):
    """t (float64) as the engine will see it after storage in dtype, in float64."""
    if dtype == "F64":
        return t.clone()
    return t.to(_ST_DTYPES[dtype][0]).to(torch.float64)


class Layer:
    """One nn.MultiheadAttention (float64, eval) whose parameters are exactly
    representable in the storage dtype, plus how it is written to a file.

    spec keys: E, H, kdim, vdim (default E), bias, add_bias_kv, add_zero_attn,
    dtype ("F32", "F16", "BF16", "F64"), layout ("torch", "torch-separate",
    "hf", "bert"), prefix, hf_out ("o_proj"/"out_proj"), hf_k_bias (False: a
    Whisper-style k_proj without bias), heads_in_file (write num_heads in the
    metadata, else pass it as an option), zero_attn_in_file (likewise).
    (A file that says one num_heads and an option that says another is a
    load error, tested in tests/unit/test_weights.c, not a golden case.)
    """

    def __init__(self, spec, seed):
        s = dict(spec)
        self.E, self.H = s["E"], s["H"]
        self.kdim = s.get("kdim", self.E)
        self.vdim = s.get("vdim", self.E)
        self.bias = s.get("bias", True)
        self.add_bias_kv = s.get("add_bias_kv", False)
        self.add_zero_attn = s.get("add_zero_attn", False)
        self.dtype = s.get("dtype", "F32")
        self.layout = s.get("layout", "torch")
        self.prefix = s.get("prefix", "")
        self.hf_out = s.get("hf_out", "o_proj")
        self.hf_k_bias = s.get("hf_k_bias", True)
        self.heads_in_file = s.get("heads_in_file", True)
        self.zero_attn_in_file = s.get("zero_attn_in_file", True)
        self.spec = s
        same = self.kdim == self.E and self.vdim == self.E
        if self.layout in ("hf", "bert") and self.add_bias_kv:
            raise ValueError("bias_k/bias_v exist only in the torch layout")
        if self.layout == "bert" and not same:
            raise ValueError("the bert layout has kdim = vdim = E")
        if not self.hf_k_bias and (self.layout != "hf" or not self.bias):
            raise ValueError("hf_k_bias=False needs the hf layout with bias")

        torch.manual_seed(seed)
        mha = torch.nn.MultiheadAttention(
            self.E, self.H, dropout=0.0, bias=self.bias, add_bias_kv=self.add_bias_kv,
            add_zero_attn=self.add_zero_attn, kdim=self.kdim, vdim=self.vdim,
            batch_first=True)
        mha = mha.double().eval()
        with torch.no_grad():
            # PyTorch initialises the biases to zero: give them values so that
            # a bias applied wrongly (or not at all) shows.
            if self.bias:
                mha.in_proj_bias.uniform_(-0.5, 0.5)
                mha.out_proj.bias.uniform_(-0.5, 0.5)
                if not self.hf_k_bias:
                    mha.in_proj_bias[self.E:2 * self.E] = 0.0
            for p in mha.parameters():
                if self.dtype == "F64":
                    # values that float32 cannot hold exactly
                    p.add_(torch.randn_like(p) * 1e-9)
                p.copy_(_round_to(p, self.dtype))
        self.mha = mha

    # The projection matrices, float64: [E,E], [E,kdim], [E,vdim], biases [E].
    def proj(self):
        m, E = self.mha, self.E
        if m._qkv_same_embed_dim:
            wq, wk, wv = m.in_proj_weight[:E], m.in_proj_weight[E:2 * E], m.in_proj_weight[2 * E:]
        else:
            wq, wk, wv = m.q_proj_weight, m.k_proj_weight, m.v_proj_weight
        if self.bias:
            bq, bk, bv = m.in_proj_bias[:E], m.in_proj_bias[E:2 * E], m.in_proj_bias[2 * E:]
        else:
            bq = bk = bv = None
        bo = m.out_proj.bias if self.bias else None
        return wq, wk, wv, bq, bk, bv, m.out_proj.weight, bo

    def expected_layout(self):
        if self.layout == "torch":
            return "torch-packed" if self.mha._qkv_same_embed_dim else "torch-separate"
        return self.layout

    def tensors(self):
        """[(name, dtype, tensor)] as stored, names with the prefix."""
        wq, wk, wv, bq, bk, bv, wo, bo = [None if t is None else t.detach() for t in self.proj()]
        m, p, dt = self.mha, self.prefix, self.dtype
        out = []
        if self.layout in ("torch", "torch-separate"):
            if self.layout == "torch" and m._qkv_same_embed_dim:
                out.append(("in_proj_weight", m.in_proj_weight))
            else:
                out += [("q_proj_weight", wq), ("k_proj_weight", wk), ("v_proj_weight", wv)]
            if self.bias:
                out.append(("in_proj_bias", m.in_proj_bias))
            if self.add_bias_kv:
                out += [("bias_k", m.bias_k), ("bias_v", m.bias_v)]
            out.append(("out_proj.weight", wo))
            if self.bias:
                out.append(("out_proj.bias", bo))
        elif self.layout == "hf":
            names = [("q_proj", wq, bq), ("k_proj", wk, bk if self.hf_k_bias else None),
                     ("v_proj", wv, bv), (self.hf_out, wo, bo)]
            for nm, w, b in names:
                out.append((nm + ".weight", w))
                if self.bias and b is not None:
                    out.append((nm + ".bias", b))
        elif self.layout == "bert":
            names = [("attention.self.query", wq, bq), ("attention.self.key", wk, bk),
                     ("attention.self.value", wv, bv), ("attention.output.dense", wo, bo)]
            for nm, w, b in names:
                out.append((nm + ".weight", w))
                if self.bias:
                    out.append((nm + ".bias", b))
        else:
            raise ValueError(self.layout)
        return [(p + name, dt, t.detach()) for name, t in out]

    def metadata(self):
        """(file metadata for the loader, case.* metadata for the test)."""
        fmeta, cmeta = {}, {}
        if self.heads_in_file:
            fmeta["num_heads"] = str(self.H)
        else:
            cmeta["case.num_heads"] = str(self.H)
        if self.zero_attn_in_file:
            fmeta["add_zero_attn"] = "true" if self.add_zero_attn else "false"
        else:
            cmeta["case.add_zero_attn"] = "1" if self.add_zero_attn else "0"
        if self.prefix:
            cmeta["case.prefix"] = self.prefix
        cmeta.update({
            "case.E": str(self.E), "case.H": str(self.H), "case.kdim": str(self.kdim),
            "case.vdim": str(self.vdim), "case.bias": _b(self.bias),
            "case.add_bias_kv": _b(self.add_bias_kv), "case.add_zero_attn_expected": _b(self.add_zero_attn),
            "case.layout": self.expected_layout(), "case.dtype": self.dtype,
        })
        return fmeta, cmeta


def _b(x):
    return "true" if x else "false"


# --------------------------------------------------------------------- masks


def causal_mask(n, m):
    """bool [n,m], True where key j > query i (top-left aligned)."""
    return torch.ones(n, m, dtype=torch.bool).triu(1)


def to_additive(mask):
    """bool -> 0/-inf float64; float -> float64."""
    if mask.dtype == torch.bool:
        return torch.zeros(mask.shape, dtype=torch.float64).masked_fill(mask, float("-inf"))
    return mask.to(torch.float64)


def combined_additive(B, H, n, m, kpm, attn_mask, causal):
    """The contract's mask as one additive float64 [B,H,n,m]."""
    add = torch.zeros(B, H, n, m, dtype=torch.float64)
    if attn_mask is not None:
        a = to_additive(attn_mask)
        if a.dim() == 2:
            a = a.view(1, 1, n, m)
        elif a.dim() == 3:
            a = a.view(1, H, n, m)
        add = add + a
    if kpm is not None:
        k = to_additive(kpm)
        k = k.view(1, 1, 1, m) if k.dim() == 1 else k.view(B, 1, 1, m)
        add = add + k
    if causal:
        add = add.masked_fill(causal_mask(n, m), float("-inf"))
    return add


def torch_masks(B, H, n, m, kpm, attn_mask, causal):
    """(key_padding_mask, attn_mask) in the form PyTorch 1.13's MHA takes."""
    tm = None
    if attn_mask is not None:
        a = attn_mask if attn_mask.dtype == torch.bool else attn_mask.to(torch.float64)
        if a.dim() == 3:  # [H,n,m] -> [B*H,n,m], index b*H + h
            a = a.unsqueeze(0).expand(B, H, n, m).reshape(B * H, n, m)
        elif a.dim() == 4:
            a = a.reshape(B * H, n, m)
        tm = a
    if causal:
        c = causal_mask(n, m)
        if tm is None:
            tm = c
        elif tm.dtype == torch.bool:
            tm = tm | c
        else:
            tm = tm.masked_fill(c, float("-inf"))
    tk = None
    if kpm is not None:
        k = kpm if kpm.dtype == torch.bool else kpm.to(torch.float64)
        if k.dim() == 1:
            k = k.unsqueeze(0).expand(B, m)
        if k.dtype != torch.bool and tm is not None:
            # 1.13 would logical_or / masked_fill a float padding mask: add it.
            t3 = to_additive(tm)
            t3 = t3.unsqueeze(0).expand(B * H, n, m) if t3.dim() == 2 else t3
            tm = (t3.view(B, H, n, m) + k.view(B, 1, 1, m)).reshape(B * H, n, m)
            k = None
        tk = k
    return tk, tm


# ------------------------------------------------------------------ reference


def rule_forward(layer, q_in, k_in, v_in, add):
    """float64 MHA with the contract's rule for fully masked rows.
    q_in [B,n,E], k_in [B,m,kdim], v_in [B,m,vdim], add [B,H,n,m] additive.
    Returns out [B,n,E], weights [B,H,n,M], fully [B,H,n] (bool)."""
    wq, wk, wv, bq, bk, bv, wo, bo = [None if t is None else t.detach() for t in layer.proj()]
    B, n, E = q_in.shape
    m = k_in.shape[1]
    H = layer.H
    d = E // H
    lin = torch.nn.functional.linear
    q = lin(q_in, wq, bq)
    k = lin(k_in, wk, bk)
    v = lin(v_in, wv, bv)
    extra = 0
    if layer.add_bias_kv:
        k = torch.cat([k, layer.mha.bias_k.detach().expand(B, 1, E)], 1)
        v = torch.cat([v, layer.mha.bias_v.detach().expand(B, 1, E)], 1)
        extra += 1
    if layer.add_zero_attn:
        k = torch.cat([k, torch.zeros(B, 1, E, dtype=torch.float64)], 1)
        v = torch.cat([v, torch.zeros(B, 1, E, dtype=torch.float64)], 1)
        extra += 1
    M = m + extra
    add = torch.cat([add, torch.zeros(B, H, n, extra, dtype=torch.float64)], 3)
    qh = q.view(B, n, H, d).transpose(1, 2)
    kh = k.view(B, M, H, d).transpose(1, 2)
    vh = v.view(B, M, H, d).transpose(1, 2)
    s = qh @ kh.transpose(2, 3) / math.sqrt(d) + add
    mx = s.max(dim=3, keepdim=True).values
    fully = torch.isneginf(mx)
    e = torch.exp(s - torch.where(fully, torch.zeros_like(mx), mx))
    w = e / e.sum(3, keepdim=True).clamp_min(1e-300)
    w = torch.where(fully, torch.zeros_like(w), w)
    y = (w @ vh).transpose(1, 2).reshape(B, n, E)
    out = lin(y, wo, bo)
    return out, w, fully.squeeze(3)


def torch_forward(layer, q_in, k_in, v_in, kpm, attn_mask, causal):
    """PyTorch's answers, NaN rows replaced by the rule (see the file header).
    Inputs float32 tensors (the exact stored values). Returns a dict of
    float64 tensors: output, weights, weights_avg, plus 'fully' (count of
    fully masked (b,h,i) rows)."""
    mha = layer.mha
    B, n, _ = q_in.shape
    m = k_in.shape[1]
    H = layer.H
    q64, k64, v64 = q_in.double(), k_in.double(), v_in.double()
    if k_in is q_in and v_in is q_in:
        k64 = v64 = q64  # self-attention: the same tensor, as the engine sees it
    tk, tm = torch_masks(B, H, n, m, kpm, attn_mask, causal)
    # Grad enabled + parameters requiring grad: 1.13 skips its native fast path.
    assert torch.is_grad_enabled() and all(p.requires_grad for p in mha.parameters())
    out, w = mha(q64, k64, v64, key_padding_mask=tk, need_weights=True, attn_mask=tm,
                 average_attn_weights=False)
    _, wavg = mha(q64, k64, v64, key_padding_mask=tk, need_weights=True, attn_mask=tm,
                  average_attn_weights=True)
    out2, none = mha(q64, k64, v64, key_padding_mask=tk, need_weights=False, attn_mask=tm)
    assert none is None
    out, w, wavg, out2 = [t.detach() for t in (out, w, wavg, out2)]
    assert torch.equal(torch.isnan(out), torch.isnan(out2))
    assert torch.allclose(out.nan_to_num(), out2.nan_to_num(), rtol=0, atol=1e-12)

    add = combined_additive(B, H, n, m, kpm, attn_mask, causal)
    r_out, r_w, fully = rule_forward(layer, q64, k64, v64, add)
    r_avg = r_w.mean(1)

    def agree(name, t, r):
        # Elementwise, without boolean indexing (which copies: seconds at
        # 2,048 x 2,048 per head). Where torch is NaN the rule stands; a NaN
        # in the rule where torch is finite still fails the comparison.
        if not r.numel():
            return t
        assert not torch.isinf(t).any(), name
        nan = torch.isnan(t)
        scale = max(1.0, r.abs().max().item())
        diff = torch.where(nan, torch.zeros((), dtype=t.dtype), t - r).abs_().max().item()
        assert diff <= 1e-9 * scale, f"{name}: re-implementation differs from torch by {diff}"
        return torch.where(nan, r, t)

    # PyTorch is NaN exactly on the rows the rule calls fully masked.
    nan_rows = torch.isnan(w).any(3)
    assert torch.equal(nan_rows, fully), "NaN rows of torch != fully masked rows"
    assert torch.equal(torch.isnan(out).any(2), fully.any(1))
    exp = {
        "output": agree("output", out, r_out),
        "weights": agree("weights", w, r_w),
        "weights_avg": agree("weights_avg", wavg, r_avg),
        "fully": int(fully.sum().item()),
    }
    return exp


# ---------------------------------------------------------------------- cases


def random_masks(g, B, H, n, m, kpm_kind=None, mask_kind=None, p=0.25, p_inf=0.1):
    """Random masks of the requested kinds.
    kpm_kind: None, "bool", "bool1d", "float", "float1d";
    mask_kind: None or "bool"/"float" + "2"/"3"/"4" (dims: [n,m], [H,n,m], [B,H,n,m])."""
    kpm = mask = None
    if kpm_kind:
        shape = (m,) if kpm_kind.endswith("1d") else (B, m)
        if kpm_kind.startswith("bool"):
            kpm = torch.rand(shape, generator=g) < p
        else:
            kpm = _float_mask(g, shape, p_inf)
    if mask_kind:
        dims = int(mask_kind[-1])
        shape = {2: (n, m), 3: (H, n, m), 4: (B, H, n, m)}[dims]
        if mask_kind.startswith("bool"):
            mask = torch.rand(shape, generator=g) < p
        else:
            mask = _float_mask(g, shape, p_inf)
    return kpm, mask


def _float_mask(g, shape, p_inf):
    v = torch.randn(shape, generator=g) * 1.5
    v = v.masked_fill(torch.rand(shape, generator=g) < p_inf, float("-inf"))
    return v.float()


def build_case(path, name, layer, B, n, m=None, self_attention=False, kpm=None,
               attn_mask=None, causal=False, seed=0, scale=1.0, extra_tensors=(),
               description="", extra_meta=None):
    """Make the inputs, ask PyTorch, write the case file. kpm/attn_mask:
    tensors (bool, or float32 values) or None. Returns the expectations."""
    g = torch.Generator().manual_seed(seed)
    E = layer.E
    q = (torch.randn(B, n, E, generator=g, dtype=torch.float64) * scale).float()
    if self_attention:
        if layer.kdim != E or layer.vdim != E:
            raise ValueError("self-attention needs kdim = vdim = E")
        m = n
        k = v = q
    else:
        k = (torch.randn(B, m, layer.kdim, generator=g, dtype=torch.float64) * scale).float()
        v = torch.randn(B, m, layer.vdim, generator=g, dtype=torch.float64).float()
    if kpm is not None and kpm.dtype != torch.bool:
        kpm = kpm.float()
    if attn_mask is not None and attn_mask.dtype != torch.bool:
        attn_mask = attn_mask.float()
    exp = torch_forward(layer, q, k, v, kpm, attn_mask, causal)

    tensors = list(extra_tensors) + layer.tensors()
    tensors.append(("case.query", "F32", q))
    if not self_attention:
        tensors += [("case.key", "F32", k), ("case.value", "F32", v)]
    if kpm is not None:
        tensors.append(("case.key_padding_mask", "BOOL" if kpm.dtype == torch.bool else "F32", kpm))
    if attn_mask is not None:
        tensors.append(("case.attn_mask", "BOOL" if attn_mask.dtype == torch.bool else "F32", attn_mask))
    tensors += [("expect.output", "F32", exp["output"]),
                ("expect.weights", "F32", exp["weights"]),
                ("expect.weights_avg", "F32", exp["weights_avg"])]
    fmeta, cmeta = layer.metadata()
    meta = dict(fmeta)
    meta.update(cmeta)
    meta.update({
        "format": FORMAT,
        "case.name": name,
        "case.description": description,
        "case.self_attention": _b(self_attention),
        "case.causal": _b(causal),
        "case.need_weights": "both",
        "case.key_padding_mask": _mask_desc(kpm),
        "case.attn_mask": _mask_desc(attn_mask),
        "case.fully_masked_rows": str(exp["fully"]),
        "case.reference": "torch %s float64, nn.MultiheadAttention eval" % torch.__version__,
    })
    if extra_meta:
        meta.update(extra_meta)
    write_safetensors(path, tensors, meta)
    return exp


def _mask_desc(t):
    if t is None:
        return "none"
    kind = "bool" if t.dtype == torch.bool else "float"
    return "%s%s" % (kind, list(t.shape))


def random_config(rnd):
    """One random layer spec and case spec (rnd: random.Random)."""
    H = rnd.choice([1, 1, 2, 2, 3, 4, 4, 8])
    d = rnd.choice([1, 2, 3, 4, 8, 8, 16])
    while H * d > 64:
        d = max(1, d // 2)
    E = H * d
    cross_dims = rnd.random() < 0.35
    kdim = rnd.randint(1, 40) if cross_dims else E
    vdim = rnd.randint(1, 40) if cross_dims else E
    bias = rnd.random() < 0.75
    bias_kv = rnd.random() < 0.25
    zero_attn = rnd.random() < 0.25
    if kdim == E and vdim == E and not bias_kv:
        layout = rnd.choice(["torch", "torch", "torch-separate", "hf", "bert"])
    else:
        layout = rnd.choice(["torch", "torch", "torch-separate"])
    spec = dict(E=E, H=H, kdim=kdim, vdim=vdim, bias=bias, add_bias_kv=bias_kv,
                add_zero_attn=zero_attn, layout=layout,
                dtype=rnd.choice(["F32", "F32", "F32", "F16", "BF16", "F64"]))
    if layout in ("hf", "bert"):
        spec["heads_in_file"] = rnd.random() < 0.5
        if rnd.random() < 0.5:
            spec["prefix"] = "model.layers.%d." % rnd.randint(0, 3)
    if layout == "hf":
        spec["hf_out"] = rnd.choice(["o_proj", "out_proj"])
    B = rnd.randint(1, 3)
    self_attn = kdim == E and vdim == E and rnd.random() < 0.5
    def length():  # mostly short; sometimes long enough to span blocks and key tiles
        return rnd.randint(20, 140) if rnd.random() < 0.15 else rnd.randint(1, 12)
    n = length()
    m = n if self_attn else length()
    case = dict(B=B, n=n, m=m, self_attention=self_attn,
                causal=rnd.random() < 0.3,
                kpm=rnd.choice([None, None, "bool", "bool1d", "float", "float1d"]),
                mask=rnd.choice([None, None, "bool2", "float2", "bool3", "float3", "bool4", "float4"]),
                p=rnd.choice([0.1, 0.25, 0.5]))
    return spec, case


def build_random_case(path, name, spec, case, seed):
    layer = Layer(spec, seed)
    g = torch.Generator().manual_seed(seed + 1)
    kpm, mask = random_masks(g, case["B"], layer.H, case["n"], case["m"], case["kpm"],
                             case["mask"], p=case["p"])
    desc = json.dumps({"layer": spec, "case": case, "seed": seed}, sort_keys=True)
    return build_case(path, name, layer, case["B"], case["n"], case["m"],
                      self_attention=case["self_attention"], kpm=kpm, attn_mask=mask,
                      causal=case["causal"], seed=seed + 2, description=desc)
