# SPDX-License-Identifier: MIT
"""torch.export programs (.pt2): the programs are written here by Python torch (the same wheel)
with torch.export.export + torch.export.save, and the oracle is eager PyTorch on the original
nn.Module under torch.autocast("cpu", dtype) on the same inputs. ampscope runs the program
node by node through the dispatcher, so FP32, FP16 and BF16 outputs must be bitwise equal,
and decisions and flips the same."""
import copy
import json
import os
import tempfile
import unittest
import zipfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from common import as_float, comparison_of, pass_of, run_cli, run_json

SEED = 5
DEVICE = os.environ.get("AMPSCOPE_TEST_DEVICE", "cpu")  # tools/gpu-check.sh runs this with cuda
DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}



def edit_json(suffix, change):
    """A rewrite() edit that passes the JSON record ending in `suffix` through change(j)."""
    def edit(name, data):
        if name.endswith(suffix):
            j = json.loads(data)
            change(j)
            return json.dumps(j).encode()
        return data
    return edit

class Mlp(nn.Module):
    """Buffers (BatchNorm) and dropout."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(12, 32)
        self.bn = nn.BatchNorm1d(32)
        self.drop = nn.Dropout(0.2)
        self.fc2 = nn.Linear(32, 5)

    def forward(self, x):
        return self.fc2(self.drop(torch.relu(self.bn(self.fc1(x)))))


class Encoder(nn.Module):
    """A pre-norm transformer encoder block with scaled_dot_product_attention and LayerNorm."""

    def __init__(self):
        super().__init__()
        self.norm1 = nn.LayerNorm(16)
        self.qkv = nn.Linear(16, 48)
        self.proj = nn.Linear(16, 16)
        self.norm2 = nn.LayerNorm(16)
        self.up = nn.Linear(16, 64)
        self.down = nn.Linear(64, 16)
        self.head = nn.Linear(16, 4)

    def forward(self, x):
        n, t, _ = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(n, t, 3, 2, 8).permute(2, 0, 3, 1, 4).unbind(0)
        a = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(n, t, 16)
        x = x + self.proj(a)
        x = x + self.down(F.gelu(self.up(self.norm2(x))))
        return self.head(x.mean(1))


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.fc = nn.Linear(8, 3)

    def forward(self, x):
        return self.fc(F.adaptive_avg_pool2d(torch.relu(self.bn(self.conv(x))), 1).flatten(1))


class TwoHeads(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(12, 24)
        self.cls = nn.Linear(24, 4)
        self.reg = nn.Linear(24, 1)

    def forward(self, x):
        h = torch.tanh(self.body(x))
        return {"reg": self.reg(h), "cls": self.cls(h)}


class UserAutocast(nn.Module):
    """torch.autocast inside forward: a BF16 region, then an explicit FP32 region."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(12, 32)
        self.b = nn.Linear(32, 6)
        self.c = nn.Linear(6, 3)

    def forward(self, x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            h = torch.relu(self.a(x))
        with torch.autocast("cpu", enabled=False):
            h = self.b(h.float())
        return self.c(h)


def bits_equal(a, b):
    return a.shape == b.shape and np.array_equal(a.view(np.int32), b.view(np.int32))


def outputs_of(run, precision):
    return np.array([[as_float(v) for v in row] for row in pass_of(run, precision)["outputs"]], dtype=np.float32)


class ExportCase:
    """Exports `model` on `example`, saves probes, runs ampscope, and computes the eager oracle."""

    def __init__(self, tmp, name, model, probes, example=None, dynamic_batch=False, train=False, pick=None, labels=True):
        self.name, self.model, self.x, self.train = name, model, probes, train
        model.train(train)
        ex = example if example is not None else probes
        dyn = {"x": {0: torch.export.Dim("batch")}} if dynamic_batch else None
        ep = torch.export.export(model, (ex,), dynamic_shapes=dyn)
        self.path = os.path.join(tmp, name + ".pt2")
        torch.export.save(ep, self.path)
        self.batch = None if dynamic_batch else ex.shape[0]
        self.pick = pick or (lambda y: y)
        self.probe_path = os.path.join(tmp, name + "-probes.pt")
        data = {"inputs": probes, "ids": [f"s{i}" for i in range(len(probes))]}
        if labels:
            with torch.no_grad():
                model.eval()
                data["labels"] = self.pick(model(probes)).argmax(1)
                model.train(train)
        torch.save(data, self.probe_path)

    def eager(self, precision, keep_fp32=()):
        """Eager PyTorch as ampscope's passes run it: seeded, no grad, in batches of the exported size."""
        m = copy.deepcopy(self.model).to(DEVICE)  # train-mode BatchNorm updates its running statistics
        m.train(self.train)
        hooks = []
        for path in keep_fp32:  # autocast(enabled=False) around the module, inputs cast to FP32
            mod = m.get_submodule(path)

            def pre(_mod, args):
                ctx = torch.autocast(DEVICE.split(":")[0], enabled=False)  # the device's autocast
                ctx.__enter__()
                _mod._ampscope_ctx = ctx
                return tuple(a.float() if torch.is_tensor(a) and a.is_floating_point() else a for a in args)

            def post(_mod, _args, out):
                _mod._ampscope_ctx.__exit__(None, None, None)
                return out

            hooks += [mod.register_forward_pre_hook(pre), mod.register_forward_hook(post)]
        torch.manual_seed(SEED)
        outs = []
        bs = self.batch or len(self.x)
        with torch.no_grad():
            for b in range(0, len(self.x), bs):
                part = self.x[b:b + bs]
                n = len(part)
                if n < bs:  # ampscope pads a static batch with copies of its last row
                    part = torch.cat([part, part[-1:].expand(bs - n, *part.shape[1:])])
                part = part.to(DEVICE)
                if precision == "fp32":
                    y = self.pick(m(part))
                else:
                    with torch.autocast(DEVICE.split(":")[0], dtype=DTYPES[precision]):
                        y = self.pick(m(part))
                outs.append(y.float()[:n].cpu())
        for h in hooks:
            h.remove()
        return torch.cat(outs).numpy()

    def run(self, *extra):
        args = ["run", "--model", self.path, "--probes", self.probe_path, "--precision", "fp16,bf16", "--outputs",
                "--seed", SEED, "--device", DEVICE]
        if "--batch-size" not in extra:
            args += ["--batch-size", self.batch or len(self.x)]
        if self.train:
            args += ["--mode", "train"]
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "run.json")
            rc, so, se = run_cli(*args, *extra, "--json", out, "-q")
            if not os.path.exists(out):
                raise AssertionError(f"{self.name}: rc {rc}: {se}")
            with open(out) as f:
                return rc, json.load(f)


class ExportedPrograms(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        torch.manual_seed(0)
        cls.tmp = tempfile.TemporaryDirectory()
        t = cls.tmp.name
        g = torch.Generator().manual_seed(1)
        conv = ConvNet()
        with torch.no_grad():  # non-trivial running statistics, so eval and train mode differ
            conv.bn.running_mean.uniform_(-0.5, 0.5, generator=g)
            conv.bn.running_var.uniform_(0.5, 2.0, generator=g)
        cls.cases = {
            "mlp": ExportCase(t, "mlp", Mlp(), torch.randn(40, 12, generator=g) * 3, example=torch.randn(40, 12, generator=g)),
            "encoder": ExportCase(t, "encoder", Encoder(), torch.randn(11, 6, 16, generator=g),
                                  example=torch.randn(4, 6, 16, generator=g)),  # static batch 4: 11 = 4 + 4 + 3 (padded)
            "conv-eval": ExportCase(t, "conv-eval", conv, torch.randn(8, 3, 10, 10, generator=g)),
            "conv-train": ExportCase(t, "conv-train", copy.deepcopy(conv), torch.randn(8, 3, 10, 10, generator=g), train=True),
            "dynamic": ExportCase(t, "dynamic", Mlp().eval(), torch.randn(23, 12, generator=g),
                                  example=torch.randn(4, 12, generator=g), dynamic_batch=True),
            "two-outputs": ExportCase(t, "two-outputs", TwoHeads(), torch.randn(16, 12, generator=g),
                                      pick=lambda y: y["reg"]),
            "user-autocast": ExportCase(t, "user-autocast", UserAutocast(), torch.randn(16, 12, generator=g)),
        }
        cls.runs = {}
        for name, c in cls.cases.items():
            try:
                cls.runs[name] = c.run()
            except Exception as e:
                raise AssertionError(f"{name}: {e}")

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_outputs_bitwise_equal_to_eager(self):
        for name, case in self.cases.items():
            rc, run = self.runs[name]
            self.assertIn(rc, (0, 1), name)
            for p in ("fp32", "fp16", "bf16"):
                got, want = outputs_of(run, p), case.eager(p)
                self.assertTrue(bits_equal(got, want), f"{name} {p}: max |diff| {np.nanmax(np.abs(got - want))}")

    def test_the_precisions_differ(self):
        """The oracle separates the policies: AMP outputs are not the FP32 ones."""
        for name in ("mlp", "encoder", "conv-eval"):
            case = self.cases[name]
            self.assertFalse(bits_equal(case.eager("fp32"), case.eager("bf16")), name)
            self.assertFalse(bits_equal(case.eager("fp16"), case.eager("bf16")), name)

    def test_decisions_and_flips_equal_eager(self):
        for name, case in self.cases.items():
            rc, run = self.runs[name]
            ref = case.eager("fp32").argmax(1)
            for p in ("fp16", "bf16"):
                amp = case.eager(p).argmax(1)
                cmp = comparison_of(run, p)
                self.assertEqual(cmp["ref_decisions"], ref.tolist(), f"{name} {p}")
                self.assertEqual(cmp["amp_decisions"], amp.tolist(), f"{name} {p}")
                self.assertEqual([f["sample"] for f in cmp["flips"]], [f"s{i}" for i in np.nonzero(ref != amp)[0]])

    def test_train_and_eval_mode_differ(self):
        """One program (Mlp: BatchNorm with non-trivial running statistics, and dropout), one probe
        file, one seed, run with --mode train and with --mode eval: each run is bitwise eager in its
        mode (batch statistics and the seed's dropout mask; running statistics and no dropout), and
        the two eager modes differ, so a run whose --mode were ignored would fail one of them."""
        g = torch.Generator().manual_seed(3)
        model = Mlp()
        with torch.no_grad():
            model.bn.running_mean.uniform_(-0.5, 0.5, generator=g)
            model.bn.running_var.uniform_(0.5, 2.0, generator=g)
        with tempfile.TemporaryDirectory() as d:
            case = ExportCase(d, "modes", model, torch.randn(16, 12, generator=g) * 3, train=True)
            got, want = {}, {}
            for train in (True, False):
                case.train = train  # --mode train when set; eager in that mode
                rc, run = case.run()
                for p in ("fp32", "bf16"):
                    got[train, p], want[train, p] = outputs_of(run, p), case.eager(p)
        for p in ("fp32", "bf16"):
            self.assertFalse(bits_equal(want[True, p], want[False, p]), f"{p}: eager train and eval mode agree: cannot fail")
            for train in (True, False):
                mode = "train" if train else "eval"
                diff = np.nanmax(np.abs(got[train, p] - want[train, p]))
                self.assertTrue(bits_equal(got[train, p], want[train, p]), f"--mode {mode} {p}: max |diff| {diff} against eager")

    def test_mode_follows_the_run_not_the_export(self):
        """A program exported in train mode, run with --mode eval, equals eager .eval() (BatchNorm's
        'training' flag in the graph follows the run's mode, as module.eval() does)."""
        case = self.cases["conv-train"]
        args = ["run", "--model", case.path, "--probes", case.probe_path, "--precision", "bf16", "--outputs",
                "--seed", SEED, "--batch-size", len(case.x), "--device", DEVICE]
        rc, run = run_json(*args)
        case.train = False
        try:
            self.assertTrue(bits_equal(outputs_of(run, "fp32"), case.eager("fp32")))
            self.assertTrue(bits_equal(outputs_of(run, "bf16"), case.eager("bf16")))
        finally:
            case.train = True
        self.assertFalse(bits_equal(outputs_of(run, "fp32"), case.eager("fp32")), "eval and train mode agree: cannot fail")

    def test_identity(self):
        rc, run = self.runs["mlp"]
        m = run["model"]
        self.assertEqual(m["kind"], "torch.export")
        self.assertRegex(m["format"], r"^torch.export schema 8\.\d+, IR TRAINING$")
        self.assertEqual(len(m["sha256"]), 64)
        self.assertEqual(len(m["weights_sha256"]), 64)
        self.assertEqual(m["parameters"], sum(p.numel() for p in self.cases["mlp"].model.parameters()))

    def test_output_by_name_and_index(self):
        """--output picks the compared output of a dict-returning program and is recorded with the criteria."""
        case = self.cases["two-outputs"]
        rc, run = self.runs["two-outputs"]
        self.assertEqual(run["criteria"]["output"], "reg")  # default: the first tensor output (dict order)
        for flag, key in (("cls", "cls"), ("1", "cls"), ("0", "reg")):
            rc, run = case.run("--output", flag)
            want = case.eager("fp16") if key == "reg" else None
            if key == "cls":
                case.pick, saved = (lambda y: y["cls"]), case.pick
                try:
                    want = case.eager("fp16")
                finally:
                    case.pick = saved
            self.assertTrue(bits_equal(outputs_of(run, "fp16"), want), flag)
            self.assertEqual(run["criteria"]["output"], key)
        rc, out, err = run_cli("run", "--model", case.path, "--probes", case.probe_path, "--output", "logits", "-q")
        self.assertEqual(rc, 2, err)
        self.assertIn("reg, cls", err)

    def test_static_batch_is_said_and_kept(self):
        """--batch-size 11 on a program exported with batch 4: batches of 4, the last padded, and said."""
        case = self.cases["encoder"]
        rc, run = case.run("--batch-size", 11)
        self.assertTrue(any("static batch of 4" in w for w in run["warnings"]), run["warnings"])
        self.assertTrue(bits_equal(outputs_of(run, "bf16"), case.eager("bf16")))

    def test_keep_fp32_equals_eager_with_the_module_in_fp32(self):
        case = self.cases["encoder"]
        rc, run = case.run("--keep-fp32", "up")
        for p in ("fp16", "bf16"):
            got, want = outputs_of(run, p), case.eager(p, keep_fp32=("up",))
            self.assertTrue(bits_equal(got, want), f"{p}: max |diff| {np.nanmax(np.abs(got - want))}")
            self.assertFalse(bits_equal(got, case.eager(p)), "the region changed nothing: the test could not fail")

    def test_ops_per_node_with_module_paths(self):
        rc, run = self.runs["encoder"]
        layers = pass_of(run, "fp16")["layers"]
        modules = {l["module"] for l in layers}
        for path in ("norm1", "qkv", "proj", "up", "down", "head"):
            self.assertIn(path, modules)
        ops = {(l["module"], l["op"]) for l in layers}
        self.assertIn(("qkv", "aten::linear"), ops)
        self.assertIn(("", "aten::scaled_dot_product_attention"), ops)


class GradRegion(nn.Module):
    """torch.no_grad() inside forward: a wrap_with_set_grad_enabled region."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(12, 16)
        self.b = nn.Linear(16, 3)

    def forward(self, x):
        with torch.no_grad():
            h = torch.relu(self.a(x))
        return self.b(h)


class Branchy(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(12, 3)

    def forward(self, x):
        return torch.cond(x.sum() > 0, lambda v: self.a(v), lambda v: self.a(-v), (x,))


class MoreGraphs(unittest.TestCase):
    """Higher-order regions, decomposed programs and the op listing."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_set_grad_enabled_region(self):
        torch.manual_seed(0)
        case = ExportCase(self.tmp.name, "grad-region", GradRegion(), torch.randn(16, 12))
        with open(case.path, "rb") as f:
            self.assertIn(b"wrap_with_set_grad_enabled", f.read(), "the export did not make the region this test is about")
        rc, run = case.run()
        for p in ("fp32", "fp16", "bf16"):
            self.assertTrue(bits_equal(outputs_of(run, p), case.eager(p)), p)

    def test_cond_is_refused_by_name(self):
        path = os.path.join(self.tmp.name, "cond.pt2")
        probes = os.path.join(self.tmp.name, "cond-probes.pt")
        torch.export.save(torch.export.export(Branchy(), (torch.randn(4, 12),)), path)
        torch.save({"inputs": torch.randn(4, 12)}, probes)
        rc, out, err = run_cli("run", "--model", path, "--probes", probes, "-q")
        self.assertEqual(rc, 2, err)
        self.assertIn("higher-order op 'cond'", err)

    def test_decomposed_program_runs_and_says_so(self):
        torch.manual_seed(0)
        model = ConvNet().eval()
        x = torch.randn(8, 3, 10, 10)
        path = os.path.join(self.tmp.name, "core.pt2")
        probes = os.path.join(self.tmp.name, "core-probes.pt")
        torch.export.save(torch.export.export(model, (x,)).run_decompositions(), path)
        torch.save({"inputs": x}, probes)
        rc, run = run_json("run", "--model", path, "--probes", probes, "--outputs", "--batch-size", 8, "--precision", "bf16")
        self.assertTrue(any("decomposed" in w for w in run["warnings"]), run["warnings"])
        with torch.no_grad():
            want = model(x).numpy()
        self.assertTrue(np.allclose(outputs_of(run, "fp32"), want, atol=1e-5), "FP32 of the core-ATen graph differs from eager")
        self.assertIn("decomposed", run["model"]["format"])

    def test_ops_lists_the_programs_ops(self):
        torch.manual_seed(0)
        case = ExportCase(self.tmp.name, "ops-enc", Encoder(), torch.randn(4, 6, 16), labels=False)
        rc, out, err = run_cli("ops", "--model", case.path, "--probes", case.probe_path, "--json")
        self.assertEqual(rc, 0, err)
        ops = {o["op"]: o for o in json.loads(out)["ops"]}
        self.assertIn("aten::scaled_dot_product_attention", ops)
        self.assertIn("qkv", ops["aten::linear"]["modules"])
        self.assertEqual(ops["aten::linear"]["calls"], 5)
        self.assertNotIn("aten::cat", ops, "the runner's own padding must not be listed as the model's")


class TrainNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(12, 32)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(32, 3)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class TrainingOnAProgram(unittest.TestCase):
    """20 FP16 steps with the scaler on an exported program: loss, scale history and skipped steps
    equal torch.amp.GradScaler driving the eager module."""

    def test_twenty_steps_match_gradscaler(self):
        torch.manual_seed(0)
        net = TrainNet()
        g = torch.Generator().manual_seed(1)
        x, y = torch.randn(96, 12, generator=g) * 4, torch.randint(0, 3, (96,), generator=g)
        steps, batch, lr, init, interval = 20, 16, 0.05, 2.0 ** 24, 3
        with tempfile.TemporaryDirectory() as d:
            model, data = os.path.join(d, "net.pt2"), os.path.join(d, "data.pt")
            torch.export.save(torch.export.export(net, (x[:16],), dynamic_shapes={"x": {0: torch.export.Dim("batch")}}), model)
            torch.save({"inputs": x, "labels": y}, data)
            rc, out, err = run_cli("train", "--model", model, "--data", data, "--steps", steps, "--batch-size", batch,
                                   "--lr", lr, "--precision", "fp16", "--init-scale", init, "--growth-interval", interval,
                                   "--device", "cpu", "--json", "-", "-q")
            self.assertEqual(rc, 0, err)
            got = json.loads(out)
        ref, amp = copy.deepcopy(net).train(), copy.deepcopy(net).train()
        opt_r, opt_a = torch.optim.SGD(ref.parameters(), lr=lr), torch.optim.SGD(amp.parameters(), lr=lr)
        scaler = torch.amp.GradScaler("cpu", init_scale=init, growth_interval=interval)
        skipped = 0
        for step in range(steps):
            b = (step * batch) % len(x)
            xb, yb = x[b:b + batch], y[b:b + batch]
            opt_r.zero_grad()
            opt_a.zero_grad()
            loss_r = F.cross_entropy(ref(xb), yb)
            loss_r.backward()
            opt_r.step()
            scale = scaler.get_scale()
            with torch.autocast("cpu", dtype=torch.float16):
                loss_a = F.cross_entropy(amp(xb), yb)
            scaler.scale(loss_a).backward()
            scaler.unscale_(opt_a)
            found = sum(v.item() for v in scaler._per_optimizer_states[id(opt_a)]["found_inf_per_device"].values()) > 0
            scaler.step(opt_a)
            scaler.update()
            s = got["steps"][step]
            self.assertEqual(as_float(s["scale"]), scale, f"step {step}")
            self.assertEqual(s["skipped"], found, f"step {step}")
            self.assertEqual(as_float(s["loss_ref"]), loss_r.item(), f"step {step}")
            self.assertEqual(as_float(s["loss_amp"]), loss_a.item(), f"step {step}")
            skipped += found
        self.assertGreater(skipped, 0, "init scale 2^24 should make PyTorch skip steps")
        self.assertLess(skipped, steps)


class PlantedOverflow(unittest.TestCase):
    """The FP16 origin of a planted overflow names the module Python's forward hooks name."""

    def test_origin_module_path(self):
        class Planted(nn.Module):
            def __init__(self):
                super().__init__()
                self.inp = nn.Linear(8, 8)
                self.blocks = nn.Sequential(nn.Linear(8, 8), nn.Linear(8, 8))
                self.out = nn.Linear(8, 2)
                with torch.no_grad():  # blocks.0 sums its positive inputs; blocks.1 multiplies by 8 * 4000
                    self.blocks[0].weight.fill_(1.0)
                    self.blocks[0].bias.zero_()
                    self.blocks[1].weight.fill_(4000.0)

            def forward(self, x):
                return self.out(torch.tanh(self.blocks(torch.relu(self.inp(x)))) )

        torch.manual_seed(3)
        m = Planted().eval()
        x = torch.randn(6, 8) * 4
        with tempfile.TemporaryDirectory() as d:
            path, probes = os.path.join(d, "planted.pt2"), os.path.join(d, "p.pt")
            torch.export.save(torch.export.export(m, (x,)), path)
            torch.save({"inputs": x}, probes)
            # Python: the first module whose FP16 output is not finite (forward hooks, execution order)
            first = []
            hooks = [mod.register_forward_hook(lambda mod, a, o, name=name: first.append(name)
                                               if not first and not torch.isfinite(o).all() else None)
                     for name, mod in m.named_modules() if name and not list(mod.children())]
            with torch.no_grad(), torch.autocast("cpu", dtype=torch.float16):
                m(x)
            for h in hooks:
                h.remove()
            self.assertEqual(first, ["blocks.1"])
            rc, run = run_json("run", "--model", path, "--probes", probes, "--precision", "fp16", "--batch-size", 6)
            origin = pass_of(run, "fp16")["origin"]
            self.assertEqual(origin["module"], first[0])
            self.assertEqual(origin["op"], "aten::linear")


def rewrite(src, dst, edit):
    """Copies a .pt2 zip, passing each record's (name, bytes) through edit (None drops it)."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as zout:
        for info in zin.infolist():
            data = edit(info.filename, zin.read(info.filename))
            if data is not None:
                zout.writestr(info.filename, data)


class BadPrograms(unittest.TestCase):
    """Every refused input: exit 2 and a message naming the file and what was expected."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        torch.manual_seed(0)
        cls.model = TwoHeads()
        cls.good = os.path.join(cls.tmp.name, "good.pt2")
        torch.export.save(torch.export.export(cls.model, (torch.randn(4, 12),)), cls.good)
        cls.probes = os.path.join(cls.tmp.name, "p.pt")
        torch.save({"inputs": torch.randn(4, 12)}, cls.probes)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def path(self, name):
        return os.path.join(self.tmp.name, name)

    def refused(self, model, *expect, probes=None):
        rc, out, err = run_cli("run", "--model", model, "--probes", probes or self.probes, "-q")
        self.assertEqual(rc, 2, err)
        for e in expect:
            self.assertIn(e, err)
        return err

    def edit_json(self, suffix, change):
        return edit_json(suffix, change)

    def test_good_program_runs(self):
        rc, out, err = run_cli("run", "--model", self.good, "--probes", self.probes, "-q")
        self.assertIn(rc, (0, 1), err)

    def test_not_a_zip(self):
        p = self.path("text.pt2")
        with open(p, "w") as f:
            f.write("not a program\n" * 10)
        self.refused(p, p, "not a zip archive", "torch.export.save")

    def test_zip_without_a_program(self):
        p = self.path("other.pt2")
        rewrite(self.good, p, lambda n, d: None if "/models/" in n else d)
        self.refused(p, p, "neither a TorchScript file nor a torch.export program")

    def test_schema_major_version(self):
        p = self.path("v9.pt2")
        rewrite(self.good, p, self.edit_json("models/model.json", lambda j: j["schema_version"].update(major=9)))
        self.refused(p, p, "schema version 9.", "major version 8")

    def test_unregistered_op(self):
        p = self.path("custom.pt2")

        def change(j):
            j["graph_module"]["graph"]["nodes"][0]["target"] = "torch.ops.mylib.fancy.default"
        rewrite(self.good, p, self.edit_json("models/model.json", change))
        self.refused(p, p, "mylib::fancy", "custom op", "library must be loaded")

    def test_pickled_weights(self):
        p = self.path("pickled.pt2")

        def change(j):
            next(iter(j["config"].values()))["use_pickle"] = True
        rewrite(self.good, p, self.edit_json("weights_config.json", change))
        self.refused(p, p, "pickled (tensor-subclass) weight")

    def test_missing_weight_record(self):
        p = self.path("missing.pt2")
        rewrite(self.good, p, lambda n, d: None if n.endswith("weights/weight_0") else d)
        self.refused(p, p, "weight_0", "missing")

    def test_unknown_dtype_code(self):
        p = self.path("dtype.pt2")

        def change(j):
            next(iter(j["config"].values()))["tensor_meta"]["dtype"] = 99
        rewrite(self.good, p, self.edit_json("weights_config.json", change))
        self.refused(p, p, "dtype code 99")

    def test_probe_shape(self):
        bad = self.path("p5.pt")
        torch.save({"inputs": torch.randn(4, 5)}, bad)
        self.refused(self.good, bad, "[4, 5]", "[N, 12]", probes=bad)

    def test_aot_inductor_package(self):
        p = self.path("aoti.pt2")
        with zipfile.ZipFile(p, "w") as z:  # the layout torch._inductor.aoti_compile_and_package writes
            z.writestr("model/archive_format", "pt2")
            z.writestr("model/.data/version", "7\n")
            z.writestr("model/data/aotinductor/model/model.wrapper.so", b"\x7fELF")
        self.refused(p, p, "AOTInductor", "cannot be inspected")

    def test_weights_beyond_record(self):
        p = self.path("short.pt2")
        rewrite(self.good, p, lambda n, d: d[:4] if n.endswith("weights/weight_0") else d)
        self.refused(p, p, "needs more bytes than record")


if __name__ == "__main__":
    unittest.main()
