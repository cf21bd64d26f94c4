"""Constants shared by the exporter's stages, its progress line and its error type."""
import sys
import time

import torch
import torch.fx

TORCH2 = int(torch.__version__.split(".")[0]) >= 2
# The AOTAutograd entry points, re-exported for the stages (noqa: F401).
if TORCH2:  # AOTAutograd with Python functionalization (FunctionalTensorMode)
    from torch._functorch.aot_autograd import (  # noqa: F401
        aot_function,
        aot_module,
        make_boxed_func,
    )
    from torch._functorch.partitioners import (  # noqa: F401
        default_partition,
        min_cut_rematerialization_partition,
    )
    from torch._subclasses.functional_tensor import FunctionalTensorMode
else:  # torch 1.13: functorch's AOTAutograd, functionalized by a second trace
    from functorch.compile import (  # noqa: F401
        aot_module,
        default_partition,
        make_boxed_func,
        min_cut_rematerialization_partition,
    )

    aot_function = None
    FunctionalTensorMode = None

EXPORTER = "memplan.torch 1"
SEED = 0
SCOPE_KEY = "memplan_scope"
INPLACE_KEY = "memplan_inplace"
DTYPES = {
    torch.float64: "float64", torch.float32: "float32", torch.float16: "float16",
    torch.bfloat16: "bfloat16", torch.int64: "int64", torch.int32: "int32",
    torch.int16: "int16", torch.int8: "int8", torch.uint8: "uint8",
    torch.bool: "bool", torch.complex64: "complex64",
}
DTYPE_SIZE = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "int64": 8,
              "int32": 4, "int16": 2, "int8": 1, "uint8": 1, "bool": 1, "complex64": 8}
# Ops that are views in eager although their schema carries no alias annotation.
EXTRA_VIEWS = {"aten._unsafe_view.default": 0}
# Scratch below this (wrapped scalars, 4-8 byte temporaries) is not recorded.
WORKSPACE_MIN = 64
RESIDENT = {"input", "parameter", "buffer", "optimizer_state"}


class Progress:
    """One line redrawn on stderr while an export runs: phase, done/total,
    seconds. Only on a terminal, never with -q (CI logs stay clean)."""

    def __init__(self, enabled=None):
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self.start = None
        self.drawn = False
        self.prefix = ""  # the outer step, e.g. "export 2/5 (batch=3, seq=63): "

    def __call__(self, phase, done=None, total=None):
        if not self.enabled:
            return
        if self.start is None:
            self.start = time.time()
        count = f" {done}/{total}" if total else ""
        sys.stderr.write(f"\r\033[Kmemplan export: {self.prefix}{phase}{count}, "
                         f"{time.time() - self.start:.0f} s")
        sys.stderr.flush()
        self.drawn = True

    def done(self):
        if self.drawn:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()
            self.drawn = False


PROGRESS = Progress(enabled=False)  # the CLI turns it on for a terminal


class ExportError(ValueError):
    """A graph the exporter cannot write faithfully (names the node)."""
