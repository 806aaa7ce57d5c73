# SPDX-License-Identifier: MIT
"""A DistributedDataParallel job for test_capture_ddp.py, run by torchrun on CPU with gloo:
rank 1's batch of step K holds a NaN; every rank writes done<rank>.json with its bundles once
its work is done (gloo may abort at interpreter exit after that)."""
import json
import os
import sys
import warnings

import torch
import torch.distributed as dist
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from ampscope_capture import Capture  # noqa: E402

K = 3


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 16)
        self.head = torch.nn.Linear(16, 3)

    def forward(self, x):
        return self.head(torch.relu(self.fc1(x)))


def main(out, done):
    warnings.simplefilter("ignore")
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    ddp = torch.nn.parallel.DistributedDataParallel(Net())
    opt = torch.optim.SGD(ddp.parameters(), lr=1e-2)
    cap = Capture(ddp, opt, out=out, loss="ce", dtype=torch.bfloat16)
    cap.watch_ddp(ddp)
    g = torch.Generator().manual_seed(10 + rank)
    for step in range(K + 2):
        x, y = torch.randn(8, 8, generator=g), torch.randint(0, 3, (8,), generator=g)
        if step == K and rank == 1:
            x[2, 5] = float("nan")
        cap.begin(x, labels=y)
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = F.cross_entropy(ddp(x), y)
        loss.backward()
        cap.check(loss)
        opt.step()
    with open(os.path.join(done, f"done{rank}.json"), "w") as f:
        json.dump({"rank": rank, "bundles": cap.bundles}, f)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
