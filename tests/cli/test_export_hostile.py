# SPDX-License-Identifier: MIT
"""Hostile torch.export archives (.pt2): each is a real torch.export.save output with one thing
broken, written here in Python. `ampscope-cli run` must refuse each at load time with exit 2 and
a message naming the file and the field, never crash, hang, allocate without bound, or fail
later at run time (exit 3). The libFuzzer target tests/fuzz/fuzz_pt2.cpp covers the same reader."""
import copy
import json
import os
import tempfile
import unittest
import zipfile

import torch
import torch.nn as nn

from common import run_cli
from test_export import rewrite


class Region(nn.Module):
    """Two higher-order nodes (an autocast region and a no_grad region), each with a subgraph."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(3, 3)
        self.b = nn.Linear(3, 2)

    def forward(self, x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = self.a(x)
        with torch.no_grad():
            y = y + 1
        return self.b(y.float())


class Dynamic(nn.Module):
    """A dynamic batch: sym_size and a reshape taking as_sym_ints."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 2)

    def forward(self, x):
        return self.fc(x.reshape(x.shape[0], 6))


def nodes(j):
    return j["graph_module"]["graph"]["nodes"]


def node(j, target):
    return next(n for n in nodes(j) if n["target"].endswith(target))


class HostilePrograms(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        torch.manual_seed(0)
        cls.region = os.path.join(cls.tmp.name, "region.pt2")
        torch.export.save(torch.export.export(Region(), (torch.randn(4, 3),)), cls.region)
        cls.dynamic = os.path.join(cls.tmp.name, "dynamic.pt2")
        torch.export.save(torch.export.export(Dynamic(), (torch.randn(4, 2, 3),),
                                              dynamic_shapes=({0: torch.export.Dim("batch", min=2)},)), cls.dynamic)
        cls.probes = os.path.join(cls.tmp.name, "p3.pt")
        torch.save({"inputs": torch.randn(4, 3)}, cls.probes)
        cls.probes_dyn = os.path.join(cls.tmp.name, "p23.pt")
        torch.save({"inputs": torch.randn(5, 2, 3)}, cls.probes_dyn)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def edited(self, name, change, src=None, record="models/model.json", raw=False):
        """A copy of a good program with one record's JSON changed (or its bytes, with raw)."""
        dst = os.path.join(self.tmp.name, name)

        def edit(n, data):
            if not n.endswith(record):
                return data
            if raw:
                return change(data)
            j = json.loads(data)
            change(j)
            return json.dumps(j).encode()
        rewrite(src or self.region, dst, edit)
        return dst

    def refused(self, model, *expect, dynamic=False):
        rc, out, err = run_cli("run", "--model", model, "--probes", self.probes_dyn if dynamic else self.probes,
                               "--precision", "bf16", "-q")
        self.assertEqual(rc, 2, f"exit {rc}, expected 2 (refused at load time): {err}")
        self.assertIn(model, err)
        for e in expect:
            self.assertIn(e, err)
        self.assertNotIn("Traceback", err)
        return err

    def weights(self, change):
        return lambda j: change(j["config"])

    # ---- the good programs run ---------------------------------------------------------------
    def test_good_programs_run(self):
        for model, probes in ((self.region, self.probes), (self.dynamic, self.probes_dyn)):
            rc, out, err = run_cli("run", "--model", model, "--probes", probes, "--precision", "bf16", "-q")
            self.assertIn(rc, (0, 1), err)

    # ---- nesting: no stack overflow ----------------------------------------------------------
    def test_deeply_nested_json(self):
        def change(data):
            return data.replace(b'"metadata": {', b'"metadata": {"deep": ' + b"[" * 200000 + b"]" * 200000 + b", ", 1)
        p = self.edited("deep_json.pt2", change, raw=True)
        self.refused(p, "models/model.json", "nested deeper than")

    def test_deeply_nested_subgraphs(self):
        def change(j):
            hop = node(j, "wrap_with_autocast")
            inner = copy.deepcopy(hop)
            for _ in range(20):  # each level: a subgraph whose one node is the autocast region again
                wrapped = copy.deepcopy(hop)
                sub = wrapped["inputs"][4]["arg"]["as_graph"]["graph"]
                sub["nodes"] = [inner]
                inner = wrapped
            nodes(j)[0] = inner
        p = self.edited("deep_graphs.pt2", change)
        self.refused(p, "subgraphs nested deeper than 16")

    # ---- JSON of the wrong type --------------------------------------------------------------
    def test_string_where_the_nodes_list_is_expected(self):
        p = self.edited("nodes_string.pt2", lambda j: j["graph_module"]["graph"].update(nodes="linear"))
        self.refused(p, "models/model.json", "not a serialized ExportedProgram")

    def test_empty_input_spec_object(self):
        p = self.edited("empty_spec.pt2", lambda j: j["graph_module"]["signature"]["input_specs"].insert(0, {}))
        self.refused(p, "signature input_specs", "single-key object")

    def test_weights_config_of_the_wrong_type(self):
        p = self.edited("config_list.pt2", lambda j: j.update(config=[1, 2]), record="weights_config.json")
        self.refused(p, "model_weights_config.json", "object of FQN")

    def test_weights_config_malformed(self):
        p = self.edited("config_bad.pt2", lambda d: d[:-3], record="weights_config.json", raw=True)
        self.refused(p, "model_weights_config.json", "malformed JSON")

    # ---- tensor_meta ---------------------------------------------------------------------------
    def meta(self, name, **fields):
        def change(cfg):
            m = cfg["a.weight"]["tensor_meta"]
            m.update(fields)
        return self.edited(name, self.weights(change), record="weights_config.json")

    def test_sizes_overflowing_int64(self):
        big = {"as_int": 2**62}
        p = self.meta("overflow.pt2", sizes=[big, big, big, big], strides=[{"as_int": 0}] * 4)
        self.refused(p, "a.weight", "2^48")

    def test_strides_overflowing_int64(self):
        p = self.meta("stride_overflow.pt2", sizes=[{"as_int": 3}] * 4, strides=[{"as_int": 2**62}] * 4)
        self.refused(p, "a.weight", "2^48")

    def test_offset_beyond_the_record(self):
        p = self.meta("offset.pt2", storage_offset={"as_int": 2**62})
        self.refused(p, "a.weight", "2^48")

    def test_negative_size(self):
        p = self.meta("negative.pt2", sizes=[{"as_int": -3}, {"as_int": 3}])
        self.refused(p, "a.weight", "negative size")

    def test_dtype_wider_than_the_record(self):
        p = self.meta("double.pt2", dtype=8)  # float64 over a float32 record
        self.refused(p, "a.weight", "needs more bytes than record")

    def test_path_name_pointing_at_another_record(self):
        def change(cfg):
            cfg["a.weight"]["path_name"] = "../../models/model.json"
        p = self.edited("path.pt2", self.weights(change), record="weights_config.json")
        self.refused(p, "path_name", "no '/' or '..'")

    def test_parameter_without_weight(self):
        p = self.edited("no_weight.pt2", self.weights(lambda cfg: cfg.pop("b.bias")), record="weights_config.json")
        self.refused(p, "b.bias", "no weight record for this parameter")

    # ---- signature -----------------------------------------------------------------------------
    def test_duplicate_fqn(self):
        def change(j):
            specs = j["graph_module"]["signature"]["input_specs"]
            specs[1]["parameter"]["parameter_name"] = specs[0]["parameter"]["parameter_name"]
        p = self.edited("dup_fqn.pt2", change)
        self.refused(p, "a.weight", "named twice")

    def test_graph_inputs_not_matching_the_signature(self):
        p = self.edited("inputs.pt2", lambda j: j["graph_module"]["graph"]["inputs"].pop(0))
        self.refused(p, "graph inputs", "4 graph inputs for 5 signature input_specs")

    def test_graph_outputs_not_matching_the_signature(self):
        def change(j):
            j["graph_module"]["graph"]["outputs"].append(j["graph_module"]["graph"]["outputs"][0])
        p = self.edited("outputs_count.pt2", change)
        self.refused(p, "graph outputs", "2 graph outputs for 1 signature output_specs")

    def test_user_input_without_tensor_values(self):
        p = self.edited("no_tv.pt2", lambda j: j["graph_module"]["graph"]["tensor_values"].pop("x"))
        self.refused(p, "tensor_values 'x'", "no tensor_values entry")

    def test_enormous_static_input(self):
        def change(j):
            j["graph_module"]["graph"]["tensor_values"]["x"]["sizes"][0] = {"as_int": 2**40}
        p = self.edited("huge_input.pt2", change)
        self.refused(p, "tensor_values 'x'", "0 .. 2^31 expected")

    def test_buffer_mutation_of_no_buffer(self):
        def change(j):
            j["graph_module"]["signature"]["output_specs"][0] = {
                "buffer_mutation": {"arg": {"name": "linear_1"}, "buffer_name": "nowhere"}}
        p = self.edited("mutation.pt2", change)
        self.refused(p, "output_specs", "'nowhere', which is not a buffer input")

    # ---- names defined before use --------------------------------------------------------------
    def test_node_reading_an_undefined_value(self):
        p = self.edited("undefined.pt2", lambda j: node(j, "aten.linear.default")["inputs"][0]["arg"]["as_tensor"].update(name="ghost"))
        self.refused(p, "node 'linear_1'", "reads 'ghost', which no earlier node")

    def test_node_reading_a_value_defined_later(self):
        def change(j):
            node(j, "aten.to.dtype")["inputs"][0]["arg"]["as_tensor"]["name"] = "linear_1"
        p = self.edited("later.pt2", change)
        self.refused(p, "node 'to'", "reads 'linear_1'")

    def test_subgraph_reading_a_value_of_the_outer_graph(self):
        def change(j):
            sub = node(j, "wrap_with_set_grad_enabled")["inputs"][1]["arg"]["as_graph"]["graph"]
            sub["nodes"][0]["inputs"][0]["arg"]["as_tensor"]["name"] = "x"
        p = self.edited("outer.pt2", change)
        self.refused(p, "subgraph", "reads 'x'")

    def test_output_name_reused(self):
        p = self.edited("reused.pt2", lambda j: node(j, "aten.to.dtype")["outputs"][0]["as_tensor"].update(name="getitem"))
        self.refused(p, "node 'to'", "defines 'getitem' a second time")

    def test_output_of_an_unknown_name(self):
        p = self.edited("out_unknown.pt2", lambda j: j["graph_module"]["graph"]["outputs"][0]["as_tensor"].update(name="ghost"))
        self.refused(p, "graph outputs", "reads 'ghost'")

    def test_sym_ints_naming_an_undefined_value(self):
        def change(j):
            node(j, "aten.reshape.default")["inputs"][1]["arg"]["as_sym_ints"][0] = {"as_name": "s_ghost"}
        p = self.edited("sym_ghost.pt2", change, src=self.dynamic)
        self.refused(p, "node 'reshape'", "reads 's_ghost'", dynamic=True)

    def test_sym_ints_element_of_the_wrong_type(self):
        def change(j):
            node(j, "aten.reshape.default")["inputs"][1]["arg"]["as_sym_ints"][0] = 5
        p = self.edited("sym_bad.pt2", change, src=self.dynamic)
        self.refused(p, "node 'reshape'", "as_sym_ints element", dynamic=True)

    # ---- node arity and kinds --------------------------------------------------------------------
    def test_autocast_region_with_too_few_arguments(self):
        p = self.edited("hop_short.pt2", lambda j: node(j, "wrap_with_autocast").update(inputs=node(j, "wrap_with_autocast")["inputs"][:3]))
        self.refused(p, "wrap_with_autocast", "arguments (device_type: str")

    def test_autocast_region_without_subgraph(self):
        def change(j):
            node(j, "wrap_with_autocast")["inputs"][4]["arg"] = {"as_int": 1}
        p = self.edited("hop_nograph.pt2", change)
        self.refused(p, "wrap_with_autocast", "subgraph, operands")

    def test_autocast_region_with_a_bad_device(self):
        def change(j):
            node(j, "wrap_with_autocast")["inputs"][0]["arg"] = {"as_string": "toaster"}
        p = self.edited("hop_device.pt2", change)
        self.refused(p, "wrap_with_autocast", "'toaster' is not a device")

    def test_grad_region_with_too_few_operands(self):
        p = self.edited("hop_operands.pt2", lambda j: node(j, "wrap_with_set_grad_enabled")["inputs"].pop())
        self.refused(p, "wrap_with_set_grad_enabled", "0 operands to a subgraph of 1 inputs")

    def test_subgraph_passed_to_an_operator(self):
        def change(j):
            hop = node(j, "wrap_with_autocast")
            node(j, "aten.linear.default")["inputs"][2]["arg"] = hop["inputs"][4]["arg"]
        p = self.edited("op_graph.pt2", change)
        self.refused(p, "node 'linear_1'", "subgraph passed to an operator")

    def sym_node(self, target, args):
        def change(j):
            nodes(j).insert(0, {"target": target, "name": "s_bad", "metadata": {},
                                "inputs": [{"name": "", "arg": a, "kind": 1} for a in args],
                                "outputs": [{"as_sym_int": {"as_name": "s_bad"}}]})
        return change

    def test_sym_op_with_wrong_arity(self):
        p = self.edited("sym_arity.pt2", self.sym_node("_operator.add", [{"as_int": 1}]))
        self.refused(p, "node 's_bad'", "2 arguments expected, not 1")

    def test_sym_op_unknown(self):
        p = self.edited("sym_unknown.pt2", self.sym_node("math.factorial", [{"as_int": 1}]))  # math.floor is computed now
        self.refused(p, "node 's_bad'", "'math.factorial' is not supported")

    def test_sym_op_on_a_tensor(self):
        p = self.edited("sym_tensor.pt2", self.sym_node("_operator.neg", [{"as_tensor": {"name": "x"}}]))
        self.refused(p, "node 's_bad'", "symbolic ints, bools, floats or literals")

    def test_argument_not_in_the_schema(self):
        p = self.edited("kwarg.pt2", lambda j: node(j, "aten.linear.default")["inputs"].append(
            {"name": "sharpness", "arg": {"as_int": 3}, "kind": 2}))
        self.refused(p, "node 'linear_1'", "argument 'sharpness' is not in the schema of aten::linear")

    def test_empty_value_name(self):
        p = self.edited("empty_name.pt2", lambda j: node(j, "aten.to.dtype")["outputs"][0]["as_tensor"].update(name=""))
        self.refused(p, "node 'to'", "non-empty value name")


if __name__ == "__main__":
    unittest.main()
