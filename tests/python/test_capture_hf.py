# SPDX-License-Identifier: MIT
"""Hugging Face transformers 5.x: a Trainer (bf16 on CPU, no scaler; its default optimizer,
fused AdamW) trains a tiny token model that computes its own loss (labels and
num_items_in_batch among its keyword inputs, as the Trainer passes them) into a planted BF16
incident: a rare token whose embedding is a large common offset makes a hand-written
variance E[h²] - E[h]² negative in BF16, and rsqrt NaN, at global step K. The callback's bundle
holds the state from before step K (the test's own snapshot, bitwise), the keyword batch the
model received, the fused optimizer's flags; today's replay given the bundle's files names the
module and op Python's hooks name."""
import copy
import os
import warnings

import pytest
import torch
import torch.nn.functional as F

transformers = pytest.importorskip("transformers")

from ampscope_capture.hf import CaptureCallback  # noqa: E402
from helpers import as_float, check_format, forward_origin, group_names, replay_bundle, replay_files, same_replay, same_tensors  # noqa: E402
from test_capture_plain import VarNorm  # noqa: E402

K, V, T, B = 3, 16, 6, 4


class TokenModel(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(V, 8)
        self.proj = torch.nn.Linear(8, 32)
        self.norm = VarNorm()
        self.head = torch.nn.Linear(32, V)
        with torch.no_grad():
            self.proj.weight[:, 0] = 1.0  # embedding dimension 0 is a common offset of every feature
            self.emb.weight[V - 1] = 0.0
            self.emb.weight[V - 1, 0] = 300.0  # the rare token

    def forward(self, input_ids, labels=None):
        return self.scored(input_ids, labels, None)

    def scored(self, input_ids, labels, n):
        logits = self.head(self.norm(self.proj(self.emb(input_ids))))
        if labels is None:
            return {"logits": logits}
        loss = F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten(), ignore_index=-100, reduction="sum")
        return {"loss": loss / n if n is not None else loss / labels.ne(-100).sum(), "logits": logits}


class TokenModelKw(TokenModel):
    """Takes loss kwargs: the Trainer passes num_items_in_batch (a 0-d tensor) to forward."""

    def forward(self, input_ids, labels=None, **kwargs):
        return self.scored(input_ids, labels, kwargs.get("num_items_in_batch"))


class Rows(torch.utils.data.Dataset):
    def __init__(self):
        g = torch.Generator().manual_seed(1)
        self.rows = []
        for i in range((K + 2) * B):
            ids = torch.randint(0, V - 1, (T,), generator=g)
            if i // B == K and i % B == 1:
                ids[2] = V - 1  # the rare token, in the batch of step K
            labels = ids.clone()
            labels[0] = -100
            self.rows.append({"input_ids": ids, "labels": labels})

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        return self.rows[i]


class Snapshot(transformers.TrainerCallback):
    def __init__(self):
        self.before = {}

    def on_step_begin(self, args, state, control, model=None, optimizer=None, **kwargs):
        self.before[state.global_step] = copy.deepcopy((model.state_dict(), optimizer.optimizer.state_dict(), model))


@pytest.fixture(scope="module", params=[TokenModel, TokenModelKw], ids=["plain-forward", "loss-kwargs"])
def job(request, tmp_path_factory):
    out = str(tmp_path_factory.mktemp("hf") / "incidents")
    torch.manual_seed(1)
    model = request.param()
    cap, snap = CaptureCallback(out=out), Snapshot()
    args = transformers.TrainingArguments(output_dir=str(tmp_path_factory.mktemp("hf-out")), bf16=True, use_cpu=True, max_steps=K + 2,
                                          per_device_train_batch_size=B, learning_rate=1e-3, report_to=[], save_strategy="no",
                                          logging_steps=100, train_sampling_strategy="sequential", disable_tqdm=True,
                                          dataloader_num_workers=0, max_grad_norm=1.0)
    trainer = transformers.Trainer(model=model, args=args, train_dataset=Rows(), callbacks=[cap, snap])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.train()
    return cap, snap


def test_bundle_of_an_hf_bf16_incident(job):
    cap, snap = job
    assert len(cap.bundles) == 1
    inc, ckpt, batch = check_format(cap.bundles[0], what="loss", step=K, framework="transformers", dtype="bfloat16", loss="model",
                                    scaler=False, kind="adamw")
    assert inc["framework"]["version"] == transformers.__version__
    assert inc["optimizer"]["fused"] is True, "the Trainer's default on torch >= 2.8 is fused AdamW"
    assert inc["clip_grad_norm"] == 1.0
    # the module's own forward, not accelerate's autocast wrapper: no autocast inside the program
    ep = torch.export.load(os.path.join(cap.bundles[0], "model.pt2"))
    assert "wrap_with_autocast" not in ep.graph_module.code
    sd, osd, _ = snap.before[K]
    assert same_tensors(ckpt["model"], sd)
    assert same_tensors(ckpt["optimizer"]["state"], osd["state"])
    names = [n for g in group_names(ckpt) for n in g]
    assert sorted(names) == sorted(n for n, _ in snap.before[K][2].named_parameters())
    rows = Rows().rows[K * B:(K + 1) * B]
    ids, labels = torch.stack([r["input_ids"] for r in rows]), torch.stack([r["labels"] for r in rows])
    assert torch.equal(batch["inputs"][0], ids) and torch.equal(batch["inputs"][1], labels)
    if isinstance(snap.before[K][2], TokenModelKw):
        assert len(batch["inputs"]) == 3, "input_ids, labels, num_items_in_batch"
        assert batch["inputs"][2].dim() == 0 and int(batch["inputs"][2]) == int(labels.ne(-100).sum())
    else:
        assert len(batch["inputs"]) == 2, "input_ids, labels"


def test_todays_replay_of_the_hf_bundle(job):
    cap, snap = job
    net = copy.deepcopy(snap.before[K][2])
    batch = torch.load(os.path.join(cap.bundles[0], "batch.pt"), weights_only=True)
    ids, labels, n = (batch["inputs"] + [None])[:3]
    module, first = forward_origin(net, {"input_ids": ids, "labels": labels, **({"num_items_in_batch": n} if n is not None else {})},
                                   torch.bfloat16)
    assert module == "norm" and first == "rsqrt"
    rc, got = replay_files(cap.bundles[0])
    assert rc == 1, got
    f = got["first_nonfinite"]
    assert (f["stage"], f["module"], f["op"], f["side"]) == ("forward", module, "aten::" + first, "amp")
    assert as_float(got["steps"][0]["loss_ref"]) == net.scored(ids, labels, n)["loss"].item()


def test_replay_bundle_alone(job):
    """`ampscope-cli replay BUNDLE`: loss model, bf16 without a scaler, fused AdamW's state and
    clipping 1.0 from the bundle (the 0-d num_items_in_batch input as the program takes it)."""
    cap = job[0]
    rc, alone = replay_bundle(cap.bundles[0])
    assert rc == 1, alone
    f = alone["first_nonfinite"]
    assert (f["stage"], f["module"], f["op"]) == ("forward", "norm", "aten::rsqrt")


def test_replay_bundle_reference_step_is_the_trainers_optimizer(job):
    """The FP32 reference step of `replay BUNDLE` updates the parameters exactly as the Trainer's
    own optimizer (fused AdamW, its groups by the bundle's param_names, clipping 1.0) does from
    the bundle's state, in Python, bitwise."""
    import hashlib

    cap, snap = job
    b = cap.bundles[0]
    ckpt = torch.load(os.path.join(b, "checkpoint.pt"), weights_only=True)
    batch = torch.load(os.path.join(b, "batch.pt"), weights_only=True)
    net = copy.deepcopy(snap.before[K][2])
    net.load_state_dict(ckpt["model"])
    params = dict(net.named_parameters())
    groups = [{"params": [params[n] for n in g["param_names"]]} for g in ckpt["optimizer"]["param_groups"]]
    opt = torch.optim.AdamW(groups, lr=1.0, fused=True)
    opt.load_state_dict(ckpt["optimizer"])
    ids, labels, n = (batch["inputs"] + [None])[:3]
    net.scored(ids, labels, n)["loss"].backward()
    torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
    opt.step()
    want = {k: hashlib.sha256(p.detach().contiguous().numpy().tobytes()).hexdigest() for k, p in net.named_parameters()}
    rc, got = replay_bundle(b)
    assert rc == 1, got
    assert {p["name"]: p["sha256_ref"] for p in got["steps"][0]["params"]} == want
