# SPDX-License-Identifier: MIT
"""The capture package's tests import it from the source tree (python/), as `pip install
./python` would install it, and reuse the CLI tests' oracles (tests/cli)."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
sys.path.insert(0, os.path.join(HERE, "..", "cli"))
sys.path.insert(0, HERE)
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
