# SPDX-License-Identifier: MIT
"""The simulated FP8 and block-scaled passes on real programs (issue 30), bitwise against torchao
0.18: a timm Vision Transformer and Hugging Face language models (GPT-2 and LLaMA built from
configurations: random weights, no hub access), exported by torch.export and run by
`ampscope-cli run --precision fp8,fp8-rowwise,mxfp8,nvfp4 --outputs`, inspected and with
--no-inspect (where a pass quantizes without computing statistics). The oracle is the eager
module as torchao converts it, under torch.autocast("cpu", torch.bfloat16):
- fp8 / fp8-rowwise: convert_to_float8_training with Float8LinearConfig(emulate=True) (tensorwise)
  or the "rowwise" recipe with emulate=True;
- mxfp8 / nvfp4: every nn.Linear replaced by test_fp8.BlockScaledLinear (torchao's MXTensor /
  NVFP4Tensor operands through its emulated GEMM).
torchao converts nn.Linear modules only: GPT-2's attention and MLP are transformers' Conv1D (an
addmm), so there only lm_head is quantized, in torchao and in ampscope alike; LLaMA's projections
and the ViT's qkv, proj, fc1, fc2 and head are all linear."""
import copy
import dataclasses
import os
import tempfile
import unittest
import warnings

import numpy as np
import torch

from common import as_float, pass_of, run_json

warnings.filterwarnings("ignore")
import timm  # noqa: E402
import transformers  # noqa: E402
from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM  # noqa: E402
from torchao.float8 import Float8LinearConfig, convert_to_float8_training  # noqa: E402

from test_fp8 import BlockScaledLinear, bits_equal, mx_quant, nvfp4_quant  # noqa: E402

transformers.logging.set_verbosity_error()
RECIPES = ("fp8", "fp8-rowwise", "mxfp8", "nvfp4")


def torchao_model(model, recipe):
    """A deep copy of `model` as torchao runs `recipe`: every nn.Linear converted, at any depth."""
    m = copy.deepcopy(model)
    if recipe in ("fp8", "fp8-rowwise"):
        cfg = Float8LinearConfig(emulate=True) if recipe == "fp8" else dataclasses.replace(
            Float8LinearConfig.from_recipe_name("rowwise"), emulate=True)
        return convert_to_float8_training(m, config=cfg)
    quant = mx_quant if recipe == "mxfp8" else nvfp4_quant
    for name, mod in list(m.named_modules()):
        if isinstance(mod, torch.nn.Linear):
            parent, _, leaf = name.rpartition(".")
            setattr(m.get_submodule(parent) if parent else m, leaf, BlockScaledLinear(mod, quant))
    return m


def linear_count(model, recipe):
    m = torchao_model(model, recipe)
    return sum(type(x).__name__ in ("Float8Linear", "BlockScaledLinear") for x in m.modules())


class Program:
    """`model` (eval) exported with `inputs` (positional, or keyword for the language models), its
    probe file, torchao's outputs per recipe and ampscope's run JSON."""

    def __init__(self, tmp, name, model, inputs, keywords=()):
        self.name, self.model, self.inputs, self.keywords = name, model.eval(), inputs, keywords
        args, kw = ((), dict(zip(keywords, inputs))) if keywords else (tuple(inputs), {})
        self.path = os.path.join(tmp, name + ".pt2")
        torch.export.save(torch.export.export(self.model, args, kw), self.path)
        self.probes = os.path.join(tmp, name + "-probes.pt")
        torch.save({"inputs": inputs if len(inputs) > 1 else inputs[0],
                    "ids": [f"s{i}" for i in range(len(inputs[0]))]}, self.probes)
        self.want = {r: self.torchao(r) for r in RECIPES}
        args = ["run", "--model", self.path, "--probes", self.probes, "--precision", ",".join(RECIPES), "--batch-size",
                len(inputs[0]), "--outputs", "--no-db", "--allow-nonfinite"]
        self.result = run_json(*args)[1]  # inspected: each operand's statistics computed beside its quantization
        self.plain = run_json(*args, "--no-inspect")[1]  # the quantization alone (small operands: fused loops)

    def torchao(self, recipe):
        m = torchao_model(self.model, recipe)
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
            y = m(**dict(zip(self.keywords, self.inputs))) if self.keywords else m(*self.inputs)
        y = y.logits if hasattr(y, "logits") else y
        return y.float().numpy()

    def got(self, recipe, result=None):
        rows = pass_of(result or self.result, recipe)["outputs"]
        return np.array([[as_float(v) for v in r] for r in rows], dtype=np.float32).reshape(self.want[recipe].shape)


class Fp8Programs(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        d = cls.tmp.name
        torch.manual_seed(0)
        vit = timm.create_model("vit_tiny_patch16_224", pretrained=False, img_size=32, patch_size=8, depth=2,
                                num_classes=10)
        images = torch.randn(6, 3, 32, 32)
        images[0] *= 40  # a large image: the tensorwise scale of the first linear follows it
        gpt2 = GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=128, n_head=4, vocab_size=256, n_positions=64, use_cache=False))
        llama = LlamaForCausalLM(LlamaConfig(hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                                             num_attention_heads=4, num_key_value_heads=2, vocab_size=256,
                                             max_position_embeddings=64, use_cache=False))
        g = torch.Generator().manual_seed(1)
        ids = torch.randint(0, 256, (4, 16), generator=g)
        mask = torch.ones_like(ids)
        mask[1, 12:] = 0
        cls.programs = [Program(d, "vit", vit, [images]),
                        Program(d, "gpt2", gpt2, [ids, mask], ("input_ids", "attention_mask")),
                        Program(d, "llama", llama, [ids, mask], ("input_ids", "attention_mask"))]

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_outputs_bitwise_as_torchao(self):
        for p in self.programs:
            for r in RECIPES:
                for how, result in (("inspected", p.result), ("--no-inspect", p.plain)):
                    got, want = p.got(r, result), p.want[r]
                    self.assertTrue(bits_equal(got, want),
                                    f"{p.name} {r} {how}: max |diff| {np.nanmax(np.abs(got - want))}")

    def test_the_recipes_quantize_every_linear_and_differ(self):
        for p in self.programs:
            with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
                y = p.model(**dict(zip(p.keywords, p.inputs))) if p.keywords else p.model(*p.inputs)
            bf16 = (y.logits if hasattr(y, "logits") else y).float().numpy()
            outs = [p.want[r] for r in RECIPES]
            for i, r in enumerate(RECIPES):
                self.assertFalse(bits_equal(outs[i], bf16), f"{p.name} {r}: the recipe changed nothing")
                for j in range(i):
                    self.assertFalse(bits_equal(outs[i], outs[j]), f"{p.name}: {RECIPES[j]} and {r}")
            # every linear torchao converts is one ampscope quantized: one input and one weight operand each
            operands = {(o["module"], o["operand"]) for o in pass_of(p.result, "fp8")["fp8_operands"]}
            self.assertEqual(len(operands), 2 * linear_count(p.model, "fp8"), p.name)
        self.assertEqual(linear_count(self.programs[1].model, "fp8"), 1, "GPT-2: lm_head alone is an nn.Linear")

    def test_a_model_whose_gemms_are_not_linear_layers_is_said(self):
        """GPT-2's Conv1D layers (2 blocks x 4, each an addmm) stay out of FP8, as in torchao: the run
        says how many matrix products ran unquantized beside its one quantized linear call."""
        conv1d = sum(type(m).__name__ == "Conv1D" for m in self.programs[1].model.modules())
        self.assertEqual(conv1d, 8)
        for p in self.programs:
            said = [w for w in p.result["warnings"] if "ran unquantized in BF16" in w]
            if p.name != "gpt2":
                self.assertEqual(said, [], p.name)  # every GEMM with a weight is a linear layer
                continue
            self.assertEqual(len(said), 1, p.result["warnings"])  # once, for every recipe
            self.assertIn(f"FP8 passes (fp8 first): {conv1d} matrix products of the model ran unquantized in BF16 "
                          f"(aten::addmm {conv1d}) beside 1 quantized linear-layer calls", said[0])


if __name__ == "__main__":
    unittest.main()
