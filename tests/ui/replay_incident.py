# SPDX-License-Identifier: MIT
"""Plants the incident tst_replay replays in the GUI (the one tests/cli/test_replay.py plants):
a Python training loop (eager module, torch.amp.GradScaler, Adam) whose batch of step K overflows
the head's weight gradient in FP16 once scaled. Writes into DIR the model (a torch.export .pt2
program), the state of step K-1 as a dict checkpoint (model/optimizer/scaler), as a plain
state_dict with the optimizer and scaler states apart and as a Trainer checkpoint-K/ folder, the
batch of step K, a damaged checkpoint, and oracle.json: what Python's hooks and GradScaler say
about step K in FP16 and in BF16.

usage: replay_incident.py DIR"""
import copy
import json
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cli"))
from test_replay import K, Net, amp_step, batches, save_formats  # noqa: E402
from test_train import python_backward_origin  # noqa: E402


def bf16_step(net, opt, scaler, x, y):
    """Step K as the job would run it with autocast to BF16 (the scaler as saved)."""
    opt.zero_grad()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = F.cross_entropy(net(x), y)
    scaler.scale(loss).backward()
    scaler.unscale_(opt)
    found = sum(v.item() for v in scaler._per_optimizer_states[id(opt)]["found_inf_per_device"].values()) > 0
    scaler.step(opt)
    scaler.update()
    return loss.item(), found, all(bool(torch.isfinite(p).all()) for p in net.parameters())


def main(d):
    torch.manual_seed(7)
    net = Net()
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 12, growth_interval=3)
    data = batches(7)
    x, y = data[K][0] * 400.0, data[K][1]
    for bx, by in data[:K]:
        amp_step(net, opt, scaler, bx, by)
    program = torch.export.export(copy.deepcopy(net), (x,))
    torch.export.save(program, os.path.join(d, "model.pt2"))
    save_formats(d, net, opt, scaler)
    torch.save({"inputs": x, "labels": y}, os.path.join(d, "batch.pt"))
    with open(os.path.join(d, "damaged.pt"), "wb") as f:
        f.write(b"PK\x03\x04 not a checkpoint")
    state = (copy.deepcopy(net.state_dict()), copy.deepcopy(opt.state_dict()), scaler.state_dict())

    def restored():
        n = copy.deepcopy(net)
        n.load_state_dict(state[0])
        o = torch.optim.Adam(n.parameters(), lr=1e-3)
        o.load_state_dict(copy.deepcopy(state[1]))
        s = torch.amp.GradScaler("cpu")
        s.load_state_dict(dict(state[2]))
        return n, o, s

    n, o, s = restored()
    loss, scale, skipped = amp_step(n, o, s, x, y)
    node, module, op = python_backward_origin(copy.deepcopy(net), x, y, scale=scale)
    n, o, s = restored()
    bf_loss, bf_found, bf_finite = bf16_step(n, o, s, x, y)
    oracle = {"fp16": {"loss": loss, "scale": scale, "skipped": skipped, "node": node, "module": module, "op": op},
              "bf16": {"loss": bf_loss, "found_inf": bf_found, "weights_finite": bf_finite}}
    with open(os.path.join(d, "oracle.json"), "w") as f:
        json.dump(oracle, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
