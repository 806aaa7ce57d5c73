# SPDX-License-Identifier: MIT
"""Every pass starts from the same model state (issue 19): a model that changes its own
buffers or parameters in forward (a counter, a running statistic, a cache) must not carry the
change into the next pass, and the run says that the model mutates its state. The oracle is
eager PyTorch on a fresh copy of the module per precision (what "passes differ only in
precision policy" means). TorchScript and torch.export programs alike."""
import copy
import json
import os
import sys
import tempfile
import unittest

import torch

sys.path.insert(0, os.path.dirname(__file__))
from common import run_cli  # noqa: E402

DTYPES = {"fp32": None, "fp16": torch.float16, "bf16": torch.bfloat16}


class Counter(torch.nn.Module):
    """Output depends on how many times forward ran: +1 per pass leaks into the next."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.fc = torch.nn.Linear(4, 3)
        self.register_buffer("count", torch.zeros(()))

    def forward(self, x):
        self.count.add_(1.0)
        return self.fc(x) + 10.0 * (self.count - 1.0)  # +0 from a fresh state, +10 per leaked pass


class BnReadsStats(torch.nn.Module):
    """Train mode: BatchNorm updates its running mean, which the output then reads."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(1)
        self.fc = torch.nn.Linear(4, 3)
        self.bn = torch.nn.BatchNorm1d(3)

    def forward(self, x):
        y = self.bn(self.fc(x))
        return y + self.bn.running_mean.sum()


class TouchesWeight(torch.nn.Module):
    """Changes a parameter in forward (a model may touch its parameters too)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(2)
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, x):
        with torch.no_grad():
            self.fc.bias.add_(1.0)
        return self.fc(x)


def eager(model, x, precision, train):
    m = copy.deepcopy(model)
    m.train(train)
    dtype = DTYPES[precision]
    with torch.no_grad(), torch.autocast("cpu", dtype=dtype or torch.float16, enabled=dtype is not None):
        return m(x.clone()).float()


class PassState(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.d = cls.tmp.name
        torch.manual_seed(3)
        cls.x = torch.randn(8, 4)
        cls.probes = os.path.join(cls.d, "probes.pt")
        torch.save({"inputs": cls.x, "labels": torch.tensor([0, 1, 2, 0, 1, 2, 0, 1])}, cls.probes)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def save(self, model, fmt, name, train=False):
        path = os.path.join(self.d, f"{name}.{fmt}")
        m = copy.deepcopy(model).train(train)
        if fmt == "pt":
            torch.jit.script(m).save(path)
        else:
            torch.export.save(torch.export.export(m, (self.x.clone(),)), path)
        return path

    def run_model(self, model_path, train=False):
        out = os.path.join(self.d, "run.json")
        args = ["run", "--model", model_path, "--probes", self.probes, "--precision", "fp16,bf16", "--no-db", "-q",
                "--outputs", "--json", out, "--batch-size", "8", "--atol", "0.05", "--rtol", "0.05",
                "--max-flips", "8"]  # boundary flips are AMP behaviour; a leaked state is a tolerance failure
        if train:
            args += ["--mode", "train"]
        rc, so, se = run_cli(*args)
        self.assertIn(rc, (0, 1), se)
        with open(out) as f:
            return rc, json.load(f)

    def check(self, model, fmt, name, state_names, train=False):
        rc, r = self.run_model(self.save(model, fmt, name, train), train)
        for p in r["passes"]:
            want = eager(model, self.x, p["precision"], train)
            got = torch.tensor(p["outputs"], dtype=torch.float32).reshape(want.shape)
            # Bitwise in FP32; the AMP passes within rounding of the same fresh state (a leaked
            # +1 pass is off by whole units).
            if p["precision"] == "fp32":
                self.assertTrue(torch.equal(got, want), f"{fmt} {name} fp32: {got} vs {want}")
            else:
                self.assertTrue(torch.allclose(got, want, atol=0.05, rtol=0.02), f"{fmt} {name} {p['precision']}: {got} vs {want}")
        self.assertEqual(rc, 0, f"{fmt} {name}: verdict {r.get('verdict')}")
        warn = [w for w in r["warnings"] if "changes its own state" in w]
        self.assertEqual(len(warn), 1, r["warnings"])
        for s in state_names:
            self.assertIn(s, warn[0])

    def test_counter_buffer_torchscript(self):
        self.check(Counter(), "pt", "counter", ["count"])

    def test_counter_buffer_export(self):
        self.check(Counter(), "pt2", "counter", ["count"])

    def test_batchnorm_statistics_in_train_mode_torchscript(self):
        self.check(BnReadsStats(), "pt", "bn", ["bn.running_mean"], train=True)

    def test_batchnorm_statistics_in_train_mode_export(self):
        self.check(BnReadsStats(), "pt2", "bn", ["bn.running_mean"], train=True)

    def test_parameter_touched_in_forward_torchscript(self):
        self.check(TouchesWeight(), "pt", "touch", ["fc.bias"])

    def test_model_that_keeps_its_state_gets_no_warning(self):
        class Plain(torch.nn.Module):
            def __init__(self):
                super().__init__()
                torch.manual_seed(4)
                self.fc = torch.nn.Linear(4, 3)
                self.register_buffer("scale", torch.ones(()))

            def forward(self, x):
                return self.fc(x) * self.scale

        rc, r = self.run_model(self.save(Plain(), "pt", "plain"))
        self.assertEqual(rc, 0)
        self.assertFalse(any("changes its own state" in w for w in r["warnings"]), r["warnings"])

    def test_train_exported_batchnorm_run_in_eval_keeps_its_counter(self):
        # A program exported in train mode counts batches (num_batches_tracked += 1); eager
        # model.eval() does not, so the eval run neither changes the state nor says it does.
        class Bn(torch.nn.Module):
            def __init__(self):
                super().__init__()
                torch.manual_seed(5)
                self.fc = torch.nn.Linear(4, 3)
                self.bn = torch.nn.BatchNorm1d(3)

            def forward(self, x):
                return self.bn(self.fc(x))

        model = Bn()
        path = self.save(model, "pt2", "bn_train_export", train=True)
        rc, r = self.run_model(path)
        self.assertEqual(rc, 0)
        want = eager(model, self.x, "fp32", False)
        got = torch.tensor(r["passes"][0]["outputs"], dtype=torch.float32).reshape(want.shape)
        self.assertTrue(torch.equal(got, want), f"{got} vs {want}")
        self.assertFalse(any("changes its own state" in w for w in r["warnings"]), r["warnings"])
        self.assertTrue(any("exported in train mode" in w for w in r["warnings"]), r["warnings"])
        # The terminal summary shows the run's warnings too (it showed none).
        rc, so, se = run_cli("run", "--model", path, "--probes", self.probes, "--precision", "bf16", "--no-db",
                             "--batch-size", "8", "--atol", "0.05", "--rtol", "0.05", "--max-flips", "8")
        self.assertIn(rc, (0, 1), se)
        self.assertIn("warning: the program was exported in train mode", so)
        # In train mode the program counts, as eager train() does: the run says so.
        rc, r = self.run_model(path, train=True)
        self.assertTrue(any("changes its own state" in w and "bn.num_batches_tracked" in w for w in r["warnings"]),
                        r["warnings"])


class Inner(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x):
        h = self.fc(x).half()  # an explicit half inside the kept module stays half
        h.mul_(3.0)  # and an in-place op on it writes into it (not into an upcast copy)
        h = (h + 1000.0) - 1000.0  # half arithmetic drops the low bits; an upcast would keep them
        return h.float()


class Outer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(8)
        self.pre = torch.nn.Linear(4, 4)
        self.inner = Inner()
        self.head = torch.nn.Linear(4, 3)

    def forward(self, x):
        return self.head(self.inner(self.pre(x)))


def region_oracle(model, x, dtype, keep):
    """What the advisor's Python snippet tells users to write: torch.autocast(enabled=False)
    around the kept module plus a cast of its floating inputs to FP32."""
    m = copy.deepcopy(model).eval()
    sub = m.get_submodule(keep)
    inner_forward = sub.forward

    def forward(*args):
        with torch.autocast("cpu", enabled=False):
            return inner_forward(*[a.float() if torch.is_tensor(a) and a.is_floating_point() else a for a in args])

    sub.forward = forward
    with torch.no_grad(), torch.autocast("cpu", dtype=dtype):
        return m(x.clone()).float()


class Fp32RegionSemantics(unittest.TestCase):
    """An FP32 region casts the kept module's inputs, not every half value inside it."""

    def test_explicit_half_inside_a_kept_module(self):
        torch.manual_seed(9)
        x = torch.randn(8, 4)
        with tempfile.TemporaryDirectory() as d:
            probes = os.path.join(d, "p.pt")
            torch.save({"inputs": x}, probes)
            for fmt in ("pt", "pt2"):
                path = os.path.join(d, "outer." + fmt)
                if fmt == "pt":
                    torch.jit.script(Outer().eval()).save(path)
                else:
                    torch.export.save(torch.export.export(Outer().eval(), (x,)), path)
                out = os.path.join(d, fmt + ".json")
                rc, so, se = run_cli("run", "--model", path, "--probes", probes, "--precision", "fp16,bf16", "--no-db", "-q",
                                     "--keep-fp32", "inner", "--outputs", "--json", out, "--allow-nonfinite")
                self.assertIn(rc, (0, 1), se)
                with open(out) as f:
                    r = json.load(f)
                for p in r["passes"]:
                    if p["precision"] == "fp32":
                        continue
                    want = region_oracle(Outer(), x, DTYPES[p["precision"]], "inner")
                    got = torch.tensor(p["outputs"], dtype=torch.float32).reshape(want.shape)
                    self.assertTrue(torch.equal(got, want), f"{fmt} {p['precision']}: {got} vs {want}")


class ForwardReceiverName(unittest.TestCase):
    """The first argument of forward is the module whatever its name (a regression: `def
    forward(s, x)` was refused as "forward takes 2 (s, x)")."""

    def test_receiver_not_named_self(self):
        src = """
import torch
class M(torch.nn.Module):
    def __init__(this):
        super().__init__()
        torch.manual_seed(5)
        this.fc = torch.nn.Linear(4, 3)
    def forward(s, x):
        return s.fc(x)
class N(torch.nn.Module):
    def __init__(this):
        super().__init__()
        torch.manual_seed(6)
        this.fc = torch.nn.Linear(4, 3)
    def forward(this, x, y):
        return this.fc(x) + y.sum()
"""
        with tempfile.TemporaryDirectory() as d:
            mod = os.path.join(d, "recv.py")
            with open(mod, "w") as f:
                f.write(src)
            sys.path.insert(0, d)
            try:
                import recv  # noqa: E402  (a module file: TorchScript needs the source)
            finally:
                sys.path.remove(d)
            torch.manual_seed(7)
            x, y = torch.randn(6, 4), torch.randn(6, 2)
            for name, m, inputs in [("m", recv.M(), [x]), ("n", recv.N(), [x, y])]:
                path = os.path.join(d, name + ".pt")
                torch.jit.script(m.eval()).save(path)
                probes = os.path.join(d, name + "-probes.pt")
                torch.save({"inputs": inputs if len(inputs) > 1 else inputs[0]}, probes)
                out = os.path.join(d, name + ".json")
                rc, so, se = run_cli("run", "--model", path, "--probes", probes, "--precision", "bf16", "--no-db", "-q",
                                     "--outputs", "--json", out)
                self.assertIn(rc, (0, 1), se)
                with open(out) as f:
                    r = json.load(f)
                fp32 = next(p for p in r["passes"] if p["precision"] == "fp32")
                with torch.no_grad():
                    want = m(*inputs)
                got = torch.tensor(fp32["outputs"], dtype=torch.float32).reshape(want.shape)
                self.assertTrue(torch.equal(got, want), f"{name}: {got} vs {want}")


if __name__ == "__main__":
    unittest.main()
