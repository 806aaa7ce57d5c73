# SPDX-License-Identifier: MIT
"""ampscope_capture: write an ampscope incident bundle at the first non-finite loss, gradient,
gradient norm or skipped step of a training job (docs/capture.md).

- plain PyTorch: `Capture` (this module)
- PyTorch Lightning 2.x: `ampscope_capture.lightning.CaptureCallback` (imports Lightning)
- Hugging Face transformers 5.x: `ampscope_capture.hf.CaptureCallback` (imports transformers)
"""
from .bundle import FORMAT, VERSION
from .core import Capture, IncidentError

__all__ = ["Capture", "IncidentError", "FORMAT", "VERSION"]
__version__ = "0.1.0"
