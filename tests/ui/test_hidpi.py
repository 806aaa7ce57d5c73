# SPDX-License-Identifier: MIT
"""High-DPI: the GUI started with a device pixel ratio of 2 (QT_SCALE_FACTOR=2, offscreen)
renders its window at twice the pixels, not blank, from a recorded run; and at ratio 1 at
the logical size. The PNG's own header gives the pixel size."""
import os
import struct
import subprocess
import sys
import tempfile
import unittest
import zlib

CLI = os.environ["AMPSCOPE_CLI"]
GUI = os.environ["AMPSCOPE_GUI"]


def png_size_and_colours(path):
    with open(path, "rb") as f:
        data = f.read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    # distinct byte values of the decompressed image data: a blank render has very few
    pos, idat = 8, b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind = data[pos + 4:pos + 8]
        if kind == b"IDAT":
            idat += data[pos + 8:pos + 8 + length]
        pos += 12 + length
    return width, height, len(set(zlib.decompress(idat)[:2_000_000]))


class HighDpi(unittest.TestCase):
    def test_window_renders_at_twice_the_pixels(self):
        with tempfile.TemporaryDirectory() as tmp:
            db = os.path.join(tmp, "runs.sqlite")
            p = subprocess.run([CLI, "run", "--model", "demo:mlp", "--probes", "demo", "--db", db, "-q"],
                               capture_output=True, text=True, timeout=300)
            self.assertIn(p.returncode, (0, 1), p.stderr)
            sizes = {}
            for factor in ("1", "2"):
                shot = os.path.join(tmp, f"x{factor}.png")
                env = dict(os.environ, QT_QPA_PLATFORM="offscreen", QT_SCALE_FACTOR=factor)
                g = subprocess.run([GUI, db, "--screenshot", shot], capture_output=True, text=True, timeout=120, env=env)
                self.assertEqual(g.returncode, 0, g.stderr)
                w, h, colours = png_size_and_colours(shot)
                self.assertGreater(colours, 20, f"scale {factor}: blank render")
                sizes[factor] = (w, h)
            self.assertEqual(sizes["2"], (2 * sizes["1"][0], 2 * sizes["1"][1]), sizes)


if __name__ == "__main__":
    unittest.main()
