# SPDX-License-Identifier: MIT
"""train and replay --precision mxfp8 (issue 30) against torchao 0.18's MXFP8 training linear
(torchao.prototype.moe_training.mxfp8_linear.MXFP8Linear, kernel_preference EMULATED, its default
RCEIL block scales, and FLOOR, the MX specification's, with --mx-scaling floor) in Python torch
from the same wheel, under torch.autocast("cpu", torch.bfloat16) without a GradScaler.

MXFP8Linear quantizes all three GEMMs of a linear layer to E4M3 elements with one E8M0 scale per
32 along each GEMM's reduction dimension: forward input and weight along K; backward grad_output
along N with the weight along N (grad_input), grad_output and input along M (grad_weight).
torchao's real GEMM (torch._scaled_mm on MX operands) writes BF16; its emulation returns the
dequantized operands' FP32 product. ampscope takes the hardware's output dtype, so the oracle is
torchao's emulation with that one difference (HardwareOutput): the product of the FP32 operands
cast to BF16. The test shows the difference matters: unpatched torchao trains differently."""
import contextlib
import copy
import hashlib
import json
import os
import tempfile
import unittest
import warnings

import torch

from common import as_float, ce_step, file_order_batches, run_cli, small_mlp

warnings.filterwarnings("ignore")
import torchao.prototype.mx_formats.mx_tensor as mx_tensor  # noqa: E402
from torchao.prototype.moe_training.mxfp8_linear import MXFP8Linear  # noqa: E402
from torchao.prototype.mx_formats.config import ScaleCalculationMode  # noqa: E402
from torchao.quantization.quantize_.common.kernel_preference import KernelPreference  # noqa: E402

STEPS, BATCH, LR = 7, 32, 0.5  # 3 batches of 32: 7 steps wrap the data twice, unevenly


def mx_mlp():
    """64 -> 64 -> 32 (Linear, GELU, LayerNorm, Linear), 32 classes: every GEMM dimension of every
    training GEMM (K, N and the batch M) a multiple of 32, as torchao's MX casts require; two MX
    blocks a row of the first layer's input (one block a row would scale as a row does). The first
    layer ignores input column 0 (its weights there are 0): a large value there sets a row's
    scale without reaching the output (MxTrainCase's sample 69)."""
    torch.manual_seed(3)
    m = small_mlp(64, 64, 32).train()
    with torch.no_grad():
        m.fc1.weight[:, 0] = 0
    return m


def to_mxfp8_training(model, mode=ScaleCalculationMode.RCEIL):
    """`model` with every nn.Linear replaced by torchao's MXFP8Linear (the same weights)."""
    for name, mod in list(model.named_children()):
        if isinstance(mod, torch.nn.Linear):
            mx = MXFP8Linear(mod.in_features, mod.out_features, bias=mod.bias is not None,
                             kernel_preference=KernelPreference.EMULATED, scale_calculation_mode=mode)
            mx.load_state_dict(mod.state_dict())
            setattr(model, name, mx)
    return model


@contextlib.contextmanager
def hardware_output():
    """torchao's emulated MX GEMM as the hardware's: the dequantized operands' product in FP32
    (torchao dequantizes to each operand's original dtype; a BF16 grad_output beside an FP32
    weight would not multiply), written as BF16 as torch._scaled_mm(out_dtype=torch.bfloat16) in
    torchao's real-GEMM branch writes it. Bias-free: MXFP8Linear adds its bias after the GEMM."""
    orig = mx_tensor._addmm_mx_dispatch

    def emulated(a, b, aten_op, bias=None):
        assert bias is None
        return torch.mm(a.dequantize(torch.float32), b.dequantize(torch.float32)).to(torch.bfloat16)

    mx_tensor._addmm_mx_dispatch = emulated
    try:
        yield
    finally:
        mx_tensor._addmm_mx_dispatch = orig


def sha(net):
    return {n: hashlib.sha256(p.detach().contiguous().numpy().tobytes()).hexdigest() for n, p in net.named_parameters()}


class MxTrainCase(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.model = mx_mlp()
        cls.path = os.path.join(cls.tmp.name, "mlp.pt")
        torch.jit.script(cls.model).save(cls.path)
        g = torch.Generator().manual_seed(9)
        cls.x = torch.randn(96, 64, generator=g) * 3
        cls.x[4, 7] = 900.0  # one outlier: its MX block's other 31 values lose precision or flush
        # sample 69 (the third batch: the replayed step, the third training step): 1000 in column 0,
        # which fc1 ignores (its weights there are 0 and stay 0 while the batches before hold 0
        # there: no gradient), its first block otherwise 0, its second block about 1e-3. A scale
        # for the row (rowwise) puts the second block in E4M3's subnormals, one for each block (MX)
        # keeps it normal; only the second block reaches fc1's output, so rowwise and MXFP8 differ
        # there (their power-of-two scales elsewhere give the same values)
        cls.x[:64, 0] = 0.0
        cls.x[69, :32] = 0.0
        cls.x[69, 0] = 1000.0
        cls.x[69, 32:] = torch.randn(32, generator=g) * 1e-3
        cls.y = torch.randint(0, 32, (96,), generator=g)
        cls.data = os.path.join(cls.tmp.name, "data.pt")
        torch.save({"inputs": cls.x, "labels": cls.y}, cls.data)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def batches(self):
        return file_order_batches(self.x, self.y, STEPS, BATCH)

    def python_losses(self, convert=True, patched=True, amp=True, mode=ScaleCalculationMode.RCEIL):
        m = copy.deepcopy(self.model)
        if convert:
            m = to_mxfp8_training(m, mode)
        opt = torch.optim.SGD(m.parameters(), lr=LR)
        with hardware_output() if patched else contextlib.nullcontext():
            return [ce_step(m, opt, x, y, amp) for x, y in self.batches()]

    def ampscope(self, precision, *extra):
        out = os.path.join(self.tmp.name, precision + ".json")
        rc, so, se = run_cli("train", "--model", self.path, "--data", self.data, "--steps", STEPS, "--batch-size",
                             BATCH, "--lr", LR, "--precision", precision, "--no-scaler", "--loss", "ce", "--device",
                             "cpu", "--no-db", "--json", out, "-q", *extra)
        self.assertIn(rc, (0, 1), se)
        with open(out) as f:
            return json.load(f)


class Mxfp8Train(MxTrainCase):
    def test_every_step_bitwise_as_torchao(self):
        """Each step's loss is computed on the weights every step before it updated: equal losses
        at every step say equal forwards, gradients (E4M3 grad_output, MX along N and along M) and
        updates."""
        want = self.python_losses()
        got = self.ampscope("mxfp8")
        self.assertEqual(got["precision"], "mxfp8")
        self.assertEqual(got["mx_scaling"], "rceil")
        self.assertEqual([as_float(s["loss_amp"]) for s in got["steps"]], want)
        floor = self.python_losses(mode=ScaleCalculationMode.FLOOR)
        got = self.ampscope("mxfp8", "--mx-scaling", "floor")
        self.assertEqual(got["mx_scaling"], "floor")
        self.assertEqual([as_float(s["loss_amp"]) for s in got["steps"]], floor)
        self.assertNotEqual(floor, want, "FLOOR and RCEIL scales train differently")
        # the oracle tells the alternatives apart: torchao's FP32 emulated products, plain BF16
        # autocast, and ampscope's tensorwise fp8 all train differently
        self.assertNotEqual(self.python_losses(patched=False), want)
        self.assertNotEqual(self.python_losses(convert=False), want)
        fp8 = self.ampscope("fp8")
        self.assertNotEqual([as_float(s["loss_amp"]) for s in fp8["steps"]], want)
        # and torchao's rowwise recipe, whose power-of-two row scales equal the blocks' RCEIL scales
        # wherever a row's blocks share a range: sample 69's do not (with K = 32 nothing told them apart)
        self.assertNotEqual(self.rowwise_losses(), want)

    def rowwise_losses(self):
        """torchao's float8 rowwise training recipe (emulated) on the same steps."""
        import dataclasses
        from torchao.float8 import Float8LinearConfig, convert_to_float8_training
        cfg = dataclasses.replace(Float8LinearConfig.from_recipe_name("rowwise"), emulate=True)
        m = convert_to_float8_training(copy.deepcopy(self.model), config=cfg)
        opt = torch.optim.SGD(m.parameters(), lr=LR)
        return [ce_step(m, opt, x, y) for x, y in self.batches()]


    def test_mx_scaling_refused_for_other_precisions(self):
        rc, _, se = run_cli("train", "--model", self.path, "--data", self.data, "--steps", 1, "--precision", "fp8",
                            "--mx-scaling", "floor", "--no-db", "-q")
        self.assertEqual(rc, 2, se)
        self.assertIn("--mx-scaling", se)
        self.assertIn("applies to --precision mxfp8 only", se)


class Mxfp8Replay(MxTrainCase):
    """replay --precision mxfp8: a job trained with MXFP8Linear (Adam, BF16 autocast, no
    GradScaler) saves {"model", "optimizer"} after K steps, as a plain loop does; the replay of step
    K+1 gives torchao's AMP loss and every updated parameter bitwise, the reference side FP32."""

    K = 2

    def test_step_bitwise_as_torchao(self):
        batches = list(self.batches())[:self.K + 1]
        m = to_mxfp8_training(copy.deepcopy(self.model))
        opt = torch.optim.Adam(m.parameters(), lr=1e-2)
        with hardware_output():
            for x, y in batches[:-1]:
                ce_step(m, opt, x, y)
        ckpt = os.path.join(self.tmp.name, "ckpt.pt")
        state = (copy.deepcopy(m.state_dict()), copy.deepcopy(opt.state_dict()))
        torch.save({"model": state[0], "optimizer": state[1]}, ckpt)
        batch = os.path.join(self.tmp.name, "batch.pt")
        torch.save({"inputs": batches[-1][0], "labels": batches[-1][1]}, batch)
        want = {}
        for side, amp in (("amp", True), ("ref", False)):
            net = copy.deepcopy(self.model)
            net.load_state_dict(state[0])
            if amp:
                net = to_mxfp8_training(net)
            o = torch.optim.Adam(net.parameters(), lr=1e-2)
            o.load_state_dict(copy.deepcopy(state[1]))
            with hardware_output():
                loss = ce_step(net, o, *batches[-1], amp=amp)
            want[side] = (loss, sha(net))
        out = os.path.join(self.tmp.name, "replay.json")
        rc, so, se = run_cli("replay", "--model", self.path, "--checkpoint", ckpt, "--batch", batch, "--precision",
                             "mxfp8", "--optimizer", "adam", "--json", out, "-q")
        self.assertIn(rc, (0, 1), se)
        with open(out) as f:
            got = json.load(f)
        self.assertEqual(got["precision"], "mxfp8")
        last = got["steps"][-1]
        self.assertEqual(as_float(last["loss_amp"]), want["amp"][0])
        # the step tells MXFP8 from rowwise FP8 (sample 69 in the replayed batch)
        rc, so, se = run_cli("replay", "--model", self.path, "--checkpoint", ckpt, "--batch", batch, "--precision",
                             "fp8-rowwise", "--optimizer", "adam", "--json", "-", "-q")
        self.assertIn(rc, (0, 1), se)
        self.assertNotEqual(as_float(json.loads(so)["steps"][-1]["loss_amp"]), want["amp"][0])
        self.assertEqual(as_float(last["loss_ref"]), want["ref"][0])
        for p in last["params"]:
            self.assertEqual(p["sha256_amp"], want["amp"][1][p["name"]], p["name"])
            self.assertEqual(p["sha256_ref"], want["ref"][1][p["name"]], p["name"])


class KeepBf16(MxTrainCase):
    """train / replay --keep-bf16 fc2: the module's linear layers stay in BF16 autocast, out of the FP8
    recipe, as torchao's module_filter_fn leaves a module unconverted (convert_to_float8_training) or
    a job converts only some linears to MXFP8Linear."""

    def float8_losses(self, keep_fc2):
        from torchao.float8 import Float8LinearConfig, convert_to_float8_training
        m = convert_to_float8_training(copy.deepcopy(self.model), config=Float8LinearConfig(emulate=True),
                                       module_filter_fn=(lambda mod, fqn: fqn != "fc2") if keep_fc2 else None)
        opt = torch.optim.SGD(m.parameters(), lr=LR)
        return [ce_step(m, opt, x, y) for x, y in self.batches()]

    def mx_losses(self):
        m = copy.deepcopy(self.model)
        m.fc1 = to_mxfp8_training(torch.nn.Sequential(m.fc1))[0]  # fc2 left an nn.Linear
        opt = torch.optim.SGD(m.parameters(), lr=LR)
        with hardware_output():
            return [ce_step(m, opt, x, y) for x, y in self.batches()]

    def test_train_leaves_the_module_out_as_torchaos_filter(self):
        want = self.float8_losses(keep_fc2=True)
        got = self.ampscope("fp8", "--keep-bf16", "fc2")
        self.assertEqual(got["keep_bf16"], ["fc2"])
        self.assertEqual([as_float(s["loss_amp"]) for s in got["steps"]], want)
        self.assertNotEqual(self.float8_losses(keep_fc2=False), want)  # fc2 in FP8 trains differently
        got = self.ampscope("mxfp8", "--keep-bf16", "fc2")
        self.assertEqual([as_float(s["loss_amp"]) for s in got["steps"]], self.mx_losses())

    def test_replay_keeps_the_jobs_filter(self):
        """A job that left fc2 out of MXFP8: replayed with --keep-bf16 fc2, its step bitwise; without it,
        fc2's GEMMs go through FP8 and the loss differs."""
        batches = list(self.batches())[:2]
        m = copy.deepcopy(self.model)
        m.fc1 = to_mxfp8_training(torch.nn.Sequential(m.fc1))[0]
        opt = torch.optim.Adam(m.parameters(), lr=1e-2)
        with hardware_output():
            ce_step(m, opt, *batches[0])
        ckpt = os.path.join(self.tmp.name, "keep-ckpt.pt")
        torch.save({"model": m.state_dict(), "optimizer": opt.state_dict()}, ckpt)
        with hardware_output():
            want = ce_step(m, opt, *batches[1])
        batch = os.path.join(self.tmp.name, "keep-batch.pt")
        torch.save({"inputs": batches[1][0], "labels": batches[1][1]}, batch)
        losses = {}
        advice = self.advice_file(["fc2"])
        for extra in ((), ("--keep-bf16", "fc2"), ("--keep-bf16-file", advice)):
            out = os.path.join(self.tmp.name, "keep-replay.json")
            rc, so, se = run_cli("replay", "--model", self.path, "--checkpoint", ckpt, "--batch", batch, "--precision",
                                 "mxfp8", "--optimizer", "adam", "--json", out, "-q", *extra)
            self.assertIn(rc, (0, 1), se)
            with open(out) as f:
                got = json.load(f)
            self.assertEqual(got["remedies"]["keep_bf16"], ["fc2"] if extra else [])
            losses[extra] = as_float(got["steps"][-1]["loss_amp"])
        self.assertEqual(losses[("--keep-bf16", "fc2")], want)
        self.assertEqual(losses[("--keep-bf16-file", advice)], want)
        self.assertNotEqual(losses[()], want)

    def advice_file(self, modules, outcome="found"):
        """The JSON `advise --precision fp8...` writes, as far as --keep-bf16-file reads it."""
        path = os.path.join(self.tmp.name, f"advice-{outcome}.json")
        with open(path, "w") as f:
            json.dump({"precision": "fp8", "outcome": outcome, "keep_bf16": modules}, f)
        return path

    def test_train_takes_the_set_from_a_file(self):
        """--keep-bf16-file: the advise JSON's keep_bf16 list or one glob a line, after the flags' globs;
        the same training as the flag (torchao's filter); a glob of the file that fails names the file."""
        want = self.float8_losses(keep_fc2=True)
        text = os.path.join(self.tmp.name, "bf16.txt")
        with open(text, "w") as f:
            f.write("# kept out of FP8\nfc2\n")
        for source in (self.advice_file(["fc2"]), text):
            got = self.ampscope("fp8", "--keep-bf16-file", source)
            self.assertEqual(got["keep_bf16"], ["fc2"])
            self.assertEqual([as_float(s["loss_amp"]) for s in got["steps"]], want)
        with open(text, "w") as f:
            f.write("head\n")
        for args, said in ((("--precision", "fp8", "--keep-bf16-file", text), "'head' matches no module"),
                           (("--precision", "fp8", "--keep-bf16", "fc2", "--keep-bf16-file", text), "'head'"),
                           (("--precision", "bf16", "--keep-bf16-file", text), "no FP8 pass"),
                           (("--precision", "fp8", "--keep-bf16-file", self.advice_file(["fc2"], "unverified")),
                            "unverified"),
                           (("--precision", "fp8", "--keep-bf16-file", text, "--json", text), "refusing to overwrite")):
            rc, _, se = run_cli("train", "--model", self.path, "--data", self.data, "--steps", 1, "--no-db", "-q", *args)
            self.assertEqual(rc, 2, se)
            self.assertIn(said, se)
            self.assertTrue(se.startswith("ampscope-cli: error: " + args[-1] + ":"), se)  # the file named
            self.assertNotIn("--keep-bf16:", se)  # the file is named, not the flag
        got = self.ampscope("fp8", "--allow-unverified", "--keep-bf16-file", self.advice_file(["fc2"], "unverified"))
        self.assertEqual(got["keep_bf16"], ["fc2"])
        # a flag's glob that fails beside a good file: the flag is named, not the file
        rc, _, se = run_cli("train", "--model", self.path, "--data", self.data, "--steps", 1, "--no-db", "-q",
                            "--precision", "fp8", "--keep-bf16", "head", "--keep-bf16-file", self.advice_file(["fc2"]))
        self.assertEqual(rc, 2, se)
        self.assertTrue(se.startswith("ampscope-cli: error: --keep-bf16"), se)
        self.assertIn("'head' matches no module", se)

    def test_refused_by_flag_without_an_fp8_recipe_or_a_module(self):
        for precision, glob, said in (("bf16", "fc2", "no FP8 pass"), ("fp8", "head", "head")):
            rc, _, se = run_cli("train", "--model", self.path, "--data", self.data, "--steps", 1, "--precision",
                                precision, "--keep-bf16", glob, "--no-db", "-q")
            self.assertEqual(rc, 2, se)
            self.assertIn("--keep-bf16", se)
            self.assertIn(said, se)


if __name__ == "__main__":
    unittest.main()
