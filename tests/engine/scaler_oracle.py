# SPDX-License-Identifier: MIT
"""Oracle for GradScaler: drives torch.amp.GradScaler("cpu") with the gradients in argv[1]
(a list of per-step lists of tensors, unscaled) and prints, per step, the scale used, whether
the step was skipped, the growth tracker after update() and the parameters after the step."""
import json
import sys

import torch

steps = torch.load(sys.argv[1], weights_only=False)  # written by torch::pickle_save
init_scale, growth_factor, backoff, interval = map(float, sys.argv[2:6])
params = [torch.zeros_like(g) for g in steps[0]]
for p in params:
    p.requires_grad_(True)
opt = torch.optim.SGD(params, lr=0.1)
scaler = torch.amp.GradScaler("cpu", init_scale=init_scale, growth_factor=growth_factor, backoff_factor=backoff,
                              growth_interval=int(interval))
out = []
for grads in steps:
    scale = scaler.get_scale()
    for p, g in zip(params, grads):
        p.grad = scaler.scale(g)  # the scaled gradient a backward of scaler.scale(loss) gives
    scaler.unscale_(opt)
    skipped = sum(v.item() for v in scaler._per_optimizer_states[id(opt)]["found_inf_per_device"].values()) > 0
    scaler.step(opt)
    scaler.update()
    out.append({"scale": scale, "skipped": bool(skipped), "tracker": int(scaler._growth_tracker.item()),
                "params": [p.detach().flatten().tolist() for p in params]})
print(json.dumps({"steps": out, "state": {k: (float(v) if not isinstance(v, int) else v) for k, v in scaler.state_dict().items()}}))
