#!/usr/bin/python3
"""test_export.py - tools/export_attention.py, end to end (make test runs it).

    tests/exporter/test_export.py          (ATTN_SERVER_BIN: the server to use)

Exports small layers (E = 32) of every kind the tool takes: live
nn.MultiheadAttention layers through export_mha() (packed, separate with
kdim/vdim != E, add_bias_kv, add_zero_attn, bias=False, F16 output), and
checkpoint files through the command line, run by its main() in this
process (the script itself for --help and the wrong-server case): a Hugging
Face style .bin with a config.json (whose rope_theta must be warned of), a
BERT style safetensors file, an nn.TransformerEncoder saved as safetensors,
a torch.save'd separate-layout state_dict, BF16 output. Each written file is
read back with the golden tests' own reader (tests/golden/mha_cases.py): its
__metadata__ must be exactly the nine keys with the layer's values, its
tensors the source's (rounded to the dtype).

Then, independently of the exporter's own checks, one attention-server is
started on port 0 with every written file as a model, and each gets a POST
/attend with random query/key/value whose output and attention weights must
equal PyTorch's within 1e-4 x max(1, max|PyTorch|); PyTorch's numbers come
from torch.nn.functional.multi_head_attention_forward on the source weights
(the live layer itself for the live cases), in float64.

Also the refusals: several layers and no --prefix (the error lists the
prefixes), num_heads missing or disagreeing with config.json, a grouped-query
layer, a pickled module, a server whose answer is wrong (exit 3, nothing
written), and the PyTorch check catching a file with a wrong num_heads or
key and value swapped. Prints one line per case and "N passed, N failed"
last.
"""

import io
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import traceback
import urllib.request
from contextlib import redirect_stderr, redirect_stdout

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TOOL = os.path.join(ROOT, "tools", "export_attention.py")
sys.path.insert(0, os.path.join(ROOT, "tools"))
sys.path.insert(0, os.path.join(ROOT, "tests", "golden"))

try:
    import torch
    import torch.nn.functional as F
    import mha_cases as mc
    import export_attention as ea
except ImportError as e:  # pragma: no cover
    print("test_export: cannot import torch (%s): install python3-torch (make deps-test)" % e)
    print("0 passed, 1 failed")
    sys.exit(1)

E = 32
META_KEYS = {"num_heads", "add_zero_attn", "add_bias_kv", "bias", "embed_dim", "kdim", "vdim",
             "layout", "exporter"}
ROUND = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}

results = []  # (name, ok, detail)
served = []   # (model name, path, reference, kdim, vdim)


def case(name):
    def wrap(fn):
        t0 = time.time()
        try:
            detail = fn() or ""
            results.append((name, True, detail))
            print("PASS %-34s %5.1fs  %s" % (name, time.time() - t0, detail), flush=True)
        except Exception:
            results.append((name, False, ""))
            print("FAIL %-34s %5.1fs\n    %s" % (name, time.time() - t0,
                                                 traceback.format_exc().replace("\n", "\n    ")),
                  flush=True)
        return fn
    return wrap


def run_tool(*args):
    """The command line, in this process (a fresh python3 per call would spend
    most of the test importing torch): (exit status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            rc = ea.main([str(a) for a in args])
        except SystemExit as e:  # argparse
            rc = e.code
    return rc, out.getvalue(), err.getvalue()


def run_script(*args):
    """The command line as users run it, in its own process."""
    r = subprocess.run([TOOL] + [str(a) for a in args], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, universal_newlines=True, timeout=300)
    return r.returncode, r.stdout, r.stderr


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


# ------------------------------------------------------------- references


def f64(t):
    return None if t is None else t.detach().to(torch.float64)


def rounded(t, st_dtype):
    return None if t is None else f64(t.detach().to(ROUND[st_dtype]))


def functional_ref(p, H, add_zero_attn=False, st_dtype="F32"):
    """PyTorch's MHA function on projection weights p (wq, wk, wv, bq, bk, bv,
    wo, bo, bias_k, bias_v; absent = None), rounded to st_dtype: f(q,k,v) ->
    (output [n,E], weights [H,n,M]) in float64."""
    p = {k: rounded(v, st_dtype) for k, v in p.items()}

    def f(q, k, v):
        bias = None
        if p.get("bq") is not None:
            bias = torch.cat([p["bq"], p["bk"], p["bv"]])
        out, w = F.multi_head_attention_forward(
            q.unsqueeze(1), k.unsqueeze(1), v.unsqueeze(1), E, H, None, bias,
            p.get("bias_k"), p.get("bias_v"), add_zero_attn, 0.0, p["wo"], p.get("bo"),
            training=False, need_weights=True, use_separate_proj_weight=True,
            q_proj_weight=p["wq"], k_proj_weight=p["wk"], v_proj_weight=p["wv"],
            average_attn_weights=False)
        return out[:, 0], w[0]
    return f


def layer_ref(mha, st_dtype="F32"):
    """The live layer itself, its parameters rounded to st_dtype, in float64."""
    m = torch.nn.MultiheadAttention(mha.embed_dim, mha.num_heads, bias=mha.in_proj_bias is not None,
                      add_bias_kv=mha.bias_k is not None, add_zero_attn=mha.add_zero_attn,
                      kdim=mha.kdim, vdim=mha.vdim).double().eval()
    m.load_state_dict({k: rounded(v, st_dtype) for k, v in mha.state_dict().items()})

    def f(q, k, v):
        with torch.no_grad():
            out, w = m(q.unsqueeze(1), k.unsqueeze(1), v.unsqueeze(1), need_weights=True,
                       average_attn_weights=False)
        return out[:, 0], w[0]
    return f


def random_mha(seed, H=4, **kw):
    torch.manual_seed(seed)
    m = torch.nn.MultiheadAttention(E, H, **kw).eval()
    with torch.no_grad():  # PyTorch starts biases at zero: make a misplaced one show
        for name, prm in m.named_parameters():
            if "bias" in name:
                prm.uniform_(-0.5, 0.5)
    return m


def check_file(path, meta, st_dtype, tensors):
    """The file's __metadata__ is exactly meta (plus the exporter key), its
    tensors exactly `tensors` (name -> source tensor) rounded to st_dtype."""
    fmeta, ft = mc.read_safetensors(path)
    want = dict(meta, exporter="attention-server export_attention.py 1")
    expect(set(fmeta) == META_KEYS, "metadata keys %s" % sorted(fmeta))
    expect(fmeta == want, "metadata %s, expected %s" % (fmeta, want))
    expect(set(ft) == set(tensors), "tensors %s, expected %s" % (sorted(ft), sorted(tensors)))
    for name, src in tensors.items():
        expect(ft[name].dtype == ROUND[st_dtype], "%s stored as %s" % (name, ft[name].dtype))
        expect(torch.equal(f64(ft[name]), rounded(src, st_dtype)), "%s differs from the source" % name)


def meta_of(E_, H, kdim, vdim, bias=True, bias_kv=False, zero=False):
    b = mc._b
    return {"num_heads": str(H), "add_zero_attn": b(zero), "add_bias_kv": b(bias_kv), "bias": b(bias),
            "embed_dim": str(E_), "kdim": str(kdim), "vdim": str(vdim),
            "layout": "packed" if kdim == vdim == E_ else "separate"}


def serve_later(name, path, ref, kdim=E, vdim=E):
    model = re.sub(r"[^A-Za-z0-9._-]+", "_", name)  # a model name the server takes
    served.append((model, path, ref, kdim, vdim))


# ------------------------------------------------------------------ cases


def live_case(name, st_dtype="F32", **kw):
    @case(name)
    def run():
        m = random_mha(len(served) + 1, **kw)
        path = os.path.join(TMP, name + ".safetensors")
        log = io.StringIO()
        with redirect_stdout(log):
            ea.export_mha(m, path, dtype=st_dtype.lower())
        expect("POST /attend" in log.getvalue(), "the exporter's server check did not run")
        check_file(path, meta_of(E, m.num_heads, m.kdim, m.vdim, m.in_proj_bias is not None,
                                 m.bias_k is not None, m.add_zero_attn), st_dtype,
                   dict(m.state_dict()))
        serve_later(name, path, layer_ref(m, st_dtype), m.kdim, m.vdim)
        return re.search(r"POST /attend[^\n]*", log.getvalue()).group(0).strip()


def make_hf(path):
    """Two Llama-style layers (o_proj; layer 1's k_proj without a bias) among
    other tensors, and a config.json with num_attention_heads = 4."""
    torch.manual_seed(11)
    sd, layers = {"model.embed_tokens.weight": torch.randn(10, E)}, []
    for i in range(2):
        p = {"w" + r: torch.randn(E, E) * 0.2 for r in "qkvo"}
        p.update({"b" + r: torch.randn(E) * 0.3 for r in "qkvo"})
        if i == 1:
            p["bk"] = None
        for r, nm in zip("qkvo", ("q_proj", "k_proj", "v_proj", "o_proj")):
            sd["model.layers.%d.self_attn.%s.weight" % (i, nm)] = p["w" + r]
            if p["b" + r] is not None:
                sd["model.layers.%d.self_attn.%s.bias" % (i, nm)] = p["b" + r]
        sd["model.layers.%d.mlp.up_proj.weight" % i] = torch.randn(2 * E, E)
        layers.append(p)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    torch.save(sd, path)
    with open(os.path.join(os.path.dirname(path), "config.json"), "w") as f:
        json.dump({"model_type": "llama", "hidden_size": E, "num_attention_heads": 4,
                   "rope_theta": 10000.0}, f)
    return layers


def make_bert(path):
    """Three BERT layers stored as F16, with their LayerNorms and pooler."""
    torch.manual_seed(12)
    tensors, layers = [("bert.pooler.dense.weight", "F16", torch.randn(E, E))], []
    for i in range(3):
        p = {}
        for r, nm in zip("qkvo", ("attention.self.query", "attention.self.key",
                                 "attention.self.value", "attention.output.dense")):
            p["w" + r] = (torch.randn(E, E) * 0.2).half()
            p["b" + r] = (torch.randn(E) * 0.3).half()
            tensors.append(("bert.encoder.layer.%d.%s.weight" % (i, nm), "F16", p["w" + r]))
            tensors.append(("bert.encoder.layer.%d.%s.bias" % (i, nm), "F16", p["b" + r]))
        tensors.append(("bert.encoder.layer.%d.attention.output.LayerNorm.weight" % i, "F16",
                        torch.ones(E)))
        layers.append(p)
    mc.write_safetensors(path, tensors, {"format": "pt"})
    return layers


def mha_proj(m):
    """nn.MultiheadAttention m's weights as functional_ref's dict."""
    sd = m.state_dict()
    if "in_proj_weight" in sd:
        wq, wk, wv = sd["in_proj_weight"].split(E)
    else:
        wq, wk, wv = sd["q_proj_weight"], sd["k_proj_weight"], sd["v_proj_weight"]
    bq = bk = bv = None
    if "in_proj_bias" in sd:
        bq, bk, bv = sd["in_proj_bias"].split(E)
    return {"wq": wq, "wk": wk, "wv": wv, "bq": bq, "bk": bk, "bv": bv, "wo": sd["out_proj.weight"],
            "bo": sd.get("out_proj.bias"), "bias_k": sd.get("bias_k"), "bias_v": sd.get("bias_v")}


def fake_server(path):
    """A stand-in for attention-server that passes --check, says its options
    right, and answers /attend with zeros."""
    with open(path, "w") as f:
        f.write(r'''#!/usr/bin/python3
import json, os, signal, struct, sys
from http.server import BaseHTTPRequestHandler, HTTPServer
args = sys.argv[1:]
if "--check" in args:
    sys.exit(0)
st = args[args.index("--model") + 1].split("=", 1)[1]
with open(st, "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    meta = json.loads(f.read(n))["__metadata__"]
info = {"embed_dim": int(meta["embed_dim"]), "num_heads": int(meta["num_heads"]),
        "kdim": int(meta["kdim"]), "vdim": int(meta["vdim"]), "bias": meta["bias"] == "true",
        "add_bias_kv": meta["add_bias_kv"] == "true",
        "add_zero_attn": meta["add_zero_attn"] == "true", "layout": "torch-" + meta["layout"]}
class H(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass
    def answer(self, obj):
        b = json.dumps(obj).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(b)))
        self.end_headers()
        self.wfile.write(b)
    def do_GET(self):
        self.answer(info)
    def do_POST(self):
        req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        n, m = len(req["query"]), len(req["key"])
        M = m + info["add_bias_kv"] + info["add_zero_attn"]
        self.answer({"output": [[0.0] * info["embed_dim"]] * n,
                     "attention_weights": [[[1.0 / M] * M] * n] * info["num_heads"]})
signal.signal(signal.SIGTERM, lambda *a: os._exit(0))
srv = HTTPServer(("127.0.0.1", 0), H)
print("info listening on 127.0.0.1:%d with 1 compute threads" % srv.server_address[1], flush=True)
srv.serve_forever()
''')
    os.chmod(path, 0o755)


def all_cases():
    # --- live layers, export_mha() in this process
    live_case("live packed")
    live_case("live separate kdim=24 vdim=40", kdim=24, vdim=40, batch_first=True)
    live_case("live add_bias_kv", add_bias_kv=True)
    live_case("live add_zero_attn", H=8, add_zero_attn=True)
    live_case("live bias=False", bias=False)
    live_case("live F16 output, separate+bias_kv", "F16", kdim=16, vdim=48, add_bias_kv=True)

    # --- a Hugging Face style checkpoint (.bin + config.json)
    hf_bin = os.path.join(TMP, "hf", "pytorch_model.bin")
    hf = make_hf(hf_bin)

    @case("hf --list")
    def _():
        rc, out, err = run_tool("--list", hf_bin)
        expect(rc == 0, "exit %d: %s" % (rc, err))
        for i in range(2):
            row = re.search(r'"model\.layers\.%d\.self_attn\."\s+hf\s+32\s+32\s+32\s+true\s+false\s+'
                            r'F32\s+4 \(config\.json: num_attention_heads\)' % i, out)
            expect(row, "no row for layer %d in:\n%s" % (i, out))
        expect("mlp" not in out, "an MLP listed as attention:\n" + out)
        expect("WARNING: config.json has rope_theta" in out, "no warning of RoPE:\n" + out)
        return "2 layers, num_heads from config.json"

    @case("hf several layers, no --prefix")
    def _():
        rc, out, err = run_tool(hf_bin, "-o", os.path.join(TMP, "nope.safetensors"))
        expect(rc == 1, "exit %d" % rc)
        expect("--prefix" in err and '"model.layers.0.self_attn."' in err
               and '"model.layers.1.self_attn."' in err, "message: " + err)
        expect(not os.path.exists(os.path.join(TMP, "nope.safetensors")), "a file was written")
        return err.strip().splitlines()[0]

    for i, st_dtype in ((0, "F32"), (1, "BF16")):
        @case("hf layer %d -> %s" % (i, st_dtype))
        def _(i=i, st_dtype=st_dtype):
            out_path = os.path.join(TMP, "hf%d.safetensors" % i)
            rc, out, err = run_tool(hf_bin, "--prefix", "model.layers.%d.self_attn" % i, "--dtype",
                                    st_dtype.lower(), "-o", out_path)
            expect(rc == 0, "exit %d:\n%s%s" % (rc, out, err))
            expect("WARNING: config.json has rope_theta" in out, "no warning of RoPE:\n" + out)
            p = dict(hf[i])
            if p["bk"] is None:
                expect("k_proj.bias absent: written as zeros" in out, "no note of the zero bias")
                p["bk"] = torch.zeros(E)
            check_file(out_path, meta_of(E, 4, E, E), st_dtype, {
                "in_proj_weight": torch.cat([p["wq"], p["wk"], p["wv"]]),
                "in_proj_bias": torch.cat([p["bq"], p["bk"], p["bv"]]),
                "out_proj.weight": p["wo"], "out_proj.bias": p["bo"]})
            serve_later("hf%d" % i, out_path, functional_ref(p, 4, st_dtype=st_dtype))
            return re.search(r"POST /attend[^\n]*", out).group(0).strip()

    @case("hf --num-heads disagrees with config")
    def _():
        rc, out, err = run_tool(hf_bin, "--prefix", "model.layers.0.self_attn.", "--num-heads", "8",
                                "-o", os.path.join(TMP, "nope.safetensors"))
        expect(rc == 1 and "--num-heads says 8" in err and "num_attention_heads says 4" in err,
               "exit %d: %s" % (rc, err))
        return err.strip()

    # --- a BERT style checkpoint (safetensors, F16, no config)
    bert_st = os.path.join(TMP, "bert.safetensors")
    bert = make_bert(bert_st)

    @case("bert --list")
    def _():
        rc, out, err = run_tool("--list", bert_st)
        expect(rc == 0, "exit %d: %s" % (rc, err))
        rows = re.findall(r'"bert\.encoder\.layer\.(\d)\."\s+bert\s+32\s+32\s+32\s+true\s+false\s+F16'
                          r'\s+\? \(give --num-heads\)', out)
        expect(rows == ["0", "1", "2"], "rows %s in:\n%s" % (rows, out))
        return "3 layers, num_heads unknown"

    @case("bert without --num-heads")
    def _():
        rc, out, err = run_tool(bert_st, "--prefix", "bert.encoder.layer.1.", "-o",
                                os.path.join(TMP, "nope.safetensors"))
        expect(rc == 1 and "--num-heads" in err and "config.json" in err, "exit %d: %s" % (rc, err))
        return err.strip()[:90] + "..."

    @case("bert layer 2, F16 in -> F32")
    def _():
        out_path = os.path.join(TMP, "bert2.safetensors")
        rc, out, err = run_tool(bert_st, "--prefix", "bert.encoder.layer.2", "--num-heads", "8",
                                "-o", out_path)
        expect(rc == 0, "exit %d:\n%s%s" % (rc, out, err))
        p = bert[2]
        check_file(out_path, meta_of(E, 8, E, E), "F32", {
            "in_proj_weight": torch.cat([p["wq"], p["wk"], p["wv"]]),
            "in_proj_bias": torch.cat([p["bq"], p["bk"], p["bv"]]),
            "out_proj.weight": p["wo"], "out_proj.bias": p["bo"]})
        serve_later("bert2", out_path, functional_ref(p, 8))
        return re.search(r"POST /attend[^\n]*", out).group(0).strip()

    # --- PyTorch layouts in checkpoint files
    @case("safetensors TransformerEncoder")
    def _():
        torch.manual_seed(13)
        enc = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(E, 4, 64), 2)
        with torch.no_grad():
            enc.layers[1].self_attn.in_proj_bias.uniform_(-0.5, 0.5)
        src = os.path.join(TMP, "encoder.safetensors")
        mc.write_safetensors(src, [(k, "F32", v) for k, v in enc.state_dict().items()],
                             {"num_heads": "4"})
        rc, out, err = run_tool("--list", src)
        expect(rc == 0 and '"layers.0.self_attn."' in out and '"layers.1.self_attn."' in out
               and "4 (__metadata__)" in out, "--list exit %d:\n%s%s" % (rc, out, err))
        out_path = os.path.join(TMP, "enc1.safetensors")
        rc, out, err = run_tool(src, "--prefix", "layers.1.self_attn.", "-o", out_path)
        expect(rc == 0, "exit %d:\n%s%s" % (rc, out, err))
        m = enc.layers[1].self_attn
        check_file(out_path, meta_of(E, 4, E, E), "F32", dict(m.state_dict()))
        serve_later("enc1", out_path, layer_ref(m))
        return re.search(r"POST /attend[^\n]*", out).group(0).strip()

    @case(".pt separate state_dict, zero_attn")
    def _():
        m = random_mha(14, H=2, kdim=20, vdim=12, add_zero_attn=True, add_bias_kv=True)
        src = os.path.join(TMP, "mha.pt")
        torch.save(m.state_dict(), src)
        out_path = os.path.join(TMP, "pt.safetensors")
        rc, out, err = run_tool(src, "--num-heads", "2", "--add-zero-attn", "-o", out_path)
        expect(rc == 0, "exit %d:\n%s%s" % (rc, out, err))
        check_file(out_path, meta_of(E, 2, 20, 12, bias_kv=True, zero=True), "F32",
                   dict(m.state_dict()))
        serve_later("pt", out_path, functional_ref(mha_proj(m), 2, add_zero_attn=True), 20, 12)
        # a state_dict does not know add_zero_attn: without the flag the default is said
        rc, out, err = run_tool(src, "--num-heads", "2", "--no-server-check", "-o",
                                os.path.join(TMP, "pt-nozero.safetensors"))
        expect(rc == 0 and "add_zero_attn=false (default: a state_dict does not record it" in out,
               "without --add-zero-attn: exit %d:\n%s%s" % (rc, out, err))
        return "add_zero_attn from --add-zero-attn; without it the default is said"

    # --- the PyTorch self-check catches a file that does not reproduce the layer
    for what, patch in (("a wrong num_heads", "metadata"), ("key and value swapped", "mha_state")):
        @case("check 1 catches " + what)
        def _(patch=patch):
            m = random_mha(15)
            orig = getattr(ea.Layer, patch)

            def metadata(self):
                return dict(orig(self), num_heads="8")

            def mha_state(self):
                st = dict(orig(self))
                w = st["in_proj_weight"]
                st["in_proj_weight"] = torch.cat([w[:E], w[2 * E:], w[E:2 * E]])
                return list(st.items())

            setattr(ea.Layer, patch, metadata if patch == "metadata" else mha_state)
            out_path = os.path.join(TMP, "never.safetensors")
            try:
                with redirect_stdout(io.StringIO()) as log:
                    ea.export_mha(m, out_path, server_check=False)
                raise AssertionError("no CheckFailed:\n" + log.getvalue())
            except ea.CheckFailed as e:
                expect(not os.path.exists(out_path), "the file was written")
                return str(e)[:100]
            finally:
                setattr(ea.Layer, patch, orig)

    @case("--help")
    def _():
        rc, out, err = run_script("--help")
        expect(rc == 0 and "examples:" in out and "--list" in out and "export_mha" in out,
               "exit %d:\n%s%s" % (rc, out, err))
        return "%d lines, with examples" % len(out.splitlines())

    # --- refusals
    @case("grouped-query layer refused")
    def _():
        sd = {"a.q_proj.weight": torch.randn(E, E), "a.k_proj.weight": torch.randn(8, E),
              "a.v_proj.weight": torch.randn(8, E), "a.o_proj.weight": torch.randn(E, E)}
        src = os.path.join(TMP, "gqa.bin")
        torch.save(sd, src)
        rc, out, err = run_tool(src, "--num-heads", "4", "-o", os.path.join(TMP, "nope.safetensors"))
        expect(rc == 1 and "a.k_proj.weight" in err and "grouped-query" in err,
               "exit %d: %s" % (rc, err))
        return err.strip()[:100] + "..."

    @case("pickled module refused")
    def _():
        src = os.path.join(TMP, "module.pt")
        torch.save(torch.nn.MultiheadAttention(E, 4), src)
        rc, out, err = run_tool(src, "--num-heads", "4", "-o", os.path.join(TMP, "nope.safetensors"))
        expect(rc == 1 and "weights_only" in err and "export_mha" in err, "exit %d: %s" % (rc, err))
        return "weights_only refusal explained"

    @case("wrong server answer: exit 3")
    def _():
        fake = os.path.join(TMP, "fake-server")
        fake_server(fake)
        out_path = os.path.join(TMP, "never.safetensors")
        rc, out, err = run_script(hf_bin, "--prefix", "model.layers.0.self_attn", "--server", fake,
                                "-o", out_path)
        expect(rc == 3, "exit %d:\n%s%s" % (rc, out, err))
        expect("differs from PyTorch" in err, "message: " + err)
        expect(not os.path.exists(out_path), "the unchecked file was written")
        expect(not [f for f in os.listdir(TMP) if f.endswith(".tmp")], "a staged file was left")
        return err.strip()[:100] + "..."


# ----------------------------------------------- the server, independently


def served_cases(binary):
    if not served:
        return
    proc, port = ea.start_server(binary, [(name, path) for name, path, _, _, _ in served],
                                 os.path.join(TMP, "server.log"), threads=2)
    try:
        g = torch.Generator().manual_seed(99)
        for model, path, ref, kdim, vdim in served:
            @case("server: " + model)
            def _(model=model, ref=ref, kdim=kdim, vdim=vdim):
                q, k, v = (torch.randn(r, c, generator=g).float().double()
                           for r, c in ((6, E), (4, kdim), (4, vdim)))
                body = json.dumps({"model": model, "query": q.tolist(), "key": k.tolist(),
                                   "value": v.tolist()}).encode()
                req = urllib.request.Request("http://127.0.0.1:%d/attend" % port, body,
                                             {"Content-Type": "application/json"})
                with urllib.request.urlopen(req, timeout=60) as r:
                    ans = json.loads(r.read())
                want_out, want_w = ref(q, k, v)
                out = torch.tensor(ans["output"], dtype=torch.float64)
                w = torch.tensor(ans["attention_weights"], dtype=torch.float64)
                expect(out.shape == want_out.shape and w.shape == want_w.shape,
                       "shapes %s %s, PyTorch %s %s" % (out.shape, w.shape, want_out.shape,
                                                        want_w.shape))
                d_out = (out - want_out).abs().max().item()
                d_w = (w - want_w).abs().max().item()
                tol = 1e-4 * max(1.0, want_out.abs().max().item())
                expect(d_out <= tol and d_w <= 1e-4, "max abs diff output %.3g (tolerance %.3g), "
                       "weights %.3g" % (d_out, tol, d_w))
                return "max abs diff %.2g output, %.2g weights" % (d_out, d_w)
    finally:
        rc = ea.stop_server(proc)

    @case("server stops cleanly on SIGTERM")
    def _():
        expect(rc == 0, "exit status %s" % rc)


def main():
    global TMP
    binary = os.environ.get("ATTN_SERVER_BIN") or os.path.join(ROOT, "bin", "attention-server")
    if not os.access(binary, os.X_OK):
        print("test_export: no server binary at %s (make builds it; ATTN_SERVER_BIN names another)"
              % binary)
        print("0 passed, 1 failed")
        return 1
    os.environ["ATTN_SERVER_BIN"] = binary  # the exporter's own check uses the same one
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="test-export-") as TMP:
        all_cases()
        served_cases(binary)
    failed = sum(1 for _, ok, _ in results if not ok)
    print("took %.1fs" % (time.time() - t0))
    print("%d passed, %d failed" % (len(results) - failed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
