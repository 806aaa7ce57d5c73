# SPDX-License-Identifier: MIT
"""Vision programs from the libraries people use (issue 20): torchvision mobilenet_v3_small (a CNN:
convolutions, BatchNorm, Hardswish, squeeze-excitation) and a timm ViT (patch embedding, LayerNorm,
scaled_dot_product_attention, GELU), random weights (no hub access), exported by torch.export here
and run by ampscope-cli. The oracle is the eager module of the same wheel under
torch.autocast("cpu", dtype): every output element bitwise equal in FP32, FP16 and BF16, in eval
mode and, for programs exported in train mode, in train mode (BatchNorm batch statistics, Dropout
and attention dropout drawn from the run's seed). Inputs are small (CPU FP16/BF16 are slow)."""
import copy
import json
import os
import tempfile
import unittest
import warnings

import numpy as np
import torch

from common import as_float, pass_of, run_cli

os.environ["HF_HUB_OFFLINE"] = "1"  # random weights only: never the hub
warnings.filterwarnings("ignore")
try:
    import timm
    import torchvision
except ImportError:  # tools/bootstrap.sh installs them into .venv (tests only)
    timm = torchvision = None

SEED = 7
DTYPES = {"fp32": None, "fp16": torch.float16, "bf16": torch.bfloat16}


def bits_equal(a, b):
    return a.shape == b.shape and np.array_equal(a.view(np.int32), b.view(np.int32))


class VisionCase:
    """A module exported in `mode` with a symbolic batch, its probe file, ampscope's run and the eager oracle."""

    def __init__(self, tmp, name, model, x, mode="eval"):
        self.name, self.x, self.mode = name, x, mode
        self.model = model.train(mode == "train")
        self.state = copy.deepcopy(model.state_dict())  # eager runs start from it, as every pass does
        ep = torch.export.export(self.model, (x,), dynamic_shapes={"x": {0: torch.export.Dim("batch")}})
        self.path = os.path.join(tmp, name + ".pt2")
        torch.export.save(ep, self.path)
        self.probes = os.path.join(tmp, name + "-probes.pt")
        torch.save({"inputs": x}, self.probes)
        out = os.path.join(tmp, name + ".json")
        self.rc, _, self.stderr = run_cli("run", "--model", self.path, "--probes", self.probes, "--precision", "fp16,bf16",
                                          "--outputs", "--device", "cpu", "--mode", mode, "--seed", SEED, "--batch-size",
                                          len(x), "--json", out, "-q")
        self.run = None
        if os.path.exists(out):
            with open(out) as f:
                self.run = json.load(f)
        self.cache = {}

    def eager(self, precision):
        if precision not in self.cache:
            self.cache[precision] = self.eager_run(precision)
        return self.cache[precision]

    def eager_run(self, precision):
        self.model.load_state_dict(self.state)
        torch.manual_seed(SEED)  # each pass starts the same RNG stream (dropout)
        with torch.no_grad():
            if DTYPES[precision] is None:
                y = self.model(self.x)
            else:
                with torch.autocast("cpu", dtype=DTYPES[precision]):
                    y = self.model(self.x)
        return y.float().numpy()

    def got(self, precision):
        rows = pass_of(self.run, precision)["outputs"]
        return np.array([[as_float(v) for v in r] for r in rows], dtype=np.float32)


@unittest.skipIf(timm is None, "torchvision and timm are not installed (tools/bootstrap.sh installs them)")
class VisionPrograms(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        t = cls.tmp.name
        torch.manual_seed(0)
        g = torch.Generator().manual_seed(1)
        img64, img32 = torch.randn(2, 3, 64, 64, generator=g), torch.randn(2, 3, 32, 32, generator=g)

        def vit(**kw):
            return timm.create_model("vit_tiny_patch16_224", pretrained=False, img_size=32, patch_size=8, num_classes=10, **kw)

        cls.cases = [
            VisionCase(t, "mobilenet_v3_small", torchvision.models.mobilenet_v3_small(num_classes=10), img64),
            VisionCase(t, "vit_tiny", vit(), img32),
            # exported and run in train mode: BatchNorm on batch statistics, Dropout (p=0.2) in the classifier
            VisionCase(t, "mobilenet_v3_small-train", torchvision.models.mobilenet_v3_small(num_classes=10),
                       torch.randn(4, 3, 64, 64, generator=g), mode="train"),
            # Dropout modules and the attention dropout scaled_dot_product_attention draws
            VisionCase(t, "vit_tiny-train", vit(drop_rate=0.1, proj_drop_rate=0.1, attn_drop_rate=0.1), img32, mode="train"),
        ]

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_runs(self):
        for c in self.cases:
            self.assertIn(c.rc, (0, 1), f"{c.name}: {c.stderr}")
            self.assertEqual(c.run["model"]["mode"], c.mode)

    def test_outputs_bitwise_equal_to_eager(self):
        for c in self.cases:
            for p in DTYPES:
                want, got = c.eager(p), c.got(p)
                self.assertEqual(got.shape, want.shape, f"{c.name} {p}")
                self.assertTrue(bits_equal(got, want), f"{c.name} {p}: max |diff| {np.nanmax(np.abs(got - want))}")

    def test_the_precisions_differ(self):
        """The oracle separates the policies (an AMP pass run in FP32 would fail the test above)."""
        for c in self.cases:
            fp32, fp16, bf16 = (c.eager(p) for p in DTYPES)
            self.assertFalse(bits_equal(fp32, fp16), c.name)
            self.assertFalse(bits_equal(fp32, bf16), c.name)
            self.assertFalse(bits_equal(fp16, bf16), c.name)

    def test_train_mode_draws_dropout(self):
        """The train-mode cases depend on the RNG stream: another seed changes the eager outputs, so the
        equality above checks that each pass starts the run's stream as eager does."""
        for c in self.cases:
            if c.mode != "train" or "vit" not in c.name:
                continue
            c.model.load_state_dict(c.state)
            torch.manual_seed(SEED + 1)
            with torch.no_grad():
                other = c.model(c.x).float().numpy()
            self.assertFalse(bits_equal(other, c.eager("fp32")), c.name)


if __name__ == "__main__":
    unittest.main()
