# SPDX-License-Identifier: MIT
"""Replay of checkpoints the real frameworks write (issue 28): the FP32 reference step's updated
parameters must equal, bitwise, what the framework's own optimizer computes from the same state.

(a) a Hugging Face Trainer folder (transformers 5.24, bf16 on the CPU, the default optimizer:
    fused AdamW on torch >= 2.8, the decay / no-decay groups, clipping at max_grad_norm); GPT-2's
    LayerNorms are named ln_1/ln_2/ln_f, so the Trainer's rule needs the program's module types;
(b) a Lightning 2.6 .ckpt with two param groups listed in another order than the model's
    (with param_names, and without: --param-groups), gradient_clip_val, bf16-mixed (no scaler);
(c) an AdamW state as PyTorch <= 2.6 wrote it (no decoupled_weight_decay key): refused without
    --optimizer, equal to AdamW with --optimizer adamw and to Adam with --optimizer adam.
Besides: fused / foreach groups by name, optimizers that cannot be replayed refused by name,
several unnamed groups refused, a BF16 job without a scaler replayed without one, and the
job's RNG state restored so that dropout draws the job's masks."""
import copy
import hashlib
import json
import os
import tempfile
import unittest
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F

from common import run_cli

warnings.filterwarnings("ignore")
try:
    import transformers
    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments
    transformers.logging.set_verbosity_error()
except ImportError:  # tools/bootstrap.sh installs it into .venv (tests only)
    transformers = None
try:
    import pytorch_lightning as pl
except ImportError:  # tools/bootstrap.sh installs it into .venv (tests only)
    pl = None


def sha(t):
    return hashlib.sha256(t.detach().contiguous().numpy().tobytes()).hexdigest()


def replay(model, ckpt, batch, *extra):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "replay.json")
        rc, so, se = run_cli("replay", "--model", model, "--checkpoint", ckpt, "--batch", batch, "--json", out, "-q", "--no-db",
                             "--device", "cpu", *map(str, extra))
        if rc not in (0, 1):
            return rc, se
        with open(out) as f:
            return rc, json.load(f)


def shas_ref(got):
    return {p["name"]: p["sha256_ref"] for p in got["steps"][0]["params"]}


class Net(nn.Module):
    def __init__(self, dropout=0.0):
        super().__init__()
        self.fc1 = nn.Linear(6, 24)
        self.norm = nn.LayerNorm(24)
        self.drop = nn.Dropout(dropout)
        self.head = nn.Linear(24, 3)

    def forward(self, x):
        return self.head(self.drop(torch.relu(self.norm(self.fc1(x)))))


def data(seed, n=16):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 6, generator=g), torch.randint(0, 3, (n,), generator=g)


def python_step(net, opt, x, y, clip=None, clip_params=None, rng=None):
    """The job's FP32 step: forward, loss, backward, clipping, optimizer.step()."""
    if rng is not None:
        torch.set_rng_state(rng)
    opt.zero_grad()
    F.cross_entropy(net(x), y).backward()
    if clip:
        torch.nn.utils.clip_grad_norm_(clip_params if clip_params is not None else net.parameters(), clip)
    opt.step()
    return {n: sha(p) for n, p in net.named_parameters()}


class Job:
    """A plain PyTorch job: a few steps, then the state saved as a dict, the batch of the next step."""

    def __init__(self, make_opt, dropout=0.0, steps=2):
        torch.manual_seed(3)
        self.tmp = tempfile.TemporaryDirectory()
        d = self.tmp.name
        self.net = Net(dropout).train()
        self.make_opt = make_opt
        self.opt = make_opt(self.net)
        for s in range(steps):
            python_step(self.net, self.opt, *data(s))
        self.x, self.y = data(99)
        self.model = os.path.join(d, "net.pt2")
        torch.export.save(torch.export.export(self.net, (self.x,)), self.model)
        self.batch = os.path.join(d, "batch.pt")
        torch.save({"inputs": [self.x], "labels": self.y}, self.batch)
        self.sd, self.osd = copy.deepcopy(self.net.state_dict()), copy.deepcopy(self.opt.state_dict())

    def save(self, name, **extra):
        path = os.path.join(self.tmp.name, name)
        torch.save(dict({"model": self.sd, "optimizer": self.osd}, **extra), path)
        return path

    def want(self, osd=None, opt_cls=None, **kw):
        net = Net(self.net.drop.p).train()
        net.load_state_dict(self.sd)
        opt = opt_cls(net) if opt_cls else self.make_opt(net)
        opt.load_state_dict(osd or self.osd)
        return python_step(net, opt, self.x, self.y, **kw)


def named_groups(net, order=("head", "fc1", "norm")):
    """Groups in another order than the model's, built from named_parameters (param_names saved)."""
    return [{"params": [(n, p) for n, p in net.named_parameters() if n.startswith(k)], "lr": 1e-2 * (i + 1),
             "weight_decay": 0.1 * i} for i, k in enumerate(order)]


class PlainOptimizers(unittest.TestCase):
    def check(self, job, ckpt, *extra, want=None):
        rc, got = replay(job.model, ckpt, job.batch, *extra)
        self.assertEqual(rc, 0, got)
        self.assertEqual(shas_ref(got), want or job.want())
        return got

    def test_groups_by_param_names_fused_and_foreach(self):
        """Three groups listed head, fc1, norm (not the model's order), each its own lr and
        weight decay; fused=True steps with the fused kernel (it rounds differently from the
        single-tensor arithmetic), foreach=True like single-tensor."""
        for flags in ({"fused": True}, {"foreach": True}, {}):
            for cls in (torch.optim.AdamW, torch.optim.Adam):
                job = Job(lambda n: cls(named_groups(n), amsgrad=True, **flags))
                try:
                    got = self.check(job, job.save("ckpt.pt"))
                    od = got["optimizer_detail"]
                    self.assertEqual((od["kind"], od["mapping"]), ("adamw" if cls is torch.optim.AdamW else "adam", "param_names"))
                    self.assertEqual([g["params"][0] for g in od["groups"]], ["head.weight", "fc1.weight", "norm.weight"])
                    self.assertEqual([g["lr"] for g in od["groups"]], [1e-2, 2e-2, 3e-2])
                    self.assertEqual(od["groups"][0]["implementation"], "fused" if flags.get("fused") else "single-tensor")
                finally:
                    job.tmp.cleanup()

    def test_fused_sgd_with_nesterov(self):
        job = Job(lambda n: torch.optim.SGD(named_groups(n), momentum=0.9, nesterov=True, fused=True))
        try:
            self.check(job, job.save("ckpt.pt"))
        finally:
            job.tmp.cleanup()

    def test_unnamed_groups_need_a_groups_file(self):
        """Groups built from tensors (no param_names): which parameter each index is cannot be
        read from the file; refused, naming --param-groups; with the file, PyTorch's step."""
        def groups(net):
            return [{"params": [p for n, p in g["params"]], "lr": g["lr"], "weight_decay": g["weight_decay"]} for g in named_groups(net)]
        job = Job(lambda n: torch.optim.AdamW(groups(n)))
        try:
            ckpt = job.save("ckpt.pt")
            rc, err = replay(job.model, ckpt, job.batch)
            self.assertEqual(rc, 2, err)
            self.assertIn("a param-groups file (a JSON list per group", err)
            self.assertIn("(ampscope-cli: --param-groups)", err)  # the CLI's flag for the remedy
            gf = os.path.join(job.tmp.name, "groups.json")
            with open(gf, "w") as f:
                json.dump([[n for n, _ in g["params"]] for g in named_groups(job.net)], f)
            got = self.check(job, ckpt, "--param-groups", gf)
            self.assertEqual(got["optimizer_detail"]["mapping"], "groups-file")
            with open(gf, "w") as f:  # the groups in the model's order: a size that does not fit is named
                json.dump([["fc1.weight", "fc1.bias"], ["norm.weight", "norm.bias"], ["head.weight", "head.bias"]], f)
            rc, err = replay(job.model, ckpt, job.batch, "--param-groups", gf)
            self.assertEqual(rc, 2, err)
            self.assertIn("shape", err)
        finally:
            job.tmp.cleanup()

    def test_adamw_from_pytorch_2_6(self):
        """(c) PyTorch <= 2.6's AdamW saved no decoupled_weight_decay key (AdamW was its own class):
        with weight decay the file cannot tell Adam from AdamW."""
        job = Job(lambda n: torch.optim.AdamW(n.parameters(), lr=1e-2, weight_decay=0.1))
        try:
            old = copy.deepcopy(job.osd)
            for g in old["param_groups"]:
                del g["decoupled_weight_decay"]
            ckpt = os.path.join(job.tmp.name, "old.pt")
            torch.save({"model": job.sd, "optimizer": old}, ckpt)
            rc, err = replay(job.model, ckpt, job.batch)
            self.assertEqual(rc, 2, err)
            self.assertIn("give the optimizer, adam or adamw (ampscope-cli: --optimizer adam or --optimizer adamw)", err)
            got = self.check(job, ckpt, "--optimizer", "adamw")  # AdamW's __setstate__ restores decoupled_weight_decay
            self.assertEqual(got["optimizer_detail"]["kind"], "adamw")
            adam = job.want(osd=old, opt_cls=lambda n: torch.optim.Adam(n.parameters(), lr=1e-2, weight_decay=0.1))
            self.assertNotEqual(adam, job.want())
            self.check(job, ckpt, "--optimizer", "adam", want=adam)
        finally:
            job.tmp.cleanup()

    def test_optimizers_not_replayed_are_refused_by_name(self):
        for cls, name in ((torch.optim.RAdam, "RAdam"), (torch.optim.NAdam, "NAdam"), (torch.optim.Adagrad, "Adagrad"),
                          (torch.optim.RMSprop, "RMSprop"), (torch.optim.Adafactor, "Adafactor"), (torch.optim.Adamax, "Adamax"),
                          (torch.optim.Adadelta, "Adadelta")):
            job = Job(lambda n: cls(n.parameters(), lr=1e-3), steps=1)
            try:
                rc, err = replay(job.model, job.save("ckpt.pt"), job.batch)
                self.assertEqual(rc, 2, err)
                self.assertIn(name, err)
            finally:
                job.tmp.cleanup()

    def test_dropout_draws_the_jobs_masks(self):
        """A dict's rng_state (torch.get_rng_state() before the step) is restored: the reference
        step's dropout masks are the job's. Without it, said."""
        job = Job(lambda n: torch.optim.Adam(n.parameters(), lr=1e-2), dropout=0.5)
        try:
            torch.manual_seed(1234)
            rng = torch.get_rng_state()
            got = self.check(job, job.save("ckpt.pt", rng_state={"cpu": rng}), want=job.want(rng=rng))
            self.assertEqual(got["rng"], "checkpoint")
            rc, got = replay(job.model, job.save("norng.pt"), job.batch)
            self.assertEqual(rc, 0, got)
            self.assertEqual(got["rng"], "seed")
            self.assertTrue(any("dropout" in w for w in got["warnings"]), got["warnings"])
        finally:
            job.tmp.cleanup()

    def test_bf16_without_scaler_state_runs_without_a_scaler(self):
        """A BF16 job has no GradScaler: no skip the job never made, scale remedies refused."""
        job = Job(lambda n: torch.optim.Adam(n.parameters(), lr=1e-2))
        try:
            ckpt = job.save("ckpt.pt")
            rc, got = replay(job.model, ckpt, job.batch, "--precision", "bf16")
            self.assertEqual(rc, 0, got)
            self.assertFalse(got["scaler_enabled"])
            self.assertFalse(got["steps"][0]["skipped"])
            rc, err = replay(job.model, ckpt, job.batch, "--precision", "bf16", "--init-scale", "1024")
            self.assertEqual(rc, 2, err)
            self.assertIn("without GradScaler", err)
            rc, got = replay(job.model, ckpt, job.batch, "--precision", "fp16")  # FP16: GradScaler's defaults, said
            self.assertTrue(got["scaler_enabled"])
            rc, got = replay(job.model, ckpt, job.batch, "--precision", "fp16", "--no-scaler")
            self.assertFalse(got["scaler_enabled"])
        finally:
            job.tmp.cleanup()


class MaskedNet(Net):
    """A persistent -inf buffer masks class 2 (as a causal mask masks future positions): the
    logits hold -inf on both sides and the loss of labels 0/1 is finite."""

    def __init__(self):
        super().__init__()
        self.register_buffer("mask", torch.tensor([0.0, 0.0, float("-inf")]))

    def forward(self, x):
        return super().forward(x) + self.mask


class HostileStates(unittest.TestCase):
    """What PyTorch refuses or casts, the replay refuses by name or casts alike."""

    def test_masks_are_not_incidents(self):
        torch.manual_seed(3)
        with tempfile.TemporaryDirectory() as d:
            net = MaskedNet().train()
            opt = torch.optim.Adam(net.parameters(), lr=1e-2)
            x, y = data(1)
            y = y.clamp(max=1)
            model, batch, ckpt = (os.path.join(d, n) for n in ("m.pt2", "b.pt", "c.pt"))
            torch.export.save(torch.export.export(net, (x,)), model)
            torch.save({"inputs": [x], "labels": y}, batch)
            torch.save({"model": net.state_dict(), "optimizer": opt.state_dict()}, ckpt)
            want = python_step(net, opt, x, y)
            rc, got = replay(model, ckpt, batch)
            self.assertEqual(rc, 0, got)
            self.assertIsNone(got["first_nonfinite"])  # was: checkpoint (the mask buffer), then forward (-inf logits)
            self.assertEqual(shas_ref(got), want)

    def test_states_pytorch_refuses_or_casts(self):
        job = Job(lambda n: torch.optim.Adam(n.parameters(), lr=1e-2), steps=1)
        try:
            def variant(name, edit):
                osd = copy.deepcopy(job.osd)
                edit(osd)
                path = os.path.join(job.tmp.name, name + ".pt")
                torch.save({"model": job.sd, "optimizer": osd}, path)
                return path, osd
            refused = {
                "nolr": (lambda o: o["param_groups"][0].pop("lr"), "lr"),
                "noeps": (lambda o: o["param_groups"][0].pop("eps"), "eps"),
                "complexlr": (lambda o: o["param_groups"][0].update(lr=torch.tensor(1e-2 + 1j)), "lr"),
                "negstep": (lambda o: o["state"][0].update(step=torch.tensor(-1.0)), "step"),
                "twostep": (lambda o: o["state"][0].update(step=torch.tensor([1.0, 2.0])), "step"),
                "beta1": (lambda o: o["param_groups"][0].update(betas=(1.0, 0.999)), "betas"),
                "sparseadam": (lambda o: [o["param_groups"][0].pop(k) for k in ("weight_decay", "amsgrad")], "SparseAdam"),
            }
            for name, (edit, field) in refused.items():
                path, _ = variant(name, edit)
                rc, err = replay(job.model, path, job.batch)
                self.assertEqual(rc, 2, (name, err))
                self.assertIn(field, err, name)
            # moments saved in float64 / bfloat16: load_state_dict casts them to the parameter's dtype
            for dt in (torch.float64, torch.bfloat16):
                def cast(o):
                    for st in o["state"].values():
                        st["exp_avg"], st["exp_avg_sq"] = st["exp_avg"].to(dt), st["exp_avg_sq"].to(dt)
                path, osd = variant("cast", cast)
                rc, got = replay(job.model, path, job.batch)
                self.assertEqual(rc, 0, got)
                self.assertEqual(shas_ref(got), job.want(osd=osd))
        finally:
            job.tmp.cleanup()


class TrainerFolderFiles(unittest.TestCase):
    """What the Trainer loads from checkpoint-N/, and members that are not what they should be."""

    def test_members(self):
        from safetensors.torch import save_file
        job = Job(lambda n: torch.optim.Adam(n.parameters(), lr=1e-2), steps=1)
        try:
            ck = os.path.join(job.tmp.name, "checkpoint-1")
            os.makedirs(ck)
            save_file({k: v.contiguous() for k, v in job.sd.items()}, os.path.join(ck, "model.safetensors"))
            torch.save(job.osd, os.path.join(ck, "optimizer.pt"))
            rc, clean = replay(job.model, ck, job.batch, "--clip-grad-norm", "0")
            self.assertEqual(rc, 0, clean)
            self.assertEqual(shas_ref(clean), job.want())
            # a stale sharded copy beside model.safetensors: the Trainer loads model.safetensors
            stale = {k: (v + 1).contiguous() for k, v in job.sd.items()}
            save_file(stale, os.path.join(ck, "model-00001-of-00001.safetensors"))
            with open(os.path.join(ck, "model.safetensors.index.json"), "w") as f:
                json.dump({"weight_map": {k: "model-00001-of-00001.safetensors" for k in stale}}, f)
            rc, got = replay(job.model, ck, job.batch, "--clip-grad-norm", "0")
            self.assertEqual(rc, 0, got)
            self.assertEqual(shas_ref(got), shas_ref(clean))  # was: the stale shard's weights
            # an index naming a shard outside the folder, once model.safetensors is gone
            os.remove(os.path.join(ck, "model.safetensors"))
            with open(os.path.join(ck, "model.safetensors.index.json"), "w") as f:
                json.dump({"weight_map": {k: ".." for k in stale}}, f)
            rc, err = replay(job.model, ck, job.batch)
            self.assertEqual(rc, 2, err)
            self.assertIn("weight_map", err)
            # optimizer.pt that is a folder
            save_file({k: v.contiguous() for k, v in job.sd.items()}, os.path.join(ck, "model.safetensors"))
            os.remove(os.path.join(ck, "optimizer.pt"))
            os.makedirs(os.path.join(ck, "optimizer.pt"))
            rc, err = replay(job.model, ck, job.batch)
            self.assertEqual(rc, 2, err)
            self.assertIn("optimizer.pt", err)
        finally:
            job.tmp.cleanup()


@unittest.skipIf(pl is None, "pytorch-lightning is not installed (tools/bootstrap.sh installs it)")
class LightningCheckpoint(unittest.TestCase):
    """(b) Lightning 2.6 writes the .ckpt: two param groups (head first), gradient_clip_val,
    bf16-mixed on the CPU (no scaler). Lightning clips the optimizer's parameters in the groups'
    order."""

    def run_job(self, named, d):
        class Module(pl.LightningModule):
            def __init__(self):
                super().__init__()
                self.model = Net()

            def training_step(self, batch, i):
                x, y = batch
                return F.cross_entropy(self.model(x), y)

            def configure_optimizers(self):
                head = [(n, p) for n, p in self.named_parameters() if n.startswith("model.head")]
                rest = [(n, p) for n, p in self.named_parameters() if not n.startswith("model.head")]
                if not named:
                    head, rest = [p for _, p in head], [p for _, p in rest]
                return torch.optim.AdamW([{"params": head, "weight_decay": 0.0}, {"params": rest, "lr": 3e-3}], lr=1e-2,
                                         weight_decay=0.05)

        torch.manual_seed(4)
        m = Module()
        x, y = data(5, 64)
        loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=16)
        trainer = pl.Trainer(max_steps=2, accelerator="cpu", devices=1, precision="bf16-mixed", gradient_clip_val=0.5, logger=False,
                             enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
        trainer.fit(m, loader)
        ckpt = os.path.join(d, "job.ckpt")
        trainer.save_checkpoint(ckpt)
        return Module, ckpt

    def check(self, named):
        with tempfile.TemporaryDirectory() as d:
            Module, ckpt = self.run_job(named, d)
            saved = torch.load(ckpt, weights_only=False)
            self.assertNotIn("MixedPrecision", saved)  # bf16-mixed: no scaler state
            m = Module()
            m.load_state_dict(saved["state_dict"])
            opt = m.configure_optimizers()
            opt.load_state_dict(saved["optimizer_states"][0])
            x, y = data(77)
            model, batch = os.path.join(d, "net.pt2"), os.path.join(d, "batch.pt")
            torch.export.save(torch.export.export(m.model.train(), (x,)), model)
            torch.save({"inputs": [x], "labels": y}, batch)
            m.model.train()
            group_order = [p for g in opt.param_groups for p in g["params"]]
            want = python_step(m.model, opt, x, y, clip=0.5, clip_params=group_order)
            extra = ["--strip-prefix", "model.", "--precision", "bf16", "--clip-grad-norm", "0.5"]
            if not named:
                rc, err = replay(model, ckpt, batch, *extra)
                self.assertEqual(rc, 2, err)
                self.assertIn("a param-groups file (a JSON list per group", err)
                gf = os.path.join(d, "groups.json")
                with open(gf, "w") as f:
                    json.dump([["head.weight", "head.bias"], ["fc1.weight", "fc1.bias", "norm.weight", "norm.bias"]], f)
                extra += ["--param-groups", gf]
            rc, got = replay(model, ckpt, batch, *extra)
            self.assertEqual(rc, 0, got)
            self.assertEqual(got["checkpoint"]["format"], "lightning")
            self.assertFalse(got["scaler_enabled"])
            self.assertFalse(got["steps"][0]["skipped"])
            self.assertEqual(shas_ref(got), want)
            self.assertEqual(got["remedies"]["clip_grad_norm"], 0.5)
            self.assertEqual([g["weight_decay"] for g in got["optimizer_detail"]["groups"]], [0.0, 0.05])

    def test_named_groups(self):
        self.check(True)

    def test_fp16_incident_named_like_python(self):
        """16-mixed with a CPU GradScaler (Lightning's MixedPrecision plugin): the scaler state is
        in the .ckpt; a batch whose fc1 output overflows FP16 is named where Python's forward
        hooks name it, and GradScaler's decision (skip, scale backed off) is the job's."""
        from pytorch_lightning.plugins.precision import MixedPrecision

        class Module(pl.LightningModule):
            def __init__(self):
                super().__init__()
                self.model = Net()

            def training_step(self, batch, i):
                return F.cross_entropy(self.model(batch[0]), batch[1])

            def configure_optimizers(self):
                return torch.optim.Adam(self.model.parameters(), lr=1e-3)

        with tempfile.TemporaryDirectory() as d:
            torch.manual_seed(4)
            m = Module()
            x, y = data(5, 32)
            loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=16)
            scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 12)
            trainer = pl.Trainer(max_steps=2, accelerator="cpu", devices=1, plugins=[MixedPrecision("16-mixed", "cpu", scaler)],
                                 logger=False, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
            trainer.fit(m, loader)
            ckpt = os.path.join(d, "job.ckpt")
            trainer.save_checkpoint(ckpt)
            saved = torch.load(ckpt, weights_only=False)
            self.assertIn("scale", saved["MixedPrecision"])
            xb, yb = data(78)
            xb = xb * 3e5  # fc1's FP16 output overflows
            model, batch = os.path.join(d, "net.pt2"), os.path.join(d, "batch.pt")
            net = m.model.train()
            torch.export.save(torch.export.export(net, (xb,)), model)
            torch.save({"inputs": [xb], "labels": yb}, batch)
            first = []  # Python's own forward hooks: the first module whose output is not finite
            hooks = [mod.register_forward_hook(lambda mod, i, o, n=n: first.append(n) if not torch.isfinite(o).all() else None)
                     for n, mod in net.named_modules() if n]
            with torch.no_grad(), torch.autocast("cpu", dtype=torch.float16):
                net(xb)
            for h in hooks:
                h.remove()
            js = torch.amp.GradScaler("cpu")
            js.load_state_dict(saved["MixedPrecision"])
            opt = m.configure_optimizers()
            opt.load_state_dict(saved["optimizer_states"][0])
            with torch.autocast("cpu", dtype=torch.float16):
                loss = F.cross_entropy(net(xb), yb)
            before = js.get_scale()
            js.scale(loss).backward()
            js.step(opt)
            js.update()
            rc, got = replay(model, ckpt, batch, "--strip-prefix", "model.", "--precision", "fp16")
            self.assertEqual(rc, 1, got)
            f = got["first_nonfinite"]
            self.assertEqual((f["stage"], f["module"]), ("forward", first[0]))
            self.assertIn(f["op"], ("aten::linear", "aten::addmm"))
            st = got["steps"][0]
            self.assertTrue(got["scaler_enabled"])
            self.assertEqual((st["scale"], st["skipped"], st["scale_after"]), (before, True, js.get_scale()))

    def test_unnamed_groups_with_a_groups_file(self):
        self.check(False)


def tiny_gpt2():
    return GPT2LMHeadModel(GPT2Config(vocab_size=32, n_positions=16, n_embd=32, n_layer=1, n_head=2, use_cache=False, resid_pdrop=0.0,
                                      embd_pdrop=0.0, attn_pdrop=0.0))


class Tokens(torch.utils.data.Dataset):
    def __init__(self, n=16, t=10):
        g = torch.Generator().manual_seed(8)
        self.ids = torch.randint(0, 32, (n, t), generator=g)

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "attention_mask": torch.ones_like(self.ids[i]), "labels": self.ids[i]}


@unittest.skipIf(transformers is None, "transformers is not installed (tools/bootstrap.sh installs it)")
class TrainerFolder(unittest.TestCase):
    """(a) transformers 5.24's Trainer writes checkpoint-1/ (bf16 on the CPU, default optimizer,
    weight decay 0.1: decay / no-decay groups, max_grad_norm 1.0)."""

    def test_trainer_folder_replays_the_trainers_step(self):
        with tempfile.TemporaryDirectory() as d:
            torch.manual_seed(6)
            args = TrainingArguments(output_dir=d, max_steps=2, save_steps=1, per_device_train_batch_size=4, learning_rate=1e-3,
                                     weight_decay=0.1, bf16=True, use_cpu=True, report_to=[], logging_steps=100,
                                     dataloader_num_workers=0)
            trainer = Trainer(model=tiny_gpt2(), args=args, train_dataset=Tokens())
            trainer.train()
            ck = os.path.join(d, "checkpoint-1")
            self.assertFalse(os.path.exists(os.path.join(ck, "scaler.pt")))
            osd = torch.load(os.path.join(ck, "optimizer.pt"), weights_only=False)
            self.assertEqual(len(osd["param_groups"]), 2)
            self.assertTrue(osd["param_groups"][0]["fused"])  # adamw_torch_fused, the default on torch >= 2.8
            # the Trainer's own step from checkpoint-1, in FP32
            model = GPT2LMHeadModel.from_pretrained(ck).train()
            t2 = Trainer(model=model, args=args, train_dataset=Tokens())
            opt = t2.create_optimizer()
            opt.load_state_dict(osd)
            batch = Tokens()[0]
            b = {k: torch.stack([Tokens()[i][k] for i in range(4)]) for k in batch}
            program = os.path.join(d, "gpt2.pt2")
            torch.export.save(torch.export.export(copy.deepcopy(model), (), {k: b[k] for k in ("input_ids", "attention_mask", "labels")}),
                              program)
            bp = os.path.join(d, "batch.pt")
            torch.save({"inputs": [b["input_ids"], b["attention_mask"], b["labels"]]}, bp)
            torch.set_rng_state(torch.load(os.path.join(ck, "rng_state.pth"), weights_only=False)["cpu"])
            opt.zero_grad()
            model(**b).loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            want = {n: sha(p) for n, p in model.named_parameters()}
            rc, got = replay(program, ck, bp, "--loss", "model", "--output", "0", "--precision", "bf16")
            self.assertEqual(rc, 0, got)
            self.assertTrue(any("max_grad_norm" in w for w in got["warnings"]), got["warnings"])  # clipping not given: said
            rc, got = replay(program, ck, bp, "--loss", "model", "--output", "0", "--precision", "bf16", "--clip-grad-norm", "1.0")
            self.assertEqual(rc, 0, got)
            od = got["optimizer_detail"]
            self.assertEqual((od["kind"], od["mapping"]), ("adamw", "trainer-rule"))
            self.assertEqual([g["weight_decay"] for g in od["groups"]], [0.1, 0.0])
            self.assertIn("transformer.h.0.ln_1.weight", od["groups"][1]["params"])  # a LayerNorm: no decay
            self.assertEqual(od["groups"][0]["implementation"], "fused")
            self.assertFalse(got["scaler_enabled"])
            self.assertFalse(got["steps"][0]["skipped"])
            self.assertIsNone(got["first_nonfinite"])
            self.assertEqual(shas_ref(got), want)
            self.assertEqual(got["rng"], "checkpoint", got["warnings"])  # rng_state.pth (numpy's and Python's states beside)


if __name__ == "__main__":
    unittest.main()
