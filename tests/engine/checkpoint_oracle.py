# SPDX-License-Identifier: MIT
"""Oracle for the checkpoint loaders: a small model trained a few steps by torch.optim, its
state written to argv[1] in every format users' training code writes (plain state_dict, a
dict with model/optimizer/scaler, a Lightning-like .ckpt holding Python objects LibTorch
cannot build, Hugging Face Trainer folders whole and sharded), plus one more step of SGD,
Adam and AdamW (amsgrad) from those states with the gradients in grads.safetensors. Prints
the weights and the stepped parameters as hex bytes, as JSON."""
import json
import os
import sys

import torch
from safetensors.torch import save_file

out = sys.argv[1]
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4), torch.nn.Linear(4, 2))
params = list(model.parameters())
names = [n for n, _ in model.named_parameters()]


def hexes(tensors):
    return {k: v.detach().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes().hex() for k, v in tensors.items()}


def train(opt, steps=3):
    g = torch.Generator().manual_seed(5)
    for _ in range(steps):
        opt.zero_grad()
        model(torch.randn(6, 3, generator=g)).pow(2).sum().backward()
        opt.step()


class Cfg:  # a user's config object: LibTorch cannot build it
    def __init__(self):
        self.lr, self.name = 0.1, "run"


class AttrDict(dict):
    pass


opts = {"adam": torch.optim.Adam(params, lr=0.01, weight_decay=0.1),
        "adamw": torch.optim.AdamW(params, lr=0.01, weight_decay=0.1, amsgrad=True),
        "sgd": torch.optim.SGD(params, lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01)}
for o in opts.values():
    train(o)
scaler = {"scale": 1024.0, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 7, "_growth_tracker": 3}
sd = model.state_dict()
torch.save(sd, os.path.join(out, "plain.pt"))
torch.save({"model": sd, "optimizer": opts["adam"].state_dict(), "scaler": scaler, "epoch": 3}, os.path.join(out, "dict.pt"))
for k in ("adamw", "sgd"):
    torch.save(opts[k].state_dict(), os.path.join(out, k + ".pt"))
torch.save({"epoch": 0, "global_step": 3, "pytorch-lightning_version": "2.4.0",
            "state_dict": {"model." + k: v for k, v in sd.items()}, "optimizer_states": [opts["adam"].state_dict()],
            "lr_schedulers": [], "MixedPrecision": scaler, "hyper_parameters": {"cfg": Cfg(), "lr": 0.1},
            "callbacks": {"ModelCheckpoint": AttrDict(best=1.0)}}, os.path.join(out, "lightning.ckpt"))
hf = os.path.join(out, "checkpoint-3")
os.makedirs(hf, exist_ok=True)
save_file({k: v.contiguous() for k, v in sd.items()}, os.path.join(hf, "model.safetensors"))
torch.save(opts["adam"].state_dict(), os.path.join(hf, "optimizer.pt"))
torch.save({}, os.path.join(hf, "scheduler.pt"))
sh = os.path.join(out, "checkpoint-sharded")
os.makedirs(sh, exist_ok=True)
keys = list(sd)
shards = {"model-00001-of-00002.safetensors": keys[:3], "model-00002-of-00002.safetensors": keys[3:]}
for f, ks in shards.items():
    save_file({k: sd[k].contiguous() for k in ks}, os.path.join(sh, f))
with open(os.path.join(sh, "model.safetensors.index.json"), "w") as f:
    json.dump({"metadata": {"total_size": 0}, "weight_map": {k: f for f, ks in shards.items() for k in ks}}, f)
torch.save(scaler, os.path.join(sh, "scaler.pt"))

sd = {k: v.clone() for k, v in sd.items()}  # the files hold these; stepping below changes the model
g = torch.Generator().manual_seed(9)
grads = {n: torch.randn(p.shape, generator=g) for n, p in zip(names, params)}
save_file(grads, os.path.join(out, "grads.safetensors"))
after = {}
for k, o in opts.items():
    model.load_state_dict(sd)
    for n, p in zip(names, params):
        p.grad = grads[n].clone()
    o.step()
    after[k] = hexes(dict(zip(names, params)))
print(json.dumps({"weights": hexes(sd), "after": after, "scaler": scaler, "names": names}))
