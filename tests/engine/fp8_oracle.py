# SPDX-License-Identifier: MIT
"""Oracle of the engine's FP8 and block-scaled quantizers (tests/engine/fp8_test.cpp): torchao 0.18
on the tensors the test wrote. argv[1]: the inputs (torch::pickle_save of a list of tensors),
argv[2]: the cases (JSON: per tensor scheme, element, axis, given scale), argv[3]: the delayed
scaling runs (JSON). Prints JSON: per case the dequantized values as int32 bits, the scales torchao
chose and the counts, computed from torchao's own outputs; per delayed run the scales of the
reference below. Nothing here is stored: the test computes it each time."""
import json
import math
import sys

import torch
import torchao
from torchao.float8.config import ScalingGranularity
from torchao.float8.float8_training_tensor import LinearMMConfig, hp_tensor_and_scale_to_float8
from torchao.float8.float8_scaling_utils import hp_tensor_to_float8_dynamic
from torchao.float8.float8_utils import compute_error
from torchao.prototype.mx_formats.kernels import f4_unpacked_to_f32, unpack_uint4
from torchao.prototype.mx_formats.config import ScaleCalculationMode
from torchao.prototype.mx_formats.mx_tensor import MXTensor
from torchao.prototype.mx_formats.nvfp4_tensor import NVFP4Tensor, per_tensor_amax_to_scale

# the engine is proven against torchao 0.18.0's rules (tools/bootstrap.sh installs it): another
# version's oracle would prove something else
if torchao.__version__ != "0.18.0":
    sys.exit(f"fp8_oracle.py: torchao {torchao.__version__} is installed; the oracle is torchao 0.18.0 "
             "(tools/bootstrap.sh installs it)")

DTYPES = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}


def scaled_fp8(x, case):
    """torchao.float8: tensorwise (current or given scale) or axiswise with power-of-two scales
    (the rowwise recipe); the operand as the emulated GEMM sees it, _data.float() / _scale."""
    dt = DTYPES[case["element"]]
    cfg = LinearMMConfig()
    if case["scheme"] == "rowwise":
        t = hp_tensor_to_float8_dynamic(x, dt, cfg, scaling_granularity=ScalingGranularity.AXISWISE,
                                        axiswise_dim=case["axis"], round_scales_to_power_of_2=True)
    elif case.get("given_scale", 0) > 0:
        t = hp_tensor_and_scale_to_float8(x, torch.tensor(case["given_scale"], dtype=torch.float32), dt, cfg)
    else:
        t = hp_tensor_to_float8_dynamic(x, dt, cfg)
    q = t._data.float() / t._scale
    y = x.to(torch.float32) * t._scale  # the scaled value before torchao's clamp
    # beyond the format's range after rounding: torch 2.11's cast does not saturate, so the
    # unclamped cast says it (E4M3FN: NaN, E5M2: inf), independently of the engine's bounds
    over = y.to(dt).float()
    saturated = (torch.isfinite(x) & ~torch.isnan(y) & ~torch.isfinite(over)).sum().item()
    return q, t._data.float(), t._scale.flatten(), saturated


def moved_padded(x, axis, block):
    xm = x.movedim(axis, -1).contiguous()
    k = xm.shape[-1]
    pad = (block - k % block) % block
    if pad:
        xm = torch.nn.functional.pad(xm, (0, pad))
    return xm, k


def back(t, k, axis):
    return t[..., :k].movedim(-1, axis)


def mx(x, case):
    """MXTensor.to_mx (FLOOR, or RCEIL with case["mx_scaling"] "rceil") and dequantize(float32);
    the axis moved last, padded with zeros."""
    dt = DTYPES[case["element"]]
    xm, k = moved_padded(x, case["axis"], 32)
    rceil = case.get("mx_scaling") == "rceil"
    m = MXTensor.to_mx(xm, dt, 32, ScaleCalculationMode.RCEIL if rceil else ScaleCalculationMode.FLOOR)
    q = m.dequantize(torch.float32)
    codes = m.scale.view(torch.uint8).to(torch.int32)
    xb = xm.float().reshape(*xm.shape[:-1], -1, 32)
    if rceil:  # what _to_mx_rceil multiplied by
        rcp = torch.where(codes == 255, float("nan"), torch.where(
            codes == 254, 2.0 ** -127, torch.where(codes == 0, 1.0, torch.exp2(127.0 - codes.float()))))
        scale_fp32 = rcp.reciprocal()
        y = (xb * rcp.unsqueeze(-1)).reshape(xm.shape)
    else:
        scale_fp32 = torch.clamp((codes << 23).view(torch.float32), min=2.0 ** -126)  # what to_mx divided by
        y = (xb / scale_fp32.unsqueeze(-1)).reshape(xm.shape)
    over = y.to(dt).float()
    xs = back(xm, k, case["axis"])
    over = back(over, k, case["axis"])
    saturated = (torch.isfinite(xs) & ~torch.isnan(back(y, k, case["axis"])) & ~torch.isfinite(over)).sum().item()
    return back(q, k, case["axis"]), back(m.qdata.float(), k, case["axis"]), scale_fp32.reciprocal().flatten(), saturated


def nvfp4(x, case):
    """NVFP4Tensor.to_nvfp4 with the per-tensor scale of the tensor's amax, dequantize(float32).
    An all-zero tensor takes per-tensor scale 1 (torchao's amax / 2688 would be 0 and give NaN):
    the engine's documented departure, checked against torchao at that scale."""
    xm, k = moved_padded(x.float(), case["axis"], 16)
    x2 = xm.reshape(-1, xm.shape[-1])
    amax = torch.max(torch.abs(x2))
    pts = per_tensor_amax_to_scale(amax) if amax != 0 else torch.tensor(1.0)
    n = NVFP4Tensor.to_nvfp4(x2, per_tensor_scale=pts)
    q = n.dequantize(torch.float32).reshape(xm.shape)
    elems = f4_unpacked_to_f32(unpack_uint4(n.qdata.contiguous().view(torch.uint8))).reshape(xm.shape)
    sbs32 = n.scale.float()
    mult = ((1.0 / pts) / sbs32)
    y = (x2.reshape(x2.shape[0], -1, 16) * mult.unsqueeze(-1)).reshape(xm.shape)
    xs = back(xm, k, case["axis"])
    # saturated: scaled past E2M1's range and not flushed to zero (a per-tensor scale of 0 scales
    # every value to +-inf and dequantizes it to 0: underflow, counted once)
    qb = back(q, k, case["axis"])
    saturated = (torch.isfinite(xs) & (back(y, k, case["axis"]).abs() >= 7.0) & (qb != 0)).sum().item()
    return qb, back(elems, k, case["axis"]), mult.flatten(), saturated, pts.item()


def num(v):
    """A float for JSON: NaN and infinities as text (JSON has no literal for them)."""
    return v if math.isfinite(v) else ("nan" if math.isnan(v) else ("inf" if v > 0 else "-inf"))


def stats(x, q, elems, scales, saturated, min_normal):
    x = x.float()
    fin = torch.isfinite(x)
    nz = fin & (x != 0)
    ae = elems.abs()
    sf = scales[torch.isfinite(scales)].double()
    out = {
        "numel": x.numel(),
        "nonfinite": int((~fin).sum()),
        "nonzero": int(nz.sum()),
        "underflow": int((nz & (q == 0)).sum()),
        "subnormal": int(((ae > 0) & (ae < min_normal) & torch.isfinite(q)).sum()),
        "saturated": int(saturated),
        "nonfinite_out": int((fin & ~torch.isfinite(q)).sum()),
        "amax": num(torch.max(torch.abs(x)).item()),
        "scales": scales.numel(),
        "scale_min": num(sf.min().item()) if sf.numel() else None,
        "scale_max": num(sf.max().item()) if sf.numel() else None,
    }
    if bool(fin.all()) and bool(torch.isfinite(q).all()) and bool((x != q).any()):
        out["sqnr_db"] = num(compute_error(x, q).item())
    return out


MIN_NORMAL = {"e4m3": 2.0 ** -6, "e5m2": 2.0 ** -14, "e2m1": 1.0}


def run_case(x, case):
    tensor_scale = 1.0
    if case["scheme"] in ("tensorwise", "rowwise"):
        q, elems, scales, saturated = scaled_fp8(x, case)
    elif case["scheme"] == "mx":
        q, elems, scales, saturated = mx(x, case)
    else:
        q, elems, scales, saturated, tensor_scale = nvfp4(x, case)
    element = "e2m1" if case["scheme"] == "nvfp4" else case["element"]
    out = stats(x, q, elems, scales, saturated, MIN_NORMAL[element])
    out["tensor_scale"] = num(tensor_scale)
    out["bits"] = q.contiguous().view(torch.int32).flatten().tolist()
    out["shape"] = list(q.shape)
    return out


def delayed(run):
    """Transformer Engine's DelayedScaling, written from its documented rule (fp8.py:
    _default_get_amax_and_update_history, _update_amax_history, _default_sf_compute, and the
    fused kernel's inf guard): the scale each step uses, from the amaxes of earlier steps."""
    fmax = {"e4m3": 448.0, "e5m2": 57344.0}[run["element"]]
    hist = torch.zeros(run["history_len"], dtype=torch.float32)
    scale = torch.tensor(1.0, dtype=torch.float32)
    scales = []
    for a in run["amaxes"]:
        scales.append(scale.item())
        hist[0] = torch.maximum(hist[0], torch.tensor(float(a), dtype=torch.float32))
        amax = torch.max(hist, dim=0).values if run["algo"] == "max" else hist[0].clone()
        if hist.shape[0] > 1:
            hist = torch.roll(hist, -1, 0)
        hist[0] = 0.0
        sf = (torch.tensor(fmax, dtype=torch.float32) / amax) / (2 ** run["margin"])
        sf = torch.where(amax > 0.0, sf, scale)
        sf = torch.where(torch.isfinite(amax), sf, scale)
        sf = torch.where(torch.isinf(sf), torch.tensor(torch.finfo(torch.float32).max), sf)
        scale = sf
    return {"scales": [num(v) for v in scales], "history": [num(v) for v in hist.tolist()]}


def main():
    tensors = torch.load(sys.argv[1], weights_only=False)
    with open(sys.argv[2]) as f:
        cases = json.load(f)
    with open(sys.argv[3]) as f:
        runs = json.load(f)
    out = {"cases": [run_case(x, c) for x, c in zip(tensors, cases)], "delayed": [delayed(r) for r in runs]}
    print(json.dumps(out, allow_nan=False))


if __name__ == "__main__":
    main()
