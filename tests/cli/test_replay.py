# SPDX-License-Identifier: MIT
"""Incident replay: a Python training loop (eager module, torch.amp.GradScaler, Adam) hits a
planted non-finite value at step k; the state of step k-1 is saved in every format users'
training code writes (plain state_dict with separate optimizer and scaler files, a dict with
model/optimizer/scaler, a Lightning-like .ckpt holding Python objects LibTorch cannot build, a
Hugging Face Trainer checkpoint folder with safetensors) with the batch of step k.
`ampscope-cli replay` must name the stage, module, op and autograd node Python's hooks name,
the scale and skip decision GradScaler took, and give the FP32 and AMP losses and updated
parameters bitwise equal to Python's. A second incident born in the optimizer update (Adam,
eps=0, a zero second moment) is named as such; bad inputs exit 2, named."""
import copy
import hashlib
import json
import os
import tempfile
import unittest

import torch
import torch.nn.functional as F

from common import as_float, run_cli
from test_train import python_backward_origin

K = 4  # the incident's step


class Net(torch.nn.Module):
    """Ordinary batches train fine; the batch of step K (large inputs) overflows the head's
    weight gradient in FP16 once scaled."""

    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 64)
        self.act = torch.nn.ReLU()
        self.head = torch.nn.Linear(64, 3)

    def forward(self, x):
        return self.head(self.act(self.fc1(x)))


class GateNet(torch.nn.Module):
    """A gate used only by batches with a flagged sample: its parameters have no Adam state
    until then, and receive exactly zero gradients (x 0.0), so Adam with eps=0 divides 0 by 0."""

    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 16)
        self.act = torch.nn.ReLU()
        self.head = torch.nn.Linear(16, 3)
        self.gate = torch.nn.Linear(8, 3)

    def forward(self, x):
        h = self.head(self.act(self.fc1(x)))
        if bool((x[:, 0] > 50.0).any()):
            h = h + self.gate(x) * 0.0
        return h


class Cfg:  # a user's config object pickled into a Lightning checkpoint
    def __init__(self):
        self.lr, self.layers = 1e-3, [64]


def sha(t):
    return hashlib.sha256(t.detach().contiguous().numpy().tobytes()).hexdigest()


def batches(seed, n=32):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(n, 8, generator=g), torch.randint(0, 3, (n,), generator=g)) for _ in range(K + 1)]


def amp_step(net, opt, scaler, x, y):
    """One step of the user's job; returns (loss, scale used, skipped)."""
    opt.zero_grad()
    with torch.autocast("cpu", dtype=torch.float16):
        loss = F.cross_entropy(net(x), y)
    scale = scaler.get_scale()
    scaler.scale(loss).backward()
    scaler.unscale_(opt)
    found = sum(v.item() for v in scaler._per_optimizer_states[id(opt)]["found_inf_per_device"].values()) > 0
    scaler.step(opt)
    scaler.update()
    return loss.item(), scale, found


def fp32_step(net, opt, x, y):
    opt.zero_grad()
    loss = F.cross_entropy(net(x), y)
    loss.backward()
    opt.step()
    return loss.item()


def save_formats(d, net, opt, scaler):
    """The state of step K-1 in every format; returns {name: extra replay args}."""
    sd, osd, ssd = net.state_dict(), opt.state_dict(), scaler.state_dict()
    torch.save(sd, os.path.join(d, "plain.pt"))
    torch.save(osd, os.path.join(d, "optimizer.pt"))
    torch.save(ssd, os.path.join(d, "scaler.pt"))
    torch.save({"model": sd, "optimizer": osd, "scaler": ssd, "epoch": 0}, os.path.join(d, "dict.pt"))
    torch.save({"epoch": 0, "global_step": K, "pytorch-lightning_version": "2.4.0",
                "state_dict": {"model." + k: v for k, v in sd.items()}, "optimizer_states": [osd], "lr_schedulers": [],
                "MixedPrecision": ssd, "hyper_parameters": {"cfg": Cfg()}}, os.path.join(d, "lightning.ckpt"))
    hf = os.path.join(d, f"checkpoint-{K}")
    os.makedirs(hf)
    try:
        from safetensors.torch import save_file
        save_file({k: v.contiguous() for k, v in sd.items()}, os.path.join(hf, "model.safetensors"))
    except ImportError:  # without the package: pytorch_model.bin, as older Trainer versions wrote
        torch.save(sd, os.path.join(hf, "pytorch_model.bin"))
    torch.save(osd, os.path.join(hf, "optimizer.pt"))
    torch.save(ssd, os.path.join(hf, "scaler.pt"))
    torch.save({"last_epoch": K}, os.path.join(hf, "scheduler.pt"))
    with open(os.path.join(hf, "trainer_state.json"), "w") as f:
        json.dump({"global_step": K, "log_history": []}, f)
    torch.save(Cfg(), os.path.join(hf, "training_args.bin"))
    p = lambda n: os.path.join(d, n)
    return {"state_dict": [p("plain.pt"), "--optimizer-state", p("optimizer.pt"), "--scaler-state", p("scaler.pt")],
            "dict": [p("dict.pt")], "lightning": [p("lightning.ckpt"), "--strip-prefix", "model."], "hf-trainer": [hf]}


def replay(model, ckpt_args, batch, *extra):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "replay.json")
        rc, so, se = run_cli("replay", "--model", model, "--checkpoint", *ckpt_args, "--batch", batch, "--json", out, "-q",
                             *map(str, extra))
        if rc not in (0, 1):
            return rc, se
        with open(out) as f:
            return rc, json.load(f)


class Incident:
    """A job run in Python up to its incident, the state of step K-1 saved in every format."""

    def __init__(self, cls, seed, plant, opt_kwargs, scaler_kwargs):
        torch.manual_seed(seed)
        self.tmp = tempfile.TemporaryDirectory()
        d = self.tmp.name
        self.net = cls()
        self.model = os.path.join(d, "model.pt")
        torch.jit.script(self.net).save(self.model)
        self.opt_kwargs = opt_kwargs
        opt = torch.optim.Adam(self.net.parameters(), **opt_kwargs)
        scaler = torch.amp.GradScaler("cpu", **scaler_kwargs)
        data = batches(seed)
        self.x, self.y = plant(*data[K])
        for x, y in data[:K]:
            amp_step(self.net, opt, scaler, x, y)
        self.state = (copy.deepcopy(self.net.state_dict()), copy.deepcopy(opt.state_dict()), scaler.state_dict())
        self.formats = save_formats(d, self.net, opt, scaler)
        self.batch = os.path.join(d, "batch.pt")
        torch.save({"inputs": self.x, "labels": self.y}, self.batch)

    def python_step(self, scaler_override=None, steps=1):
        """Step K in Python from the saved state (repeated `steps` times on the batch): the AMP
        job's and the FP32 reference's figures of the last step, and every step's."""
        sd, osd, ssd = self.state
        out = {}
        for side in ("amp", "ref"):
            net = copy.deepcopy(self.net)
            net.load_state_dict(sd)
            opt = torch.optim.Adam(net.parameters(), **self.opt_kwargs)
            opt.load_state_dict(copy.deepcopy(osd))
            scaler = torch.amp.GradScaler("cpu")
            scaler.load_state_dict(dict(ssd, **(scaler_override or {})))
            every = []
            for _ in range(steps):
                if side == "amp":
                    loss, scale, skipped = amp_step(net, opt, scaler, self.x, self.y)
                    every.append({"loss": loss, "scale": scale, "skipped": skipped, "scale_after": scaler.get_scale()})
                else:
                    every.append({"loss": fp32_step(net, opt, self.x, self.y)})
            out[side] = dict(every[-1], every=every)
            out[side]["sha"] = {n: sha(p) for n, p in net.named_parameters()}
            out[side]["finite"] = {n: bool(torch.isfinite(p).all()) for n, p in net.named_parameters()}
        return out


class BackwardIncident(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.inc = Incident(Net, 7, lambda x, y: (x * 400.0, y), {"lr": 1e-3}, {"init_scale": 2.0 ** 12, "growth_interval": 3})

    @classmethod
    def tearDownClass(cls):
        cls.inc.tmp.cleanup()

    def check_same_as_python(self, got, want):
        step = got["steps"][-1]
        self.assertEqual(as_float(step["loss_amp"]), want["amp"]["loss"])
        self.assertEqual(as_float(step["loss_ref"]), want["ref"]["loss"])
        self.assertEqual(as_float(step["scale"]), want["amp"]["scale"])
        self.assertEqual(step["skipped"], want["amp"]["skipped"])
        self.assertEqual(as_float(step["scale_after"]), want["amp"]["scale_after"])
        for p in step["params"]:
            self.assertEqual(p["sha256_ref"], want["ref"]["sha"][p["name"]], f"FP32 reference {p['name']}")
            self.assertEqual(p["sha256_amp"], want["amp"]["sha"][p["name"]], f"AMP {p['name']}")

    def test_every_format_names_pythons_origin_and_matches_bitwise(self):
        inc = self.inc
        want = inc.python_step()
        self.assertTrue(want["amp"]["skipped"], "the planted batch must make GradScaler skip in Python")
        node, module, op = python_backward_origin(copy.deepcopy(inc.net).eval().train(), inc.x, inc.y, scale=want["amp"]["scale"])
        self.assertEqual(module, "head", "the overflow is where the test planted it")
        for name, args in inc.formats.items():
            with self.subTest(format=name):
                rc, got = replay(inc.model, args, inc.batch)
                self.assertEqual(rc, 1, got)
                self.assertEqual(got["checkpoint"]["format"], name)
                f = got["first_nonfinite"]
                self.assertEqual((f["stage"], f["module"], f["op"], f["autograd_node"], f["step"]), ("backward", module, op, node, 0))
                self.check_same_as_python(got, want)

    def test_remedy_init_scale_steps_like_python(self):
        inc = self.inc
        want = inc.python_step({"scale": 1.0, "_growth_tracker": 0})
        self.assertFalse(want["amp"]["skipped"])
        rc, got = replay(inc.model, inc.formats["dict"], inc.batch, "--init-scale", 1)
        self.assertEqual(rc, 0, got)
        self.assertIsNone(got["first_nonfinite"])
        self.check_same_as_python(got, want)
        # where it ran and which backend ran it (a ROCm device is called cuda too): in the JSON
        self.assertEqual((got["device"], got["backend"]), ("cpu", "cpu"))

    def test_zero_scale_steps_like_python(self):
        """A GradScaler state with scale 0.0 loads in PyTorch (every step then skips: the scaled
        gradients are 0, unscaled by 1/0 they are NaN): replayed as PyTorch steps it, not refused."""
        inc = self.inc
        want = inc.python_step({"scale": 0.0, "_growth_tracker": 0})
        zero = os.path.join(os.path.dirname(inc.batch), "scaler-zero.pt")
        torch.save(dict(inc.state[2], scale=0.0, _growth_tracker=0), zero)
        args = list(inc.formats["state_dict"])
        args[args.index("--scaler-state") + 1] = zero
        rc, got = replay(inc.model, args, inc.batch)
        self.assertIn(rc, (0, 1), got)
        self.check_same_as_python(got, want)

    def test_several_steps_on_the_batch(self):
        inc = self.inc
        want = inc.python_step({"scale": 2.0 ** 4, "_growth_tracker": 0, "growth_interval": 2}, steps=3)
        rc, got = replay(inc.model, inc.formats["lightning"], inc.batch, "--init-scale", 16, "--growth-interval", 2, "--steps", 3)
        self.assertEqual(rc, 0, got)
        self.assertEqual(len(got["steps"]), 3)
        for g, w in zip(got["steps"], want["amp"]["every"]):
            self.assertEqual((as_float(g["scale"]), g["skipped"], as_float(g["loss_amp"])), (w["scale"], w["skipped"], w["loss"]))
        self.assertEqual([as_float(g["loss_ref"]) for g in got["steps"]], [w["loss"] for w in want["ref"]["every"]])
        self.assertEqual(as_float(got["steps"][-1]["scale_after"]), 2.0 ** 5, "GradScaler grew after growth_interval steps")
        self.check_same_as_python(got, want)

    def test_bad_inputs_exit_2_named(self):
        inc, d = self.inc, self.inc.tmp.name
        p = lambda n: os.path.join(d, n)
        other = os.path.join(d, "other.pt")
        torch.save(GateNet().state_dict(), other)
        torch.save({"growth_factor": 2.0}, p("noscale.pt"))
        torch.save(dict(inc.state[2], backoff_factor=1.5), p("badbackoff.pt"))
        torch.save(torch.optim.Adam(GateNet().parameters()).state_dict(), p("otheropt.pt"))
        torch.save({"inputs": torch.randn(4, 5), "labels": torch.zeros(4, dtype=torch.long)}, p("badbatch.pt"))
        with open(p("big.safetensors"), "wb") as f:
            f.write((200_000_000).to_bytes(8, "little") + b"{}")
        os.makedirs(p("checkpoint-9"))
        with open(p("batch.txt"), "w") as f:
            f.write("not a batch")
        cases = [
            ([other, "--optimizer-state", p("optimizer.pt")], inc.batch, "gate.weight"),
            ([p("lightning.ckpt")], inc.batch, "(ampscope-cli: --strip-prefix model. or --non-strict)"),
            ([p("plain.pt")], inc.batch, "give the optimizer state file (ampscope-cli: --optimizer-state FILE)"),
            ([p("dict.pt"), "--scaler-state", p("noscale.pt")], inc.batch, "'scale'"),
            ([p("dict.pt"), "--scaler-state", p("badbackoff.pt")], inc.batch, "backoff_factor"),
            ([p("dict.pt"), "--optimizer-state", p("otheropt.pt")], inc.batch, "param_groups"),
            ([p("dict.pt")], p("badbatch.pt"), "badbatch.pt"),
            ([p("big.safetensors")], inc.batch, "header length"),
            ([p("checkpoint-9")], inc.batch, "model.safetensors"),
            # the engine names fields (init_scale, param_groups_file); the CLI names its flags
            ([p("dict.pt"), "--no-scaler", "--init-scale", "8"], inc.batch, "--init-scale: the replay runs without"),
            ([p("dict.pt"), "--param-groups", p("nogroups.json")], inc.batch, "nogroups.json: field '--param-groups'"),
            ([p("dict.pt")], p("batch.txt"), "batch.txt: field '--batch': unknown file type"),  # was: '--probes'

        ]
        for args, batch, named in cases:
            with self.subTest(named=named):
                rc, err = replay(inc.model, args, batch)
                self.assertEqual(rc, 2, err)
                self.assertIn(named, err)
        rc, got = replay(inc.model, [p("lightning.ckpt"), "--non-strict", "--optimizer-state", p("optimizer.pt")], inc.batch)
        self.assertIn(rc, (0, 1), got)
        self.assertIn("model.fc1.weight", got["keys"]["unexpected"])


class FirstNonFiniteFunction(torch.overrides.TorchFunctionMode):
    """The first torch function of the forward (F.linear, not its addmm: the level of the ops
    ampscope's observer names) whose tensor inputs are finite and whose output is not."""

    def __init__(self):
        super().__init__()
        self.first = None

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if self.first is None and isinstance(out, torch.Tensor) and out.is_floating_point():
            ins = [a for a in list(args) + list((kwargs or {}).values()) if isinstance(a, torch.Tensor) and a.is_floating_point()]
            if ins and all(bool(torch.isfinite(a).all()) for a in ins) and not bool(torch.isfinite(out).all()):
                self.first = getattr(func, "__name__", str(func))
        return out


class ForwardIncident(unittest.TestCase):
    def test_forward_overflow_named_like_pythons_hooks(self):
        def plant(x, y):
            x = x.clone()
            x[3] = 60000.0  # representable in FP16; fc1's output is not
            return x, y

        inc = Incident(Net, 7, plant, {"lr": 1e-3}, {"init_scale": 2.0 ** 12, "growth_interval": 3})
        try:
            net, bad = copy.deepcopy(inc.net), []
            for n, m in net.named_modules():
                if n:
                    m.register_forward_hook(lambda m, i, o, n=n: bad.append(n) if not bool(torch.isfinite(o).all()) else None)
            mode = FirstNonFiniteFunction()
            with torch.autocast("cpu", dtype=torch.float16), mode:
                net(inc.x)
            self.assertEqual(bad[:1], ["fc1"], "the overflow is where the test planted it")
            want = inc.python_step()
            rc, got = replay(inc.model, inc.formats["dict"], inc.batch)
            self.assertEqual(rc, 1, got)
            f = got["first_nonfinite"]
            self.assertEqual((f["stage"], f["module"], f["op"], f["side"]), ("forward", bad[0], "aten::" + mode.first, "amp"))
            step = got["steps"][0]
            self.assertEqual(as_float(step["scale"]), want["amp"]["scale"])
            self.assertEqual(step["skipped"], want["amp"]["skipped"])
            self.assertTrue(step["skipped"])
            self.assertEqual(as_float(step["loss_ref"]), want["ref"]["loss"])
            # per-module activations side by side: fc1's FP32 output exceeds FP16's range
            acts = {a["module"]: a for a in step["activations"]}
            with torch.no_grad():
                fc1_absmax = float(inc.net.fc1(inc.x).abs().max())
            self.assertEqual(as_float(acts["fc1"]["ref_absmax"]), fc1_absmax)
            self.assertGreater(fc1_absmax, 65504.0)
            self.assertGreater(acts["fc1"]["amp_nonfinite"], 0)
        finally:
            inc.tmp.cleanup()


class OptimizerIncident(unittest.TestCase):
    def test_born_in_the_adam_update(self):
        def plant(x, y):
            x = x.clone()
            x[0, 0] = 100.0
            return x, y

        inc = Incident(GateNet, 11, plant, {"lr": 1e-3, "eps": 0.0}, {"init_scale": 2.0 ** 10})
        try:
            want = inc.python_step()
            self.assertFalse(want["amp"]["skipped"], "forward and backward stay finite in Python")
            self.assertFalse(want["amp"]["finite"]["gate.weight"], "Adam's update makes the gate NaN in Python")
            for name in ("dict", "hf-trainer"):
                with self.subTest(format=name):
                    rc, got = replay(inc.model, inc.formats[name], inc.batch)
                    self.assertEqual(rc, 1, got)
                    f = got["first_nonfinite"]
                    self.assertEqual((f["stage"], f["module"], f["side"]), ("optimizer", "gate", "amp"), f)
                    self.assertIn("adam", f["op"])
                    self.assertFalse(got["steps"][0]["found_inf"])
                    self.assertEqual(as_float(got["steps"][0]["loss_amp"]), want["amp"]["loss"])
        finally:
            inc.tmp.cleanup()


if __name__ == "__main__":
    unittest.main()
