"""Constants shared by the exporter's stages, its progress line and its error type."""
import contextlib
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
    from torch._subclasses.functional_tensor import FunctionalTensor, FunctionalTensorMode
else:  # torch 1.13: functorch's AOTAutograd, functionalized by a second trace
    from functorch.compile import (  # noqa: F401
        aot_module,
        default_partition,
        make_boxed_func,
        min_cut_rematerialization_partition,
    )

    aot_function = None
    FunctionalTensor = FunctionalTensorMode = None

EXPORTER = "memplan.torch 1"
SEED = 0
SCOPE_KEY = "memplan_scope"
INPLACE_KEY = "memplan_inplace"
CHECKPOINT_KEY = "memplan_checkpoint"  # the torch.utils.checkpoint call an op ran in
NODE_KEY = "memplan_autograd_node"  # backward: the autograd node an op ran in
HELD_KEY = "memplan_held"  # a model output the training loop holds through the backward
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


# The releases memplan.torch is tested on (requirements/torch-*.txt): the
# oldest and the newest of each. Others get one warning naming these.
TESTED_TORCH = ("2.14.1", "2.15.0")
TESTED_TRANSFORMERS = ("4.57.6", "5.25.0")
_warned = set()


def _release(version: str) -> tuple:
    parts = []
    for p in version.split("+")[0].split(".")[:3]:
        digits = "".join(c for c in p if c.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)


def outside_tested(version: str, tested: tuple) -> bool:
    """True when `version` lies outside the tested range's major.minor."""
    lo, hi = _release(tested[0])[:2], _release(tested[-1])[:2]
    return not lo <= _release(version)[:2] <= hi


def warn_untested(name: str, version: str, tested: tuple) -> None:
    """One warning per package and version outside the tested range."""
    if (name, version) in _warned or not outside_tested(version, tested):
        return
    _warned.add((name, version))
    import warnings
    warnings.warn(f"memplan.torch is tested on {name} {tested[0]} to {tested[-1]}; "
                  f"{name} {version} may export a step that differs from the eager one",
                  stacklevel=3)


DATA_DEPENDENT = ("DataDependentOutputException", "GuardOnDataDependentSymNode",
                  "DynamicOutputShapeException")
META_SCALAR = " cannot be called on meta tensors"  # torch's text for .item() on meta


def plain_tensor_attributes(module: torch.nn.Module) -> list:
    """(path, tensor) of each tensor held as a plain attribute of one of
    `module`'s modules (`self.order = torch.arange(n)`), each tensor once.
    Left out: one of the parameters or buffers itself, and a saved copy of
    one, taken to be a plain attribute with the shape of a parameter or
    buffer of its own module (transformers' rotary embeddings keep
    `original_inv_freq`: the `inv_freq` buffer itself, or, after
    `.to(dtype)`, its float32 original, which a step does not read)."""
    seen = {id(t) for t in module.parameters()} | {id(t) for t in module.buffers()}
    found = []
    for mod_name, mod in module.named_modules():
        own = {tuple(t.shape) for t in list(mod.parameters(recurse=False))
               + list(mod.buffers(recurse=False))}
        for name, value in vars(mod).items():
            if (isinstance(value, torch.Tensor) and id(value) not in seen
                    and tuple(value.shape) not in own):
                seen.add(id(value))
                found.append((f"{mod_name}.{name}" if mod_name else name, value))
    return found


def data_dependent(e: BaseException) -> bool:
    """True for the errors of an op that needs a tensor's value while tracing."""
    return type(e).__name__ in DATA_DEPENDENT or (
        isinstance(e, RuntimeError) and META_SCALAR in str(e))


def _where(stack) -> str:
    """The innermost module of `stack` (module paths) as an error names it."""
    module = stack[-1] if stack else ""
    return f"module '{module}'" if module else "the model's own code"


def data_dependent_message(e: BaseException, stack) -> str:
    """What a data-dependent op on meta is: the op, the module (innermost of
    `stack`, module paths) and the way around."""
    text = str(e).splitlines()[0] if str(e) else type(e).__name__
    op = getattr(e, "func", None) or text.split(META_SCALAR)[0]
    return (f"{op} in {_where(stack)} needs a tensor's value (data-dependent), which a trace "
            "without data (--device meta) does not have; export on --device cpu, with a "
            "smaller config if the model does not fit this machine")


NON_FAKE = "Please convert all Tensors to FakeTensors first"  # FakeTensorMode's assertion


def non_fake_input(e: BaseException) -> bool:
    """True when the trace met a real tensor among its fake ones."""
    return isinstance(e, AssertionError) and NON_FAKE in str(e)


def non_fake_message(e: BaseException, stack) -> str:
    """What a real tensor met by the trace is: the op, the module (innermost
    of `stack`) and the ways around."""
    text = str(e)
    found = text.split("Found in ", 1)[1].split("(", 1)[0] if "Found in " in text else "an op"
    return (f"{found} in {_where(stack)} reads a tensor that is neither an input, a parameter, a "
            "buffer nor a tensor attribute of a module (one held in a list or a dict, or "
            "made outside the forward), which the trace cannot take as an input; register "
            "it as a buffer (register_buffer(name, tensor, persistent=False)); on --device "
            "meta, --device cpu may trace it, with a smaller config if the model does not "
            "fit this machine")


@contextlib.contextmanager
def module_stack(model):
    """The paths of the modules whose forward is running, innermost last."""
    stack, handles = [], []
    names = {m: n for n, m in model.named_modules()}
    def enter(mod, args):
        stack.append(names[mod])

    def leave(mod, args, out):
        stack.pop()

    for m in model.modules():
        handles.append(m.register_forward_pre_hook(enter))
        handles.append(m.register_forward_hook(leave))
    try:
        yield stack
    finally:
        for h in handles:
            h.remove()


class ExportError(ValueError):
    """A graph the exporter cannot write faithfully (names the node)."""
