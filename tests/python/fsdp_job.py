# SPDX-License-Identifier: MIT
"""An FSDP2 (fully_shard) job for test_capture_ddp.py, run by torchrun on CPU with gloo: rank
1's batch of step K holds a NaN in the feature that only fc1.weight's column 5 sees, so after
the reduce-scatter only some shards are non-finite. Every rank writes done<rank>.json with its
bundles and, for the oracle, the full weights and AdamW moments it gathered at step K before
the optimizer stepped (gloo may abort at interpreter exit after that)."""
import json
import os
import sys
import warnings

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict, get_optimizer_state_dict
from torch.distributed.fsdp import fully_shard
from torch.utils._pytree import tree_map

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from ampscope_capture import Capture  # noqa: E402
from ddp_job import Net  # noqa: E402

K = 3


def main(out, done, mode):
    warnings.simplefilter("ignore")
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = Net()
    for layer in (model.fc1, model.head):
        fully_shard(layer)
    fully_shard(model)
    decay = [p for n, p in model.named_parameters() if n.endswith("weight")]
    rest = [p for n, p in model.named_parameters() if not n.endswith("weight")]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}], lr=1e-2)
    cap = Capture(model, opt, out=out, loss="ce", dtype=torch.bfloat16)
    cap.watch_fsdp(model, make_plain=Net if mode == "plain" else None)
    g = torch.Generator().manual_seed(10 + rank)
    oracle = {}
    for step in range(K + 2):
        x, y = torch.randn(8, 8, generator=g), torch.randint(0, 3, (8,), generator=g)
        if step == K and rank == 1:
            x[2, 5] = float("nan")
        if step == K:  # the oracle: the state before the step, gathered as a checkpointing job would
            opts = StateDictOptions(full_state_dict=True)
            oracle = tree_map(lambda v: v.clone() if isinstance(v, torch.Tensor) else v,  # 'step' is the live tensor
                              {"model": get_model_state_dict(model, options=opts), "optimizer": get_optimizer_state_dict(model, opt, options=opts)})
        cap.begin(x, labels=y)
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        cap.check(loss)
        opt.step()
    torch.save(oracle, os.path.join(done, f"oracle{rank}.pt"))
    with open(os.path.join(done, f"done{rank}.json"), "w") as f:
        json.dump({"rank": rank, "bundles": cap.bundles}, f)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])
