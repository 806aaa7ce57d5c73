# SPDX-License-Identifier: MIT
"""Writes a real incident bundle with the capture package (python/ampscope_capture) into
argv[1] (a planted NaN loss at step 2 of a plain BF16 loop) and prints its path, for
bundle_test.cpp's RealBundleFromThePackage."""
import os
import sys
import warnings

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from ampscope_capture import Capture  # noqa: E402

warnings.simplefilter("ignore")
torch.manual_seed(0)
net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
opt = torch.optim.AdamW(net.parameters(), lr=1e-3)
cap = Capture(net, opt, out=sys.argv[1], loss="ce", dtype=torch.bfloat16, keep_fp32=["2"], clip_grad_norm=0.5)
for step in range(4):
    x, y = torch.randn(6, 4), torch.randint(0, 3, (6,))
    cap.begin(x, labels=y)
    opt.zero_grad()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = F.cross_entropy(net(x), y) * (float("nan") if step == 2 else 1.0)
    loss.backward()
    norm = torch.nn.utils.clip_grad_norm_(net.parameters(), 0.5)
    cap.check(loss, grad_norm=norm)
    opt.step()
print(cap.bundles[0])
