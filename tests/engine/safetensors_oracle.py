# SPDX-License-Identifier: MIT
"""Oracle for the safetensors reader: writes argv[1] with safetensors.torch.save_file (the
reference writer) holding every dtype the reader takes, odd shapes included, and prints each
tensor's dtype, shape and raw little-endian bytes (hex) plus the metadata, as JSON."""
import json
import sys

import torch
from safetensors.torch import save_file

g = torch.Generator().manual_seed(3)
base = torch.randn(3, 5, generator=g) * 100
base[0, 0], base[0, 1], base[0, 2] = float("nan"), float("inf"), -0.0
tensors = {
    "f64": base.double(), "f32": base, "f16": base.half(), "bf16": base.bfloat16(),
    "i64": torch.tensor([-(2 ** 62), 5, 7]), "i32": torch.randint(-2 ** 31, 2 ** 31 - 1, (2, 2), generator=g, dtype=torch.int32),
    "i16": torch.tensor([[-300, 301]], dtype=torch.int16), "i8": torch.tensor([-128, 127], dtype=torch.int8),
    "u8": torch.arange(256, dtype=torch.uint8).reshape(16, 16), "bool": torch.tensor([True, False, True]),
    "f8_e4m3": (base / 10).to(torch.float8_e4m3fn), "f8_e5m2": (base / 10).to(torch.float8_e5m2),
    "scalar": torch.tensor(2.5), "empty": torch.zeros(0, 4), "layer.0.weight": torch.randn(4, generator=g),
}
save_file(tensors, sys.argv[1], metadata={"format": "pt", "note": "ampscope oracle"})
print(json.dumps({"tensors": {k: {"dtype": str(v.dtype), "shape": list(v.shape),
                                  "hex": v.contiguous().view(torch.uint8).numpy().tobytes().hex() if v.dim() else
                                  v.reshape(1).view(torch.uint8).numpy().tobytes().hex()} for k, v in tensors.items()},
                  "metadata": {"format": "pt", "note": "ampscope oracle"}}))
