#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Writes the checked-in seed corpus of the fuzz targets (tests/fuzz/corpus/TARGET/).

    .venv/bin/python tests/fuzz/make_corpus.py [--make-db build-fuzz/tests/fuzz/fuzz_make_db]

.pt seeds are torch.save dicts written by the Python torch of .venv (the same wheel whose
LibTorch the engine links); CSV and criteria JSON seeds are written out below; database,
.ampscope and layer-chunk seeds come from fuzz_make_db (tests/fuzz/make_db.cpp, built by
`cmake --build build-fuzz --target fuzz_make_db`) and from the released schema layouts in
tests/fixtures/store (compacted). Seeds are small on purpose: the fuzzer
mutates them, and the whole corpus stays far below 2 MB. Files whose name starts with
`regress_` reproduce defects found before; they must be refused cleanly.
"""
import argparse
import io
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CORPUS = os.path.join(HERE, "corpus")


def write(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    mode = "wb" if isinstance(data, bytes) else "w"
    with open(os.path.join(d, name), mode, **({} if mode == "wb" else {"newline": ""})) as f:
        f.write(data)


def pt_seeds():
    import torch

    torch.manual_seed(0)

    def save(name, obj, **kw):
        buf = io.BytesIO()
        torch.save(obj, buf, **kw)
        write("probe_pt", name, buf.getvalue())

    save("inputs.pt", {"inputs": torch.randn(4, 3)})
    save("labels_ids_tags.pt", {"inputs": torch.randn(3, 2, 2), "labels": torch.tensor([0, 1, 2]),
                                "ids": ["a", "b", "c"], "tags": ["ordinary", "edge", "boundary"]})
    save("two_inputs_targets.pt", {"inputs": [torch.randn(2, 3), torch.randn(2, 1)], "targets": torch.randn(2, 2)})
    save("tuple_inputs_half.pt", {"inputs": (torch.randn(2, 4).half(),), "ids": ("x", "y")})
    save("bf16_noncontiguous.pt", {"inputs": torch.randn(3, 2).bfloat16().t(), "labels": torch.tensor([1, 0], dtype=torch.int32)})
    save("int_tokens.pt", {"inputs": torch.randint(0, 100, (2, 5)), "targets": torch.randn(2).double()})
    save("shared_storage.pt", {"inputs": torch.arange(12.0).view(3, 4)[1:], "targets": torch.arange(12.0)[:2]})
    save("bad_root_list.pt", [torch.randn(2, 2)])
    save("bad_unknown_key.pt", {"inputs": torch.randn(1, 1), "weights": torch.randn(1)})
    save("bad_scalar_input.pt", {"inputs": torch.tensor(1.0)})
    save("bad_ids.pt", {"inputs": torch.randn(2, 1), "ids": ["same", "same"], "tags": [1, 2]})
    save("bad_legacy_format.pt", {"inputs": torch.randn(1, 2)}, _use_new_zipfile_serialization=False)
    # a 1-element storage viewed as 4.3e9 samples: 17 GB once materialised
    save("regress_expand_17gb.pt", {"inputs": torch.zeros(1).expand(4_300_000_000)})


CSV = {
    "plain.csv": "x0,x1,x2\n0.5,-1,2e3\n1,2,3\n",
    "id_tag_label.csv": "id,tag,x0,x1,label\ns0,ordinary,0.1,0.2,0\ns1,edge,65504,-1e-7,1\ns2,,0,0,2\n",
    "targets_crlf.csv": "id,a,b,target,target_2\r\nr1,1,2,0.5,1.5\r\nr2,3,4,nan,-inf\r\n",
    "quoted.csv": 'id,"x,0",x1\n"a ""quoted"" id",1,2\n"multi\nline",3 ,4\t\n',
    "bad_fields.csv": "x0,x1\n1\n",
    "bad_number.csv": "x0,label\nabc,1\n1,-1\n",
    "bad_header_only.csv": "id,tag,label\n",
    "bad_quote.csv": 'x0\n"unterminated\n',
    "bad_duplicate_ids.csv": "id,x\na,1\na,2\n",
}

CRITERIA = {
    "all_keys.json": '{"atol": 0.001, "rtol": 0.01, "tie_tolerance": 1e-6, "tie_rule": "abstain", "max_flips": 2,\n'
                     ' "quality_metric": "accuracy", "quality_threshold": 0.5, "allow_nonfinite": false,\n'
                     ' "fixed_at": "2025-01-02T03:04:05.678Z",\n'
                     ' "heads": [{"name": "logits", "begin": 0, "end": 2, "atol": 0.01}, {"begin": 2, "end": 3}]}\n',
    "empty.json": "{}",
    "mse.json": '{"quality_metric": "mse", "quality_threshold": 1e308, "tie_rule": "lowest-index"}',
    "max_abs_error.json": '{"quality_metric": "max_abs_error", "atol": 0, "rtol": 0, "max_flips": 0}',
    "bad_types.json": '{"atol": "1e-3", "max_flips": 1.5, "heads": {"begin": 0}}',
    "bad_negative.json": '{"max_flips": -1, "heads": [{"begin": 5, "end": -3, "rtol": -1}], "tie_tolerance": -2}',
    "bad_key.json": '{"atol": 1e-3, "unknown": true}',
    "bad_not_object.json": "[1, 2, 3]",
    "bad_syntax.json": '{"atol": 1e-3,',
}


def db_seeds(make_db):
    if not os.path.exists(make_db):
        sys.exit(f"make_corpus: {make_db} missing; build it: cmake --build build-fuzz --target fuzz_make_db")
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1")
        subprocess.run([make_db, tmp], check=True, env=env)

        def copy(target, name, as_name=None):
            with open(os.path.join(tmp, name), "rb") as f:
                write(target, as_name or name, f.read())

        # (.db rather than .sqlite: *.sqlite is git-ignored)
        for name in ("runs.sqlite", "runs-v3.sqlite", "empty.sqlite"):
            copy("store", name, name.replace(".sqlite", ".db"))
        copy("store", "export.ampscope")
        copy("import", "export.ampscope")
        copy("import", "runs-v3.sqlite", "runs-v3.ampscope")
        copy("import", "runs.sqlite", "bad_training_run.ampscope")  # holds a training run: refused
        write("import", "bad_not_sqlite.ampscope", b"SQLite format 2\0" + bytes(100))
        copy("layer_chunk", "layers.chunk")
        write("layer_chunk", "bad_truncated.chunk", open(os.path.join(tmp, "layers.chunk"), "rb").read()[:40])


def fixture_seeds():
    """The released schema layouts of tests/fixtures/store (every migration path), compacted to
    512-byte pages: mutating 130 KB files would slow the fuzzer for nothing."""
    import sqlite3

    src = os.path.join(ROOT, "tests", "fixtures", "store")
    picks = {"store": ["v2-4fe01ea.db", "v2-236a746.db", "v2-7376c9d.db", "v3-from-4fe01ea.db", "v4-289f193.db"],
             "import": ["v2-7376c9d.ampscope", "v3-a19053a.ampscope", "v4-289f193.ampscope"]}
    with tempfile.TemporaryDirectory() as tmp:
        for target, names in picks.items():
            for name in names:
                path = os.path.join(tmp, name)
                shutil.copyfile(os.path.join(src, name), path)
                db = sqlite3.connect(path)
                db.execute("PRAGMA journal_mode=DELETE")
                db.execute("PRAGMA page_size=512")
                db.execute("VACUUM")
                db.close()
                with open(path, "rb") as f:
                    write(target, "fixture-" + name, f.read())


def pt2_seeds():
    """torch.export.save archives: plain layers with a buffer, an autocast region (a subgraph),
    a dynamic batch (symbolic sizes); the sample inputs are dropped to keep the seeds small."""
    import torch
    import torch.nn as nn
    import zipfile

    class Plain(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 2)
            self.bn = nn.BatchNorm1d(2)

        def forward(self, x):
            return self.bn(torch.relu(self.fc(x))).softmax(-1)

    class Region(nn.Module):
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
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(6, 2)

        def forward(self, x):
            return self.fc(x.reshape(x.shape[0], 6))

    torch.manual_seed(0)
    programs = {
        "plain.pt2": torch.export.export(Plain().eval(), (torch.randn(2, 3),)),
        "region.pt2": torch.export.export(Region(), (torch.randn(2, 3),)),
        "dynamic.pt2": torch.export.export(Dynamic(), (torch.randn(4, 2, 3),),
                                           dynamic_shapes=({0: torch.export.Dim("batch", min=2)},)),
    }
    for name, ep in programs.items():
        buf = io.BytesIO()
        torch.export.save(ep, buf)
        out = io.BytesIO()
        with zipfile.ZipFile(buf) as zin, zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as zout:
            for info in zin.infolist():
                if "/sample_inputs/" not in info.filename:
                    zout.writestr(info.filename, zin.read(info.filename))
        write("pt2", name, out.getvalue())
        with zipfile.ZipFile(out) as z:  # the program text alone: fuzz_pt2 zips it with region.pt2's weights
            model = next(n for n in z.namelist() if n.endswith("models/model.json"))
            write("pt2", name.replace(".pt2", ".json"), z.read(model))


def safetensors_seeds():
    """Files of the reference writer (safetensors.torch) plus hand-made broken layouts."""
    import struct

    import torch
    from safetensors.torch import save

    g = torch.Generator().manual_seed(0)
    write("safetensors", "all_dtypes.safetensors", save({
        "f32": torch.randn(2, 3, generator=g), "f16": torch.randn(3, generator=g).half(),
        "bf16": torch.randn(2, generator=g).bfloat16(), "f64": torch.randn(1, generator=g).double(),
        "i64": torch.tensor([1, -2]), "i32": torch.tensor([3], dtype=torch.int32),
        "i16": torch.tensor([4], dtype=torch.int16), "i8": torch.tensor([-5], dtype=torch.int8),
        "u8": torch.tensor([6], dtype=torch.uint8), "bool": torch.tensor([True]),
        "f8a": torch.randn(2, generator=g).to(torch.float8_e4m3fn), "f8b": torch.randn(2, generator=g).to(torch.float8_e5m2),
        "scalar": torch.tensor(1.5), "empty": torch.zeros(0, 2)}, metadata={"format": "pt"}))
    write("safetensors", "model.safetensors", save({"fc1.weight": torch.randn(4, 3, generator=g), "fc1.bias": torch.zeros(4)}))

    def raw(header, data=b""):
        h = header.encode()
        return struct.pack("<Q", len(h)) + h + data

    write("safetensors", "empty.safetensors", raw("{}"))
    write("safetensors", "bad_overlap.safetensors", raw('{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},'
                                                        '"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}', bytes(8)))
    write("safetensors", "bad_hole.safetensors", raw('{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}', bytes(8)))
    write("safetensors", "bad_dtype.safetensors", raw('{"a":{"dtype":"U16","shape":[2],"data_offsets":[0,4]}}', bytes(4)))
    write("safetensors", "bad_header_length.safetensors", struct.pack("<Q", 2 ** 40) + b"{}")


class _Cfg:  # a user's config object in a Lightning checkpoint: LibTorch cannot build it
    def __init__(self):
        self.lr = 0.1


class _AttrDict(dict):
    pass


def checkpoint_seeds():
    """Small checkpoints in the formats replay reads (torch.save dicts; safetensors seeds too)."""
    import torch

    m = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.BatchNorm1d(2))
    opt = torch.optim.Adam(m.parameters())
    m(torch.randn(3, 2)).sum().backward()
    opt.step()
    scaler = {"scale": 1024.0, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 2, "_growth_tracker": 1}

    def save(name, obj):
        buf = io.BytesIO()
        torch.save(obj, buf)
        write("checkpoint", name, buf.getvalue())

    save("state_dict.pt", m.state_dict())
    save("dict.pt", {"model": m.state_dict(), "optimizer": opt.state_dict(), "scaler": scaler})
    save("lightning.ckpt", {"state_dict": {"model." + k: v for k, v in m.state_dict().items()}, "global_step": 1,
                            "optimizer_states": [opt.state_dict()], "MixedPrecision": scaler,
                            "hyper_parameters": {"cfg": _Cfg()}, "callbacks": {"cb": _AttrDict(a=1)}})
    save("sgd_disabled_scaler.pt", {"model": m.state_dict(), "optimizer": torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9).state_dict(),
                                    "scaler": {}})


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--make-db", default=os.path.join(ROOT, "build-fuzz", "tests", "fuzz", "fuzz_make_db"))
    a = ap.parse_args()
    for t in ("probe_pt", "probe_csv", "criteria", "store", "import", "layer_chunk", "pt2", "safetensors", "checkpoint"):
        shutil.rmtree(os.path.join(CORPUS, t), ignore_errors=True)
    pt_seeds()
    pt2_seeds()
    safetensors_seeds()
    checkpoint_seeds()
    for name, text in CSV.items():
        write("probe_csv", name, text)
    for name, text in CRITERIA.items():
        write("criteria", name, text)
    db_seeds(a.make_db)
    fixture_seeds()
    total = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(CORPUS) for f in fs)
    print(f"make_corpus: {sum(len(fs) for _, _, fs in os.walk(CORPUS))} files, {total} bytes in {CORPUS}")


if __name__ == "__main__":
    main()
