#!/usr/bin/python3
"""Write the weight sets the medium and large load scripts need.

    /usr/bin/python3 tests/load/make-weights.py [OUTDIR]      (default build/load)

medium.safetensors: E=256, 8 heads; large.safetensors: E=768, 12 heads.
Each is the state_dict of a freshly initialised torch.nn.MultiheadAttention
(fixed seed, so the files are the same on every run), written as safetensors
by hand: an 8-byte little-endian header length, the JSON header (tensor name ->
dtype, shape, byte offsets; __metadata__ with num_heads), then the raw
little-endian float32 data, tensors back to back in header order.

Needs Debian's python3-torch and python3-numpy (/usr/bin/python3), not a
pyenv/virtualenv python without them.
"""
import json
import os
import struct
import sys

import numpy as np
import torch

CASES = [  # (file stem, embed_dim, num_heads, seed)
    ("medium", 256, 8, 256),
    ("large", 768, 12, 768),
]


def write_safetensors(path, tensors, metadata):
    """tensors: list of (name, float32 numpy array); metadata: dict of str."""
    header = {"__metadata__": metadata}
    blobs, offset = [], 0
    for name, arr in tensors:
        data = np.ascontiguousarray(arr, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(arr.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the format allows padding with spaces; keeps data 8-aligned
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for data in blobs:
            f.write(data)
    os.replace(tmp, path)


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else "build/load"
    os.makedirs(outdir, exist_ok=True)
    for stem, embed, heads, seed in CASES:
        torch.manual_seed(seed)
        mha = torch.nn.MultiheadAttention(embed, heads, bias=True)
        # torch initialises the projection biases to zero; make them nonzero
        # so the bias paths are exercised under load too.
        with torch.no_grad():
            mha.in_proj_bias.uniform_(-0.1, 0.1)
            mha.out_proj.bias.uniform_(-0.1, 0.1)
        tensors = [(k, v.detach().numpy()) for k, v in mha.state_dict().items()]
        path = os.path.join(outdir, stem + ".safetensors")
        write_safetensors(path, tensors, {"num_heads": str(heads)})
        print("%s: E=%d, %d heads, %d parameters" % (
            path, embed, heads, sum(a.size for _, a in tensors)))


if __name__ == "__main__":
    main()
