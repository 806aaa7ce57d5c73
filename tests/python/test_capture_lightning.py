# SPDX-License-Identifier: MIT
"""PyTorch Lightning 2.x: a Trainer with FP16 mixed precision on CPU (Lightning turns
"16-mixed" into bf16 on CPU, so the test passes its MixedPrecision plugin with a CPU
GradScaler) trains into a planted overflow of `head`'s gradient at global step K. The
callback's bundle holds the state from before step K (the test's own snapshot, bitwise), the
batch, the scaler; today's replay given the bundle's files names the backward origin Python's
hooks name."""
import copy
import os
import warnings

import pytest
import torch
import torch.nn.functional as F

pl = pytest.importorskip("pytorch_lightning")
from pytorch_lightning.plugins.precision import MixedPrecision  # noqa: E402

from ampscope_capture.lightning import CaptureCallback  # noqa: E402
from helpers import as_float, check_format, group_names, replay_bundle, replay_files, same_replay, same_tensors  # noqa: E402

K = 4


class Module(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 64)
        self.act = torch.nn.ReLU()
        self.head = torch.nn.Linear(64, 3)
        self.before = {}

    def forward(self, x):
        return self.head(self.act(self.fc1(x)))

    def training_step(self, batch, batch_idx):
        x, y = batch
        return F.cross_entropy(self(x), y)

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=1e-3, weight_decay=0.01)


class Snapshot(pl.Callback):
    """The test's own copy of the state at each step's start (test-only cost)."""

    def __init__(self):
        self.before = {}

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        opt = trainer.optimizers[0]
        scaler = trainer.precision_plugin.scaler
        self.before[trainer.global_step] = copy.deepcopy((pl_module.state_dict(), opt.state_dict(), scaler.state_dict()))


def batches():
    g = torch.Generator().manual_seed(5)
    out = []
    for s in range(K + 3):
        x, y = torch.randn(32, 8, generator=g), torch.randint(0, 3, (32,), generator=g)
        out.append((x * 400.0 if s == K else x, y))
    return out


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("lightning") / "incidents")
    torch.manual_seed(5)
    model = Module()
    cap, snap = CaptureCallback(out=out, loss="ce"), Snapshot()
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 12, growth_interval=3)
    trainer = pl.Trainer(accelerator="cpu", devices=1, max_steps=K + 3, plugins=[MixedPrecision("16-mixed", "cpu", scaler)],
                         callbacks=[cap, snap], logger=False, enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, gradient_clip_val=5.0, default_root_dir=str(tmp_path_factory.mktemp("pl")))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.fit(model, train_dataloaders=torch.utils.data.DataLoader(batches(), batch_size=None))
    return cap, snap, model


def test_bundle_of_a_lightning_fp16_incident(job):
    cap, snap, model = job
    assert len(cap.bundles) == 1
    inc, ckpt, batch = check_format(cap.bundles[0], what="grad", step=K, framework="lightning", dtype="float16", loss="ce",
                                    scaler=True, kind="adamw")
    assert inc["framework"]["version"] == pl.__version__
    assert inc["clip_grad_norm"] == 5.0
    sd, osd, ssd = snap.before[K]
    assert same_tensors(ckpt["model"], sd)
    assert same_tensors(ckpt["optimizer"]["state"], osd["state"])
    assert ckpt["scaler"] == ssd
    assert group_names(ckpt) == [["fc1.weight", "fc1.bias", "head.weight", "head.bias"]]
    x, y = batches()[K]
    assert torch.equal(batch["inputs"][0], x) and torch.equal(batch["labels"], y)


def test_todays_replay_of_the_lightning_bundle(job):
    from test_train import python_backward_origin

    cap, snap, model = job
    sd, osd, ssd = snap.before[K]
    net = Module()
    net.load_state_dict(sd)
    x, y = batches()[K]
    node, module, op = python_backward_origin(net, x, y, scale=ssd["scale"])
    assert module == "head"
    rc, got = replay_files(cap.bundles[0])
    assert rc == 1, got
    f = got["first_nonfinite"]
    assert (f["stage"], f["module"], f["op"], f["autograd_node"]) == ("backward", module, op, node)
    assert as_float(got["steps"][0]["loss_ref"]) == F.cross_entropy(net(x), y).item()
    assert got["steps"][0]["skipped"]


def test_replay_bundle_alone(job):
    """`ampscope-cli replay BUNDLE`: AdamW, clipping 5.0 and the scaler from the bundle."""
    cap = job[0]
    rc, alone = replay_bundle(cap.bundles[0])
    assert rc == 1, alone
    rc, by_hand = replay_files(cap.bundles[0], "--clip-grad-norm", 5.0)
    assert rc == 1, by_hand
    same_replay(alone, by_hand)


def test_replay_bundle_reference_step_is_the_jobs_optimizer(job):
    """The FP32 reference step of `replay BUNDLE` updates the parameters exactly as the job's
    AdamW with Lightning's clipping (5.0) does from the bundle's state, in Python, bitwise."""
    import hashlib

    cap = job[0]
    b = cap.bundles[0]
    ckpt = torch.load(os.path.join(b, "checkpoint.pt"), weights_only=True)
    batch = torch.load(os.path.join(b, "batch.pt"), weights_only=True)
    net = Module()
    net.load_state_dict(ckpt["model"])
    opt = torch.optim.AdamW(net.parameters(), lr=1.0)
    opt.load_state_dict(ckpt["optimizer"])
    F.cross_entropy(net(batch["inputs"][0]), batch["labels"]).backward()
    torch.nn.utils.clip_grad_norm_(net.parameters(), 5.0)
    opt.step()
    want = {n: hashlib.sha256(p.detach().contiguous().numpy().tobytes()).hexdigest() for n, p in net.named_parameters()}
    rc, got = replay_bundle(b)
    assert rc == 1, got
    assert {p["name"]: p["sha256_ref"] for p in got["steps"][0]["params"]} == want
