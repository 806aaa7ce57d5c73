# SPDX-License-Identifier: MIT
"""Hand-made torch.save archives for hostile-input tests: the same zip layout and pickle
protocol torch.save writes, but with storages, shapes, strides and offsets chosen by the test
(torch.save itself can only write consistent ones)."""
import collections
import io
import pickle
import zipfile

import torch

_STORAGE = {torch.float32: torch.FloatStorage, torch.int64: torch.LongStorage,
            torch.int32: torch.IntStorage, torch.float64: torch.DoubleStorage}


class RawTensor:
    """A tensor as the archive declares it: `data` is what the file really holds."""

    def __init__(self, data: bytes, dtype=torch.float32, numel=None, offset=0, size=None, stride=None):
        item = torch.tensor([], dtype=dtype).element_size()
        self.data, self.dtype = data, dtype
        self.numel = len(data) // item if numel is None else numel
        self.offset = offset
        self.size = (len(data) // item,) if size is None else tuple(size)
        self.stride = stride if stride is not None else tuple(
            int(torch.tensor(self.size[i + 1:]).prod()) if i + 1 < len(self.size) else 1 for i in range(len(self.size)))
        self.key = None

    def __reduce_ex__(self, protocol):
        return (torch._utils._rebuild_tensor_v2,
                (_StorageRef(self), self.offset, self.size, tuple(self.stride), False, collections.OrderedDict()))


class _StorageRef:
    def __init__(self, t):
        self.t = t


def floats(values):
    return torch.tensor(values, dtype=torch.float32).numpy().tobytes()


def write_raw_pt(path, pickle_bytes):
    """A torch.save archive whose data.pkl is exactly `pickle_bytes`."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        z.writestr("archive/data.pkl", pickle_bytes)
        z.writestr("archive/byteorder", "little")
        z.writestr("archive/version", "3\n")
    return path


def write_pt(path, obj, compress_records=False):
    """Writes `obj` (dicts, lists, str, RawTensor) as torch.save would lay it out."""
    tensors = []

    class Pickler(pickle.Pickler):
        def persistent_id(self, o):
            if isinstance(o, _StorageRef):
                t = o.t
                if t.key is None:
                    t.key = str(len(tensors))
                    tensors.append(t)
                return ("storage", _STORAGE[t.dtype], t.key, "cpu", t.numel)
            return None

    buf = io.BytesIO()
    Pickler(buf, protocol=2).dump(obj)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        z.writestr("archive/data.pkl", buf.getvalue())
        z.writestr("archive/byteorder", "little")
        for t in tensors:
            z.writestr(f"archive/data/{t.key}", t.data,
                       compress_type=zipfile.ZIP_DEFLATED if compress_records else zipfile.ZIP_STORED)
        z.writestr("archive/version", "3\n")
    return path
