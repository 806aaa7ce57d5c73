#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Per-step cost of ampscope_capture.Capture: the same training step of a small GPT-2-like
model (plain torch, no downloads) with and without capture, in alternating blocks so that
drift (thermal, other processes) hits both alike; the median step time of each, and the
difference in percent, and the time spent inside capture's own calls. Three settings: FP16
autocast with a GradScaler (the check reads GradScaler's found-inf), BF16 without one given the
job's clip_grad_norm_ norm, and BF16 without a norm (the foreach norm screen of every gradient).

    .venv/bin/python bench/capture_bench.py [--layers 4 --embd 256 --seq 128 --batch 8 --steps 20 --device cpu]

No incident happens: this is the cost paid at every step of a healthy job."""
import argparse
import os
import statistics
import sys
import tempfile
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from ampscope_capture import Capture  # noqa: E402


class Block(torch.nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.ln1, self.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
        self.attn = torch.nn.Linear(d, 3 * d)
        self.proj = torch.nn.Linear(d, d)
        self.fc, self.out = torch.nn.Linear(d, 4 * d), torch.nn.Linear(4 * d, d)
        self.heads = heads

    def forward(self, x):
        n, t, d = x.shape
        q, k, v = self.attn(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(n, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(n, t, d)
        x = x + self.proj(a)
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class GPT(torch.nn.Module):
    def __init__(self, vocab, seq, d, layers, heads):
        super().__init__()
        self.wte, self.wpe = torch.nn.Embedding(vocab, d), torch.nn.Embedding(seq, d)
        self.blocks = torch.nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln_f = torch.nn.LayerNorm(d)
        self.lm_head = torch.nn.Linear(d, vocab, bias=False)
        self.lm_head.weight = self.wte.weight  # tied, as GPT-2's

    def forward(self, ids):
        x = self.wte(ids) + self.wpe(torch.arange(ids.shape[1], device=ids.device))
        for b in self.blocks:
            x = b(x)
        return self.lm_head(self.ln_f(x))


def make(args, dtype):
    torch.manual_seed(0)
    net = GPT(args.vocab, args.seq, args.embd, args.layers, args.heads).to(args.device)
    opt = torch.optim.AdamW(net.parameters(), lr=1e-4)
    scaler = torch.amp.GradScaler(args.device, init_scale=2.0 ** 10) if dtype == torch.float16 else None
    return net, opt, scaler


def step(net, opt, scaler, ids, dtype, device, cap, pass_norm=True):
    """One training step; returns the seconds spent inside capture's own calls."""
    inside = 0.0
    if cap:
        t0 = time.perf_counter()
        cap.begin(ids, labels=ids)
        inside += time.perf_counter() - t0
    opt.zero_grad(set_to_none=True)
    with torch.autocast(device, dtype=dtype):
        logits = net(ids)
    loss = F.cross_entropy(logits[:, :-1].flatten(0, 1).float(), ids[:, 1:].flatten())
    if scaler:
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
    else:
        loss.backward()
    norm = torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
    if cap:
        t0 = time.perf_counter()
        cap.check(loss, grad_norm=norm if pass_norm else None)
        inside += time.perf_counter() - t0
    if scaler:
        scaler.step(opt)
        scaler.update()
    else:
        opt.step()
    if device == "cuda":
        torch.cuda.synchronize()
    return inside


def measure(args, dtype, pass_norm):
    """Median seconds per step without and with capture (alternating blocks of 5 steps), and
    the median seconds spent inside capture's calls (begin + check) per step: the cost itself,
    which the step-time difference shows only within the machine's noise."""
    net, opt, scaler = make(args, dtype)
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, args.vocab, (args.batch, args.seq), generator=g).to(args.device)
    with tempfile.TemporaryDirectory() as out:
        cap = Capture(net, opt, scaler, out=out, loss="lm", dtype=dtype, clip_grad_norm=1.0)
        for _ in range(3):  # warm-up, both paths
            step(net, opt, scaler, ids, dtype, args.device, None)
            step(net, opt, scaler, ids, dtype, args.device, cap, pass_norm)
        times, inside = {False: [], True: []}, []
        for block in range(2 * max(1, args.steps // 5)):
            with_cap = bool(block % 2)
            for _ in range(5):
                t0 = time.perf_counter()
                spent = step(net, opt, scaler, ids, dtype, args.device, cap if with_cap else None, pass_norm)
                times[with_cap].append(time.perf_counter() - t0)
                if with_cap:
                    inside.append(spent)
        assert not cap.bundles, "a healthy job must not write a bundle"
    return statistics.median(times[False]), statistics.median(times[True]), statistics.median(inside)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--embd", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--vocab", type=int, default=8192)
    ap.add_argument("--steps", type=int, default=20, help="steps measured per side")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--precision", default="bf16,bf16-screen,fp16",
                    help="comma-separated: bf16 (check given clip_grad_norm_'s norm), bf16-screen (no norm: the foreach "
                         "screen), fp16 (GradScaler's found_inf; CPU FP16 matmuls are slow)")
    args = ap.parse_args()
    n = sum(p.numel() for p in make(args, torch.bfloat16)[0].parameters())
    print(f"GPT-2-like: {args.layers} layers, d={args.embd}, seq {args.seq}, batch {args.batch}, vocab {args.vocab}: "
          f"{n / 1e6:.1f} M parameters, {args.device}, torch {torch.__version__}, {torch.get_num_threads()} threads")
    settings = {"fp16": ("fp16 + GradScaler", torch.float16, True), "bf16": ("bf16, norm given", torch.bfloat16, True),
                "bf16-screen": ("bf16, foreach screen", torch.bfloat16, False)}
    for key in args.precision.split(","):
        name, dtype, pass_norm = settings[key]
        base, cap, inside = measure(args, dtype, pass_norm)
        print(f"{name:20s}: {base * 1e3:9.2f} ms/step without capture, {cap * 1e3:9.2f} ms/step with "
              f"({(cap - base) / base * 100:+.2f} %); inside capture's calls {inside * 1e3:.3f} ms/step "
              f"= {inside / base * 100:.3f} % of a step")


if __name__ == "__main__":
    main()
