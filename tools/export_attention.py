#!/usr/bin/python3
"""export_attention.py - write one attention layer as an attention-server weight set.

From a live layer (Python):

    from export_attention import export_mha
    export_mha(layer, "layer.safetensors")            # layer: nn.MultiheadAttention

From a checkpoint (command line): a safetensors file or a PyTorch .bin/.pt
state_dict, in PyTorch's nn.MultiheadAttention naming (in_proj_weight or
q_proj_weight/k_proj_weight/v_proj_weight), Hugging Face's (q_proj, k_proj,
v_proj, out_proj or o_proj) or BERT's (attention.self.query/key/value and
attention.output.dense), under any prefix:

    tools/export_attention.py --list model.bin
    tools/export_attention.py model.bin --prefix model.layers.0.self_attn -o layer.safetensors

The file written holds the layer in nn.MultiheadAttention's state_dict naming
(Hugging Face and BERT layers converted) and every layer option in
__metadata__ (num_heads, add_zero_attn, add_bias_kv, bias, embed_dim, kdim,
vdim, layout, exporter): a state_dict does not carry num_heads or
add_zero_attn. Before the file is put in place it is checked twice: an
nn.MultiheadAttention rebuilt from the file alone must compute what the source
layer computes, and attention-server must load it (--check) and answer a
POST /attend with PyTorch's numbers. Needs only PyTorch (and numpy, which
PyTorch uses); docs/EXPORT.md has the details.
"""

import argparse
import copy
import hashlib
import http.client
import inspect
import json
import math
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

import torch

EXPORTER = "attention-server export_attention.py 1"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# safetensors dtype name -> (torch dtype, bytes per element)
ST_DTYPES = {
    "F64": (torch.float64, 8),
    "F32": (torch.float32, 4),
    "F16": (torch.float16, 2),
    "BF16": (torch.bfloat16, 2),
    "I64": (torch.int64, 8),
    "I32": (torch.int32, 4),
    "I16": (torch.int16, 2),
    "I8": (torch.int8, 1),
    "U8": (torch.uint8, 1),
    "BOOL": (torch.bool, 1),
}
FLOAT_DTYPES = ("F64", "F32", "F16", "BF16")
TORCH_TO_ST = {tdt: name for name, (tdt, _) in ST_DTYPES.items()}
OUT_DTYPES = {"f32": "F32", "f16": "F16", "bf16": "BF16"}
# unit roundoff of each output dtype: the relative error of one rounding
UNIT_ROUNDOFF = {"F64": 2.0**-53, "F32": 2.0**-24, "F16": 2.0**-11, "BF16": 2.0**-8}
# config.json keys that give the number of heads, in the order they are tried
# (the encoder_/decoder_ ones only for a prefix naming an encoder or decoder)
HEADS_KEYS = ("num_attention_heads", "n_head", "num_heads")
SERVER_TOLERANCE = 1e-4  # relative to max(1, max|PyTorch|), as the project's golden tests
# For F16/BF16 output, the rebuilt layer may differ from the unrounded source
# by at most this many unit roundoffs x max(1, max|source|): a guard against
# a layer that the dtype cannot hold, not a test of the exporter (the exact
# comparison with the rounded source is that).
ROUNDING_FACTOR = 64


class ExportError(Exception):
    """Bad input: no such layer, a missing option, an unreadable file."""


class CheckFailed(ExportError):
    """The written file does not reproduce the layer (PyTorch or the server)."""


# ------------------------------------------------------------- safetensors


def tensor_bytes(t, st_dtype):
    """Little-endian bytes of tensor t stored as st_dtype (F64, F32, F16, BF16
    or BOOL, one byte each)."""
    t = t.detach().to(ST_DTYPES[st_dtype][0]).contiguous().cpu()
    if st_dtype == "BOOL":
        return t.to(torch.uint8).numpy().tobytes()
    if st_dtype == "BF16":  # numpy has no bfloat16: its bits as int16
        return t.view(torch.int16).numpy().astype("<i2").tobytes()
    return t.numpy().astype({"F64": "<f8", "F32": "<f4", "F16": "<f2"}[st_dtype]).tobytes()


def write_safetensors(path, tensors, metadata=None):
    """tensors: [(name, st_dtype, tensor)], stored in that order; metadata:
    str -> str (sorted; no __metadata__ when empty). Format: u64 little-endian
    header length N, N bytes of JSON (padded with spaces to a multiple of 8),
    then the tensors' bytes back to back. The golden tests write their cases
    with this too (tests/golden/mha_cases.py)."""
    header = {}
    if metadata:
        for k, v in metadata.items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise TypeError("metadata %r: %r must be str -> str" % (k, v))
        header["__metadata__"] = dict(sorted(metadata.items()))
    blobs, off = [], 0
    for name, st_dtype, t in tensors:
        if name in header:
            raise ValueError("duplicate tensor name %s" % name)
        b = tensor_bytes(t, st_dtype)
        shape = list(t.shape)
        assert len(b) == math.prod(shape) * ST_DTYPES[st_dtype][1]
        header[name] = {"dtype": st_dtype, "shape": shape, "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    js = json.dumps(header, separators=(",", ":")).encode("utf-8")
    js += b" " * (-len(js) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(js)))
        f.write(js)
        for b in blobs:
            f.write(b)


class Checkpoint:
    """A flat table of named tensors: entries maps name -> (dtype name, shape);
    tensor(name) loads one. metadata is the safetensors __metadata__ ({} for a
    PyTorch file)."""

    def __init__(self, label, entries, loader, metadata=None, kind="state_dict"):
        self.label = label
        self.entries = entries
        self._loader = loader
        self.metadata = metadata or {}
        self.kind = kind

    def tensor(self, name):
        return self._loader(name)

    @classmethod
    def from_dict(cls, state, label):
        """From a mapping name -> tensor; nested dicts (a checkpoint holding
        {"state_dict": ...} or {"model": ...}) are flattened with dots, and
        entries that are not tensors are left out."""
        flat = {}

        def walk(prefix, obj):
            for k, v in obj.items():
                name = prefix + str(k)
                if isinstance(v, torch.Tensor):
                    flat[name] = v.detach().cpu()
                elif isinstance(v, dict):
                    walk(name + ".", v)

        walk("", state)
        entries = {n: (TORCH_TO_ST.get(t.dtype, str(t.dtype).replace("torch.", "")), list(t.shape))
                   for n, t in flat.items()}
        return cls(label, entries, flat.__getitem__)

    @classmethod
    def open(cls, path):
        """A .safetensors file (by its name or its first bytes), else a
        PyTorch file read by torch.load."""
        if not os.path.isfile(path):
            raise ExportError("%s: no such file" % path)
        ext = os.path.splitext(path)[1].lower()
        if ext == ".safetensors" or (ext not in TORCH_EXTENSIONS and _looks_like_safetensors(path)):
            return read_safetensors(path)
        return load_torch_file(path)


TORCH_EXTENSIONS = (".bin", ".pt", ".pth", ".ckpt")


def _looks_like_safetensors(path):
    """A header length that fits the file, followed by a JSON object."""
    with open(path, "rb") as f:
        head = f.read(9)
    if len(head) < 9:
        return False
    (n,) = struct.unpack("<Q", head[:8])
    return 2 <= n <= os.path.getsize(path) - 8 and head[8:9] == b"{"


def read_safetensors(path):
    """A Checkpoint over a safetensors file; tensors are read on demand."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise ExportError("%s: not a safetensors file (%d bytes)" % (path, size))
        (n,) = struct.unpack("<Q", head)
        if n > size - 8:
            raise ExportError("%s: not a safetensors file (its header length %d is past the end "
                              "of the %d-byte file)" % (path, n, size))
        raw = f.read(n)
    try:
        header = json.loads(raw.decode("utf-8"))
    except ValueError as e:
        raise ExportError("%s: the safetensors header is not JSON: %s" % (path, e))
    if not isinstance(header, dict):
        raise ExportError("%s: the safetensors header is not a JSON object" % path)
    meta = header.pop("__metadata__", None) or {}
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        raise ExportError("%s: __metadata__ must map strings to strings" % path)
    data_start, data_len = 8 + n, size - 8 - n
    entries, spans = {}, {}
    for name, e in header.items():
        ok = (isinstance(e, dict) and isinstance(e.get("dtype"), str)
              and isinstance(e.get("shape"), list)
              and all(isinstance(d, int) and d >= 0 for d in e["shape"])
              and isinstance(e.get("data_offsets"), list) and len(e["data_offsets"]) == 2
              and all(isinstance(o, int) for o in e["data_offsets"]))
        if not ok:
            raise ExportError("%s: tensor \"%s\": expected {dtype, shape, data_offsets}, found %s"
                              % (path, name, json.dumps(e)[:200]))
        b, en = e["data_offsets"]
        if not 0 <= b <= en <= data_len:
            raise ExportError("%s: tensor \"%s\": data_offsets [%d, %d] outside the %d data bytes"
                              % (path, name, b, en, data_len))
        if e["dtype"] in ST_DTYPES and en - b != math.prod(e["shape"]) * ST_DTYPES[e["dtype"]][1]:
            raise ExportError("%s: tensor \"%s\": %d bytes for shape %s of %s"
                              % (path, name, en - b, e["shape"], e["dtype"]))
        entries[name] = (e["dtype"], list(e["shape"]))
        spans[name] = (data_start + b, en - b)

    def load(name):
        st_dtype, shape = entries[name]
        if st_dtype not in ST_DTYPES:
            raise ExportError("%s: tensor \"%s\" has dtype %s, which this tool cannot read"
                              % (path, name, st_dtype))
        off, nbytes = spans[name]
        with open(path, "rb") as f:
            f.seek(off)
            buf = bytearray(f.read(nbytes))
        tdt = ST_DTYPES[st_dtype][0]
        if not buf:
            return torch.zeros(shape, dtype=tdt)
        if sys.byteorder != "little" and ST_DTYPES[st_dtype][1] > 1:
            raise ExportError("reading safetensors on a big-endian machine is not supported")
        if st_dtype == "BOOL":
            return torch.frombuffer(buf, dtype=torch.uint8).to(torch.bool).reshape(shape)
        return torch.frombuffer(buf, dtype=tdt).reshape(shape)

    return Checkpoint(path, entries, load, meta, kind="safetensors")


def load_torch_file(path):
    """A Checkpoint over a torch.save file: a state_dict (or a dict holding
    one), read with weights_only=True where this PyTorch has it."""
    kwargs = {"map_location": "cpu"}
    if "weights_only" in inspect.signature(torch.load).parameters:
        kwargs["weights_only"] = True
    else:
        print("export_attention: warning: this PyTorch's torch.load has no weights_only: %s is "
              "unpickled without that protection" % path, file=sys.stderr)
    try:
        obj = torch.load(path, **kwargs)
    except Exception as e:  # UnpicklingError, RuntimeError, ... all mean "not a plain state_dict"
        raise ExportError(
            "%s: torch.load(weights_only=True) refused it (%s: %s). This tool reads state_dicts "
            "(tensors in dicts); for a pickled module, load it yourself and call "
            "export_mha(layer, ...) from Python, or save its state_dict()."
            % (path, type(e).__name__, str(e).splitlines()[0] if str(e) else ""))
    if not isinstance(obj, dict):
        raise ExportError("%s holds a %s, not a state_dict (a dict of tensors)"
                          % (path, type(obj).__name__))
    return Checkpoint.from_dict(obj, path)


# ------------------------------------------------------------------ layouts

# Roles a tensor plays in a layer, and the name after the prefix of each role
# in each layout (the server's core/weights.c detects the same four).
LAYOUTS = {
    "torch-packed": {"wqkv": "in_proj_weight", "bqkv": "in_proj_bias", "wo": "out_proj.weight",
                     "bo": "out_proj.bias", "bias_k": "bias_k", "bias_v": "bias_v"},
    "torch-separate": {"wq": "q_proj_weight", "wk": "k_proj_weight", "wv": "v_proj_weight",
                       "bqkv": "in_proj_bias", "wo": "out_proj.weight", "bo": "out_proj.bias",
                       "bias_k": "bias_k", "bias_v": "bias_v"},
    "hf": {"wq": "q_proj.weight", "wk": "k_proj.weight", "wv": "v_proj.weight", "bq": "q_proj.bias",
           "bk": "k_proj.bias", "bv": "v_proj.bias", "wo": "out_proj.weight", "bo": "out_proj.bias"},
    "bert": {"wq": "attention.self.query.weight", "wk": "attention.self.key.weight",
             "wv": "attention.self.value.weight", "bq": "attention.self.query.bias",
             "bk": "attention.self.key.bias", "bv": "attention.self.value.bias",
             "wo": "attention.output.dense.weight", "bo": "attention.output.dense.bias"},
}
HF_ALT_OUT = ("o_proj.weight", "o_proj.bias")  # Llama, Mistral, ...: o_proj instead of out_proj
SIGNATURE_ROLES = ("wqkv", "wq", "wk", "wv")
TORCH_LAYOUTS = ("torch-packed", "torch-separate")


def _natural_key(s):
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", s)]


def _shape(s):
    return "[" + ", ".join(str(d) for d in s) + "]"


class Layer:
    """One attention layer found in a checkpoint (or a live module): its
    tensors by role, geometry and options, each option with where it came
    from."""

    def __init__(self, ckpt, prefix, layout):
        self.ckpt, self.prefix, self.layout = ckpt, prefix, layout
        self.src = {}  # role -> full tensor name
        self.notes = []
        self.warnings = []
        self.module = None  # the live nn.MultiheadAttention, when exported from one
        self.num_heads = None
        self.heads_from = None
        self.add_zero_attn = None
        self.zero_from = None
        self._gather()
        self._check_shapes()

    def _fail(self, msg):
        raise ExportError("%s: layer \"%s\" (%s layout): %s"
                          % (self.ckpt.label, self.prefix, self.layout, msg))

    def _gather(self):
        names, entries, p = LAYOUTS[self.layout], self.ckpt.entries, self.prefix
        for role, suffix in names.items():
            if p + suffix in entries:
                self.src[role] = p + suffix
        if self.layout == "hf" and p + HF_ALT_OUT[0] in entries:
            if "wo" in self.src:
                self._fail("both \"%s\" and \"%s\" are present" % (self.src["wo"], p + HF_ALT_OUT[0]))
            self.src.pop("bo", None)
            self.src["wo"] = p + HF_ALT_OUT[0]
            if p + HF_ALT_OUT[1] in entries:
                self.src["bo"] = p + HF_ALT_OUT[1]
        required = ("wqkv", "wo") if self.layout == "torch-packed" else ("wq", "wk", "wv", "wo")
        for role in required:
            if role not in self.src:
                alt = " or \"%s\"" % (p + HF_ALT_OUT[0]) if role == "wo" and self.layout == "hf" else ""
                self._fail("missing tensor \"%s\"%s" % (p + names[role], alt))
        biases = [r for r in ("bqkv", "bq", "bk", "bv", "bo") if r in names]
        present = [r for r in biases if r in self.src]
        if present and len(present) != len(biases):
            missing = [r for r in biases if r not in self.src]
            if self.layout in TORCH_LAYOUTS:
                self._fail("biases must be all present or all absent: \"%s\" is present but \"%s\" is "
                           "missing" % (self.src[present[0]], p + names[missing[0]]))
            for r in missing:  # Whisper's k_proj has no bias: a missing bias is zero
                nm = HF_ALT_OUT[1] if r == "bo" and self.src["wo"].endswith(HF_ALT_OUT[0]) else names[r]
                self.notes.append("%s absent: written as zeros" % (p + nm))
        self.bias = bool(present)
        if ("bias_k" in self.src) != ("bias_v" in self.src):
            have, other = ("bias_k", "bias_v") if "bias_k" in self.src else ("bias_v", "bias_k")
            self._fail("\"%s\" is present but \"%s\" is missing (add_bias_kv needs both)"
                       % (self.src[have], p + names[other]))
        self.add_bias_kv = "bias_k" in self.src
        for role, name in self.src.items():
            if self.ckpt.entries[name][0] not in FLOAT_DTYPES:
                self._fail("tensor \"%s\" has dtype %s; expected F64, F32, F16 or BF16"
                           % (name, self.ckpt.entries[name][0]))

    def _check_shapes(self):
        ent = self.ckpt.entries

        def shape(role):
            return ent[self.src[role]][1]

        def expect(role, want, sym):
            if role in self.src and shape(role) != want:
                self._fail("tensor \"%s\": expected shape %s = %s with E = %d, found %s"
                           % (self.src[role], sym, _shape(want), self.E, _shape(shape(role))))

        if "wqkv" in self.src:
            s = shape("wqkv")
            if len(s) != 2 or s[1] == 0 or s[0] != 3 * s[1]:
                self._fail("tensor \"%s\": expected shape [3E, E], found %s"
                           % (self.src["wqkv"], _shape(s)))
            self.E = self.kdim = self.vdim = s[1]
        else:
            s = shape("wq")
            if len(s) != 2 or s[0] == 0 or s[0] != s[1]:
                self._fail("tensor \"%s\": expected shape [E, E], found %s"
                           % (self.src["wq"], _shape(s)))
            self.E = s[0]
            dims = []
            for role, dim in (("wk", "kdim"), ("wv", "vdim")):
                s = shape(role)
                if len(s) != 2 or s[1] == 0 or s[0] != self.E:
                    hint = ""
                    if len(s) == 2 and 0 < s[0] < self.E:
                        hint = (" (a projection with fewer outputs than E, as in grouped-query "
                                "attention, has no nn.MultiheadAttention equivalent)")
                    self._fail("tensor \"%s\": expected shape [E, %s] = [%d, %s], found %s%s"
                               % (self.src[role], dim, self.E, dim, _shape(s), hint))
                dims.append(s[1])
            self.kdim, self.vdim = dims
        E = self.E
        expect("wo", [E, E], "[E, E]")
        expect("bqkv", [3 * E], "[3E]")
        for r in ("bq", "bk", "bv", "bo"):
            expect(r, [E], "[E]")
        for r in ("bias_k", "bias_v"):
            expect(r, [1, 1, E], "[1, 1, E]")

    @property
    def dtype(self):
        """The source tensors' dtype, or "mixed"."""
        dts = {self.ckpt.entries[n][0] for n in self.src.values()}
        return dts.pop() if len(dts) == 1 else "mixed"

    @property
    def out_layout(self):
        """nn.MultiheadAttention stores in_proj_weight exactly when kdim = vdim = E."""
        return "packed" if self.kdim == self.E and self.vdim == self.E else "separate"

    def roles(self, round_to=None):
        """role -> float64 tensor (wq, wk, wv, wo always; bq, bk, bv, bo with
        bias, zeros where the source lacks one; bias_k, bias_v with
        add_bias_kv), rounded to the safetensors dtype round_to first when
        given."""
        t = {r: self.ckpt.tensor(n).detach().cpu().to(torch.float64) for r, n in self.src.items()}
        E = self.E
        if "wqkv" in t:
            t["wq"], t["wk"], t["wv"] = t.pop("wqkv").split(E)
        if "bqkv" in t:
            t["bq"], t["bk"], t["bv"] = t.pop("bqkv").split(E)
        if self.bias:
            for r in ("bq", "bk", "bv", "bo"):
                t.setdefault(r, torch.zeros(E, dtype=torch.float64))
        if round_to is not None:
            tdt = ST_DTYPES[round_to][0]
            t = {r: v.to(tdt).to(torch.float64) for r, v in t.items()}
        return t

    def mha_state(self):
        """[(name, float64 tensor)] in nn.MultiheadAttention's state_dict naming."""
        t = self.roles()
        out = []
        if self.out_layout == "packed":
            out.append(("in_proj_weight", torch.cat([t["wq"], t["wk"], t["wv"]])))
        else:
            out += [("q_proj_weight", t["wq"]), ("k_proj_weight", t["wk"]), ("v_proj_weight", t["wv"])]
        if self.bias:
            out.append(("in_proj_bias", torch.cat([t["bq"], t["bk"], t["bv"]])))
        if self.add_bias_kv:
            out += [("bias_k", t["bias_k"]), ("bias_v", t["bias_v"])]
        out.append(("out_proj.weight", t["wo"]))
        if self.bias:
            out.append(("out_proj.bias", t["bo"]))
        return out

    def metadata(self):
        b = _bool_str
        return {
            "num_heads": str(self.num_heads), "add_zero_attn": b(self.add_zero_attn),
            "add_bias_kv": b(self.add_bias_kv), "bias": b(self.bias), "embed_dim": str(self.E),
            "kdim": str(self.kdim), "vdim": str(self.vdim), "layout": self.out_layout,
            "exporter": EXPORTER,
        }

    def describe(self):
        return ("E=%d kdim=%d vdim=%d bias=%s add_bias_kv=%s"
                % (self.E, self.kdim, self.vdim, _bool_str(self.bias), _bool_str(self.add_bias_kv)))


def _bool_str(x):
    return "true" if x else "false"


def find_layers(ckpt):
    """[(prefix, Layer or ExportError)] for every prefix under which a layer's
    signature tensor (in_proj_weight, q_proj_weight, q_proj.weight,
    attention.self.query.weight, ...) stands, in natural order."""
    found = {}
    for name in ckpt.entries:
        for layout, names in LAYOUTS.items():
            for role in SIGNATURE_ROLES:
                suffix = names.get(role)
                if suffix and name.endswith(suffix):
                    prefix = name[:-len(suffix)]
                    if prefix == "" or prefix.endswith("."):
                        layouts = found.setdefault(prefix, [])
                        if layout not in layouts:
                            layouts.append(layout)
    out = []
    for prefix in sorted(found, key=_natural_key):
        layouts = found[prefix]
        if len(layouts) > 1:
            out.append((prefix, ExportError(
                "%s: ambiguous layer \"%s\": tensors of the %s layouts are all present"
                % (ckpt.label, prefix, " and ".join(layouts)))))
            continue
        try:
            out.append((prefix, Layer(ckpt, prefix, layouts[0])))
        except ExportError as e:
            out.append((prefix, e))
    return out


def _some_names(ckpt, n=6):
    names = list(ckpt.entries)
    shown = ", ".join('"%s"' % x for x in names[:n])
    return (shown + (" (and %d more)" % (len(names) - n) if len(names) > n else "")) or "none"


def select_layer(ckpt, prefix):
    """The layer under prefix ("a.b" and "a.b." both select "a.b.q_proj.weight"),
    or the only layer when prefix is None."""
    layers = find_layers(ckpt)
    if not layers:
        raise ExportError("%s: no attention layer found: expected tensors named in_proj_weight, "
                          "q_proj_weight, q_proj.weight or attention.self.query.weight (under any "
                          "prefix); the file has %d tensors: %s"
                          % (ckpt.label, len(ckpt.entries), _some_names(ckpt)))
    listing = "\n".join('  "%s" (%s)' % (p, l.layout if isinstance(l, Layer) else "unusable: " + str(l))
                        for p, l in layers)
    if prefix is None:
        if len(layers) > 1:
            raise ExportError("%s holds %d attention layers; choose one with --prefix:\n%s"
                              % (ckpt.label, len(layers), listing))
        chosen = layers[0]
    else:
        want = [prefix] if prefix == "" or prefix.endswith(".") else [prefix, prefix + "."]
        match = [pl for pl in layers if pl[0] in want]
        if not match:
            raise ExportError("%s: no attention layer under the prefix \"%s\"; the layers are:\n%s"
                              % (ckpt.label, prefix, listing))
        chosen = match[-1]
    if isinstance(chosen[1], ExportError):
        raise chosen[1]
    return chosen[1]


# ------------------------------------------------------------------ options


def _positive_int(s):
    return int(s) if isinstance(s, str) and s.isdigit() and int(s) > 0 else None


def _read_config(config_path):
    try:
        with open(config_path) as f:
            cfg = json.load(f)
    except (OSError, ValueError) as e:
        raise ExportError("%s: cannot read it as JSON: %s" % (config_path, e))
    return cfg if isinstance(cfg, dict) else {}


def model_config_heads(config_path, prefix):
    """(num_heads, "config.json: KEY") from a Hugging Face style config.json,
    or (None, None). A prefix naming a decoder (or an encoder) tries
    decoder_attention_heads (encoder_attention_heads) first."""
    cfg = _read_config(config_path)
    parts = prefix.split(".")
    keys = []
    if "decoder" in parts:
        keys.append("decoder_attention_heads")
    elif "encoder" in parts:
        keys.append("encoder_attention_heads")
    for key in keys + list(HEADS_KEYS):
        v = cfg.get(key)
        if isinstance(v, int) and not isinstance(v, bool) and v > 0:
            return v, "%s: %s" % (os.path.basename(config_path), key)
    return None, None


# config.json keys that say the model's attention does more than
# nn.MultiheadAttention: positions enter the scores (rotary, ALiBi, relative)
POSITION_KEYS = ("rope_theta", "rope_scaling", "rotary_dim", "rotary_pct", "rotary_emb_base",
                 "alibi", "relative_attention_num_buckets")


def model_config_warnings(config_path):
    """Warnings for a config.json whose model mixes positions into the
    attention scores: the exported layer computes without them."""
    cfg = _read_config(config_path)
    found = [k for k in POSITION_KEYS if cfg.get(k) not in (None, False)]
    pet = cfg.get("position_embedding_type")
    if isinstance(pet, str) and pet != "absolute":
        found.append("position_embedding_type \"%s\"" % pet)
    if not found:
        return []
    return ["%s has %s: this model's attention mixes positions into the scores, which an "
            "nn.MultiheadAttention (and the server) does not; the exported layer is the "
            "projections and softmax attention alone" % (os.path.basename(config_path),
                                                         ", ".join(found))]


def default_model_config(checkpoint_path):
    """config.json beside the checkpoint, when there is one."""
    p = os.path.join(os.path.dirname(os.path.abspath(checkpoint_path)), "config.json")
    return p if os.path.isfile(p) else None


def resolve_options(layer, num_heads=None, add_zero_attn=None, model_config=None, required=True):
    """Set layer.num_heads and layer.add_zero_attn, each with where it came
    from. Sources: the argument (--num-heads, --add-zero-attn), the
    checkpoint's __metadata__, config.json (num_heads only), the default
    (add_zero_attn false). Two sources that disagree are an error naming both."""
    label = layer.ckpt.label
    candidates = []
    if num_heads is not None:
        if not isinstance(num_heads, int) or num_heads <= 0:
            raise ExportError("--num-heads must be a positive integer, got %r" % (num_heads,))
        candidates.append((num_heads, "--num-heads"))
    if "num_heads" in layer.ckpt.metadata:
        h = _positive_int(layer.ckpt.metadata["num_heads"])
        if h is None:
            raise ExportError("%s: __metadata__[\"num_heads\"]: expected a positive decimal "
                              "integer, found \"%s\"" % (label, layer.ckpt.metadata["num_heads"]))
        candidates.append((h, "__metadata__"))
    if model_config:
        h, where = model_config_heads(model_config, layer.prefix)
        if h is not None:
            candidates.append((h, where))
    for h, where in candidates[1:]:
        if h != candidates[0][0]:
            raise ExportError("num_heads: %s says %d but %s says %d"
                              % (candidates[0][1], candidates[0][0], where, h))
    if candidates:
        layer.num_heads, layer.heads_from = candidates[0]
    elif required:
        divisors = [d for d in range(1, min(layer.E, 64) + 1) if layer.E % d == 0]
        raise ExportError(
            "num_heads of layer \"%s\" is not recorded in %s (a state_dict cannot hold it): pass "
            "--num-heads H (a divisor of E = %d: %s%s), or put the model's config.json "
            "(num_attention_heads, n_head or num_heads) beside the checkpoint or name it with "
            "--model-config" % (layer.prefix, label, layer.E, ", ".join(map(str, divisors)),
                                ", ..." if layer.E > 64 else ""))
    if layer.num_heads is not None and layer.E % layer.num_heads != 0:
        raise ExportError("embed dim E = %d is not divisible by num_heads = %d (from %s)"
                          % (layer.E, layer.num_heads, layer.heads_from))

    meta_z = layer.ckpt.metadata.get("add_zero_attn")
    if meta_z is not None and meta_z not in ("true", "false"):
        raise ExportError("%s: __metadata__[\"add_zero_attn\"]: expected \"true\" or \"false\", "
                          "found \"%s\"" % (label, meta_z))
    if add_zero_attn is not None:
        if meta_z is not None and (meta_z == "true") != bool(add_zero_attn):
            raise ExportError("add_zero_attn: --add-zero-attn says %s but __metadata__ says %s"
                              % (_bool_str(add_zero_attn), meta_z))
        layer.add_zero_attn, layer.zero_from = bool(add_zero_attn), "--add-zero-attn"
    elif meta_z is not None:
        layer.add_zero_attn, layer.zero_from = meta_z == "true", "__metadata__"
    elif layer.layout in TORCH_LAYOUTS:
        layer.add_zero_attn = False
        layer.zero_from = ("default: a state_dict does not record it; pass --add-zero-attn if the "
                           "layer was built with add_zero_attn=True")
    else:
        layer.add_zero_attn, layer.zero_from = False, "default: %s attention has none" % layer.layout


# ------------------------------------------------------------ computations


def _mha_forward(m, q, k, v):
    """(output [n,E], weights [H,n,M]) of nn.MultiheadAttention m (float64,
    eval, batch_first False) on unbatched float64 q [n,E], k [m,kdim], v [m,vdim]."""
    with torch.no_grad():
        out, w = m(q.unsqueeze(1), k.unsqueeze(1), v.unsqueeze(1), need_weights=True,
                   average_attn_weights=False)
    return out[:, 0, :], w[0]


def _plain_forward(t, E, H, add_zero_attn, q, k, v):
    """The same in plain float64 operations from the roles (wq, bq, ...): the
    reference for layers that are not nn.MultiheadAttention state_dicts."""
    def lin(x, w, b):
        return x @ w.T + (b if b is not None else 0)

    Q, K, V = lin(q, t["wq"], t.get("bq")), lin(k, t["wk"], t.get("bk")), lin(v, t["wv"], t.get("bv"))
    if "bias_k" in t:
        K = torch.cat([K, t["bias_k"].reshape(1, E)])
        V = torch.cat([V, t["bias_v"].reshape(1, E)])
    if add_zero_attn:
        K = torch.cat([K, torch.zeros(1, E, dtype=K.dtype)])
        V = torch.cat([V, torch.zeros(1, E, dtype=V.dtype)])
    d = E // H
    Qh, Kh, Vh = (x.reshape(x.shape[0], H, d).transpose(0, 1) for x in (Q, K, V))
    W = torch.softmax(Qh @ Kh.transpose(1, 2) / math.sqrt(d), dim=-1)
    A = (W @ Vh).transpose(0, 1).reshape(q.shape[0], E)
    return lin(A, t["wo"], t.get("bo")), W


def new_mha(meta):
    """An nn.MultiheadAttention (float64, eval) with the options in meta."""
    def flag(key):
        return meta[key] == "true"

    m = torch.nn.MultiheadAttention(
        int(meta["embed_dim"]), int(meta["num_heads"]), dropout=0.0, bias=flag("bias"),
        add_bias_kv=flag("add_bias_kv"), add_zero_attn=flag("add_zero_attn"),
        kdim=int(meta["kdim"]), vdim=int(meta["vdim"]))
    return m.double().eval()


def source_forward(layer, round_to=None):
    """f(q, k, v) -> (output, weights) of the source layer in float64, its
    parameters first rounded to round_to when given: the live module itself,
    an nn.MultiheadAttention loaded with the checkpoint's own tensors for the
    PyTorch layouts, plain operations on the Hugging Face / BERT tensors."""
    if layer.module is not None:
        m = copy.deepcopy(layer.module).cpu().double().eval()
        m.batch_first = False
        if round_to is not None:
            with torch.no_grad():
                for p in m.parameters():
                    p.copy_(p.to(ST_DTYPES[round_to][0]).to(torch.float64))
        return lambda q, k, v: _mha_forward(m, q, k, v)
    as_stored = (layer.layout == "torch-packed") == (layer.out_layout == "packed")
    if layer.layout in TORCH_LAYOUTS and as_stored:
        m = new_mha(layer.metadata())
        state = {}
        for name in layer.src.values():
            t = layer.ckpt.tensor(name).to(torch.float64)
            if round_to is not None:
                t = t.to(ST_DTYPES[round_to][0]).to(torch.float64)
            state[name[len(layer.prefix):]] = t
        m.load_state_dict(state, strict=True)
        return lambda q, k, v: _mha_forward(m, q, k, v)
    t = layer.roles(round_to)
    return lambda q, k, v: _plain_forward(t, layer.E, layer.num_heads, layer.add_zero_attn, q, k, v)


def rebuild_from_file(path):
    """(nn.MultiheadAttention built from the file alone, its metadata)."""
    st = read_safetensors(path)
    meta = st.metadata
    want = ("num_heads", "add_zero_attn", "add_bias_kv", "bias", "embed_dim", "kdim", "vdim",
            "layout", "exporter")
    missing = [k for k in want if k not in meta]
    if missing:
        raise CheckFailed("%s: __metadata__ lacks %s" % (path, ", ".join(missing)))
    m = new_mha(meta)
    state = {n: st.tensor(n).to(torch.float64) for n in st.entries}
    try:
        m.load_state_dict(state, strict=True)
    except RuntimeError as e:
        raise CheckFailed("%s: its tensors do not load into nn.MultiheadAttention(%s): %s"
                          % (path, ", ".join("%s=%s" % kv for kv in sorted(meta.items())), e))
    if ("in_proj_weight" in state) != (meta["layout"] == "packed"):
        raise CheckFailed("%s: __metadata__ layout \"%s\" but tensors %s"
                          % (path, meta["layout"], ", ".join(state)))
    return m, meta


def random_inputs(layer, n=5, m=7, seed=0):
    """float64 query [n,E], key [m,kdim], value [m,vdim] holding float32
    values (so that JSON carries them exactly); m != n catches transposes."""
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(r, c, generator=g).float().double()
                 for r, c in ((n, layer.E), (m, layer.kdim), (m, layer.vdim)))


def _max_diff(a, b):
    return (a - b).abs().max().item() if a.numel() else 0.0


def _scale(t):
    return max(1.0, t.abs().max().item() if t.numel() else 0.0)


# -------------------------------------------------------------- the server


def find_server(explicit=None):
    """--server PATH, else $ATTN_SERVER_BIN, else bin/attention-server of this
    checkout, else attention-server on PATH."""
    if explicit:
        cands = [("--server", explicit)]
    elif os.environ.get("ATTN_SERVER_BIN"):
        cands = [("ATTN_SERVER_BIN", os.environ["ATTN_SERVER_BIN"])]
    else:
        cands = [("this checkout", os.path.join(ROOT, "bin", "attention-server"))]
        on_path = shutil.which("attention-server")
        if on_path:
            cands.append(("PATH", on_path))
    for where, p in cands:
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return os.path.abspath(p)
    if explicit or os.environ.get("ATTN_SERVER_BIN"):
        raise ExportError("the server binary %s (from %s) is not an executable file"
                          % (cands[0][1], cands[0][0]))
    raise ExportError("no attention-server binary to check the file with (looked at %s and on PATH): "
                      "build it (make), name it with --server PATH or ATTN_SERVER_BIN, or skip "
                      "this check with --no-server-check" % cands[0][1])


def _http(port, method, path, body=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        headers = {"Content-Type": "application/json"} if body is not None else {}
        conn.request(method, path, body=body, headers=headers)
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


def _server_env():
    """The environment without the user's ATTN_* settings (models, API key,
    config file), which must not leak into the check."""
    return {k: v for k, v in os.environ.items() if not k.startswith("ATTN_")}


def read_log(logpath):
    with open(logpath) as f:
        return f.read().rstrip()


def start_server(binary, models, logpath, threads=1, timeout=300):
    """attention-server on 127.0.0.1 and a free port, serving models [(name,
    path)], its log appended to logpath: (process, port). Raises CheckFailed
    with the log when it does not come up."""
    args = [binary, "--host", "127.0.0.1", "--port", "0", "--threads", str(threads), "--no-ui"]
    for name, path in models:
        args += ["--model", "%s=%s" % (name, path)]
    with open(logpath, "a") as logf:  # appending: the server's lines never overwrite each other
        proc = subprocess.Popen(args, env=_server_env(), stdout=logf, stderr=subprocess.STDOUT)
    deadline = time.time() + timeout
    while time.time() < deadline and proc.poll() is None:
        # server/main.c: "listening on HOST:PORT with N compute threads, ..."
        m = re.search(r"listening on \S*:(\d+) ", read_log(logpath))
        if m:
            return proc, int(m.group(1))
        time.sleep(0.05)
    why = ("exit %d" % proc.returncode if proc.poll() is not None
           else "no 'listening on' line in %d s" % timeout)
    stop_server(proc)
    raise CheckFailed("attention-server did not start (%s):\n%s" % (why, read_log(logpath)))


def stop_server(proc, timeout=60):
    """SIGTERM, then its exit status (None when it had to be killed after
    timeout seconds)."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            return None
    return proc.returncode


def server_check(binary, path, meta, inputs, expect_out, expect_w, log):
    """attention-server --check on the file, then serve it on a free port and
    compare GET /v1/models/NAME with meta and one POST /attend with PyTorch's
    (expect_out, expect_w). Returns (output diff, weights diff)."""
    name = "exported"
    try:
        r = subprocess.run([binary, "--check", "--model", "%s=%s" % (name, path)], env=_server_env(),
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           universal_newlines=True, timeout=600)
    except subprocess.TimeoutExpired:
        raise CheckFailed("%s --check did not finish in 600 s" % binary)
    if r.returncode != 0:
        raise CheckFailed("attention-server --check refused the file (exit %d):\n%s"
                          % (r.returncode, r.stdout.rstrip()))
    log("  attention-server --check: ok")

    logpath = os.path.join(os.path.dirname(path), "server.log")
    proc, port = start_server(binary, [(name, path)], logpath)
    try:
        result = _ask_server(port, name, path, meta, inputs, expect_out, expect_w, log)
    finally:
        rc = stop_server(proc)
    if rc != 0:
        raise CheckFailed("attention-server %s after SIGTERM:\n%s"
                          % ("did not stop within 60 s" if rc is None else "exited with %d" % rc,
                             read_log(logpath)))
    return result


def _ask_server(port, name, path, meta, inputs, expect_out, expect_w, log):
    status, body = _http(port, "GET", "/v1/models/" + name)
    if status != 200:
        raise CheckFailed("GET /v1/models/%s answered %d: %s" % (name, status, body[:500]))
    info = json.loads(body)
    got = {"embed_dim": str(info.get("embed_dim")), "num_heads": str(info.get("num_heads")),
           "kdim": str(info.get("kdim")), "vdim": str(info.get("vdim")),
           "bias": _bool_str(info.get("bias")), "add_bias_kv": _bool_str(info.get("add_bias_kv")),
           "add_zero_attn": _bool_str(info.get("add_zero_attn")),
           "layout": str(info.get("layout")).replace("torch-", "")}
    wrong = ["%s: file %s, server %s" % (k, meta[k], v) for k, v in got.items() if meta[k] != v]
    with open(path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    if info.get("sha256") not in (None, digest):
        wrong.append("sha256: file %s, server %s" % (digest, info.get("sha256")))
    if wrong:
        raise CheckFailed("the server reads the layer differently from its __metadata__: "
                          + "; ".join(wrong))
    log("  GET /v1/models/%s: embed_dim, num_heads, kdim, vdim, bias, add_bias_kv, "
        "add_zero_attn and layout as in __metadata__" % name)

    q, k, v = inputs
    req = {"model": name, "query": q.tolist(), "key": k.tolist(), "value": v.tolist(),
           "need_weights": True}
    status, body = _http(port, "POST", "/attend", json.dumps(req).encode())
    if status != 200:
        raise CheckFailed("POST /attend answered %d: %s" % (status, body[:500]))
    ans = json.loads(body)
    out = torch.tensor(ans["output"], dtype=torch.float64)
    w = torch.tensor(ans["attention_weights"], dtype=torch.float64)
    if out.shape != expect_out.shape or w.shape != expect_w.shape:
        raise CheckFailed("POST /attend: shapes output %s, attention_weights %s; PyTorch's "
                          "are %s and %s" % (_shape(out.shape), _shape(w.shape),
                                             _shape(expect_out.shape), _shape(expect_w.shape)))
    d_out, d_w = _max_diff(out, expect_out), _max_diff(w, expect_w)
    tol_out, tol_w = SERVER_TOLERANCE * _scale(expect_out), SERVER_TOLERANCE
    ok = d_out <= tol_out and d_w <= tol_w
    log("  POST /attend on port %d: max abs diff to PyTorch %.3g (output, tolerance %.3g), "
        "%.3g (attention weights, tolerance %.3g): %s"
        % (port, d_out, tol_out, d_w, tol_w, "ok" if ok else "MISMATCH"))
    if not ok:
        raise CheckFailed("the server's answer differs from PyTorch's: output by %.3g "
                          "(tolerance %.3g), attention weights by %.3g (tolerance %.3g)"
                          % (d_out, tol_out, d_w, tol_w))
    return d_out, d_w


# ------------------------------------------------------------------- export


def _export(layer, out_path, dtype, server_check_on, server, log):
    st_dtype = OUT_DTYPES.get(str(dtype).lower())
    if st_dtype is None:
        raise ExportError("dtype %r: expected one of %s" % (dtype, ", ".join(OUT_DTYPES)))
    out_dir = os.path.dirname(os.path.abspath(out_path))
    if not os.path.isdir(out_dir):
        raise ExportError("%s: no such directory to write %s into" % (out_dir, out_path))
    binary = find_server(server) if server_check_on else None

    where = ("layer \"%s\" of %s" % (layer.prefix, layer.ckpt.label) if layer.module is None
             else "the nn.MultiheadAttention layer")
    log("%s: %s layout, %s" % (where, layer.layout, layer.dtype))
    log("  %s" % layer.describe())
    log("  num_heads=%d (%s), add_zero_attn=%s (%s)"
        % (layer.num_heads, layer.heads_from, _bool_str(layer.add_zero_attn), layer.zero_from))
    for note in layer.notes:
        log("  note: %s" % note)
    for warning in layer.warnings:
        log("  WARNING: %s" % warning)

    tensors = []
    for name, t in layer.mha_state():
        if not torch.isfinite(t).all():
            raise ExportError("%s: layer \"%s\": %s holds NaN or infinite values"
                              % (layer.ckpt.label, layer.prefix, name))
        r = t.to(ST_DTYPES[st_dtype][0])
        if not torch.isfinite(r).all():
            raise ExportError("tensor %s has values beyond %s's range (largest |value| %.6g): "
                              "use --dtype f32 or bf16" % (name, st_dtype, t.abs().max().item()))
        tensors.append((name, st_dtype, t))
    meta = layer.metadata()

    tmpdir = tempfile.mkdtemp(prefix="export-attention-")
    try:
        tmp = os.path.join(tmpdir, "layer.safetensors")
        write_safetensors(tmp, tensors, meta)

        # check 1: PyTorch, from the file alone
        rebuilt, file_meta = rebuild_from_file(tmp)
        if file_meta != meta:
            raise CheckFailed("re-read __metadata__ %s differs from the one written %s"
                              % (file_meta, meta))
        q, k, v = random_inputs(layer)
        got_out, got_w = _mha_forward(rebuilt, q, k, v)
        ref_out, ref_w = source_forward(layer, round_to=st_dtype)(q, k, v)
        if got_out.shape != ref_out.shape or got_w.shape != ref_w.shape:
            raise CheckFailed("the layer rebuilt from the file gives output %s and attention "
                              "weights %s; the source layer %s and %s"
                              % (_shape(got_out.shape), _shape(got_w.shape), _shape(ref_out.shape),
                                 _shape(ref_w.shape)))
        d_out, d_w = _max_diff(got_out, ref_out), _max_diff(got_w, ref_w)
        # float64 arithmetic only: 0 when both sides are nn.MultiheadAttention
        tol = 1e-9 * _scale(ref_out)
        log("check 1/2, PyTorch: nn.MultiheadAttention rebuilt from the file vs the source layer "
            "(weights as stored in %s), random query %s, key %s, value %s:"
            % (st_dtype, _shape(q.shape), _shape(k.shape), _shape(v.shape)))
        verdict = ("MISMATCH" if d_out > tol or d_w > 1e-9 else "exact" if d_out == d_w == 0
                   else "equal but for float64 rounding")
        log("  max abs diff %.3g (output), %.3g (attention weights): %s" % (d_out, d_w, verdict))
        if d_out > tol or d_w > 1e-9:
            raise CheckFailed("the layer rebuilt from the file differs from the source layer: "
                              "output by %.3g, attention weights by %.3g" % (d_out, d_w))
        if layer.dtype != st_dtype:
            raw_out, _ = source_forward(layer)(q, k, v)
            d_raw = _max_diff(got_out, raw_out)
            tol_raw = ROUNDING_FACTOR * UNIT_ROUNDOFF[st_dtype] * _scale(raw_out)
            log("  rounding the %s weights to %s moves the output by %.3g (tolerance %.3g): %s"
                % (layer.dtype, st_dtype, d_raw, tol_raw, "ok" if d_raw <= tol_raw else "TOO LARGE"))
            if d_raw > tol_raw:
                raise CheckFailed("%s loses too much of this layer: its output moves by %.3g "
                                  "(tolerance %.3g); export with --dtype f32"
                                  % (st_dtype, d_raw, tol_raw))

        # check 2: the server
        if binary:
            log("check 2/2, the server: %s" % binary)
            server_check(binary, tmp, meta, (q, k, v), got_out, got_w, log)
        else:
            log("check 2/2, the server: skipped (--no-server-check)")

        # in place at once (a model directory being polled never sees half a file)
        out_path = os.path.abspath(out_path)
        staged = os.path.join(out_dir, ".%s.%d.tmp" % (os.path.basename(out_path), os.getpid()))
        shutil.copyfile(tmp, staged)
        os.replace(staged, out_path)
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)
    size = os.path.getsize(out_path)
    log("wrote %s: %s layout, %s, %d tensors, %d bytes"
        % (out_path, meta["layout"], st_dtype, len(tensors), size))
    log("serve it: attention-server --model NAME=%s" % out_path)
    return {"path": out_path, "metadata": meta, "dtype": st_dtype, "bytes": size,
            "torch_max_diff": d_out}


def _printer(verbose):
    return (lambda s: print(s, flush=True)) if verbose else (lambda s: None)


def export_mha(layer, path, dtype="f32", server_check=True, server=None, verbose=True):
    """Write nn.MultiheadAttention `layer` to `path` as a weight set (dtype
    "f32", "f16" or "bf16"), with every option in __metadata__, after checking
    that an nn.MultiheadAttention rebuilt from the file computes what `layer`
    computes and (server_check) that attention-server serves the same numbers
    (server: its binary; default $ATTN_SERVER_BIN or bin/attention-server).
    Returns a dict (path, metadata, dtype, bytes); raises ExportError (or its
    subclass CheckFailed) and leaves `path` untouched when anything is wrong."""
    if not isinstance(layer, torch.nn.MultiheadAttention):
        raise TypeError("export_mha wants a torch.nn.MultiheadAttention, got %s" % type(layer).__name__)
    ckpt = Checkpoint.from_dict(layer.state_dict(), "the nn.MultiheadAttention")
    lay = Layer(ckpt, "", "torch-packed" if layer._qkv_same_embed_dim else "torch-separate")
    lay.module = layer
    lay.num_heads, lay.heads_from = int(layer.num_heads), "the layer"
    lay.add_zero_attn, lay.zero_from = bool(layer.add_zero_attn), "the layer"
    if (lay.E, lay.kdim, lay.vdim) != (layer.embed_dim, layer.kdim, layer.vdim):
        raise ExportError("the layer's state_dict has E=%d kdim=%d vdim=%d but the layer says "
                          "%d, %d, %d"
                          % (lay.E, lay.kdim, lay.vdim, layer.embed_dim, layer.kdim, layer.vdim))
    return _export(lay, path, dtype, server_check, server, _printer(verbose))


def export_checkpoint(checkpoint, path, prefix=None, num_heads=None, add_zero_attn=None,
                      dtype="f32", model_config=None, server_check=True, server=None, verbose=True):
    """Write the attention layer under `prefix` of a checkpoint file
    (safetensors or a torch.save'd state_dict) to `path`; see export_mha.
    model_config: a config.json for num_heads (default: the one beside the
    checkpoint, if any)."""
    ckpt = Checkpoint.open(checkpoint)
    layer = select_layer(ckpt, prefix)
    model_config = model_config or default_model_config(checkpoint)
    resolve_options(layer, num_heads, add_zero_attn, model_config)
    if model_config:
        layer.warnings += model_config_warnings(model_config)
    return _export(layer, path, dtype, server_check, server, _printer(verbose))


def list_layers(checkpoint, model_config=None):
    """[dict] one per attention layer of the checkpoint: prefix, layout, E,
    kdim, vdim, bias, add_bias_kv, num_heads and heads_from (None when not
    known), dtype; or prefix and error for a layer that cannot be exported."""
    return _listing(checkpoint, model_config)[1]


def _listing(checkpoint, model_config):
    ckpt = Checkpoint.open(checkpoint)
    model_config = model_config or default_model_config(checkpoint)
    out = []
    for prefix, layer in find_layers(ckpt):
        if isinstance(layer, ExportError):
            out.append({"prefix": prefix, "error": str(layer)})
            continue
        try:
            resolve_options(layer, model_config=model_config, required=False)
        except ExportError as e:
            out.append({"prefix": prefix, "error": str(e)})
            continue
        out.append({"prefix": prefix, "layout": layer.layout, "E": layer.E, "kdim": layer.kdim,
                    "vdim": layer.vdim, "bias": layer.bias, "add_bias_kv": layer.add_bias_kv,
                    "num_heads": layer.num_heads, "heads_from": layer.heads_from,
                    "dtype": layer.dtype})
    warnings = model_config_warnings(model_config) if model_config and out else []
    return ckpt, out, warnings


# --------------------------------------------------------------------- CLI

EXAMPLES = """\
examples:
  # the layers a checkpoint holds (prefix, layout, sizes, num_heads when known)
  tools/export_attention.py --list pytorch_model.bin

  # one layer of a Hugging Face model; num_heads from the config.json beside it
  tools/export_attention.py pytorch_model.bin --prefix model.layers.0.self_attn -o layer0.safetensors

  # a BERT layer, heads given, stored as BF16
  tools/export_attention.py bert.safetensors --prefix bert.encoder.layer.3 --num-heads 12 \\
      --dtype bf16 -o bert3.safetensors

  # a torch.save'd nn.MultiheadAttention state_dict (it records neither num_heads
  # nor add_zero_attn: say them)
  tools/export_attention.py mha.pt --num-heads 8 --add-zero-attn -o mha.safetensors

  # from Python, a live layer:
  #   import sys; sys.path.insert(0, "tools")
  #   from export_attention import export_mha
  #   export_mha(model.attn, "attn.safetensors", dtype="f32")

num_heads comes from --num-heads, the checkpoint's __metadata__ (safetensors),
or config.json beside the checkpoint (--model-config names another): its
num_attention_heads, n_head or num_heads, tried in that order, after
decoder_attention_heads / encoder_attention_heads for a prefix with a
"decoder" / "encoder" part. Sources that disagree are an error.

The file is first written to a temporary directory and checked: (1) an
nn.MultiheadAttention rebuilt from the file alone must equal the source layer
on a random input (exactly, with the weights as stored), (2) attention-server
--check must accept it, and the server on a free port must answer
GET /v1/models/NAME with the file's options and POST /attend with PyTorch's
numbers (within 1e-4). Only then is OUTPUT replaced, in one rename.

exit status: 0 written and checked; 1 bad input or options; 2 usage;
3 a check failed (OUTPUT left untouched).
"""


def main(argv=None):
    p = argparse.ArgumentParser(
        prog="export_attention.py",
        description="Write one attention layer of a checkpoint as an attention-server weight set\n"
                    "(safetensors, nn.MultiheadAttention naming, every layer option in __metadata__),\n"
                    "and check that the file reproduces the layer in PyTorch and in the server.",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("checkpoint",
                   help="a .safetensors file, or a torch.save'd state_dict (.bin, .pt, .pth)")
    p.add_argument("-o", "--output", metavar="OUTPUT", help="the weight set to write (.safetensors)")
    p.add_argument("--list", action="store_true",
                   help="list the attention layers the checkpoint holds, write nothing")
    p.add_argument("--prefix",
                   help="the layer to export, as --list shows it (needed when there are several)")
    p.add_argument("--num-heads", type=int, metavar="H",
                   help="number of heads (a state_dict does not record it)")
    p.add_argument("--add-zero-attn", action="store_true", default=None,
                   help="the layer was built with add_zero_attn=True (a state_dict does not record it)")
    p.add_argument("--model-config", metavar="CONFIG_JSON",
                   help="config.json to read num_heads from (default: config.json beside the "
                        "checkpoint)")
    p.add_argument("--dtype", choices=sorted(OUT_DTYPES), default="f32",
                   help="storage dtype of the weight set (default f32; the server converts "
                        "F16/BF16 at load)")
    p.add_argument("--server", metavar="PATH",
                   help="attention-server binary for the check (default $ATTN_SERVER_BIN, else "
                        "bin/attention-server of this checkout, else PATH)")
    p.add_argument("--no-server-check", action="store_true", help="skip the check with the server")
    args = p.parse_args(argv)

    try:
        if args.list:
            print_listing(*_listing(args.checkpoint, args.model_config))
            return 0
        if not args.output:
            p.error("-o OUTPUT is required (or --list)")
        export_checkpoint(args.checkpoint, args.output, prefix=args.prefix, num_heads=args.num_heads,
                          add_zero_attn=args.add_zero_attn, dtype=args.dtype,
                          model_config=args.model_config, server_check=not args.no_server_check,
                          server=args.server)
        return 0
    except CheckFailed as e:
        print("export_attention: check failed, nothing written: %s" % e, file=sys.stderr)
        return 3
    except (ExportError, OSError) as e:
        print("export_attention: error: %s" % e, file=sys.stderr)
        return 1


def print_listing(ckpt, layers, warnings):
    if not layers:
        print("%s: no attention layer (%d tensors: %s)"
              % (ckpt.label, len(ckpt.entries), _some_names(ckpt)))
        return
    print("%s: %d attention layer%s" % (ckpt.label, len(layers), "" if len(layers) == 1 else "s"))
    rows = [("prefix", "layout", "E", "kdim", "vdim", "bias", "bias_kv", "dtype", "num_heads")]
    errors = []
    for l in layers:
        if "error" in l:
            errors.append(l)
            continue
        heads = ("%d (%s)" % (l["num_heads"], l["heads_from"]) if l["num_heads"]
                 else "? (give --num-heads)")
        rows.append(('"%s"' % l["prefix"], l["layout"], str(l["E"]), str(l["kdim"]), str(l["vdim"]),
                     _bool_str(l["bias"]), _bool_str(l["add_bias_kv"]), l["dtype"], heads))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    for l in errors:
        print('  "%s": cannot be exported: %s' % (l["prefix"], l["error"]))
    for w in warnings:
        print("WARNING: %s" % w)


if __name__ == "__main__":
    sys.exit(main())
