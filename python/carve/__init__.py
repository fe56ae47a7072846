"""carve: compile a tensor graph once, plan its memory, run it many times.

    import carve, numpy as np
    s = carve.Session(threads=2)                  # device="cpu" | "cuda"
    p = s.compile("model.onnx", strategy="best")  # or a text-format path or string
    outs = p.run({"x": x})                        # dict name -> numpy array
    p.plan.arena_bytes, p.plan.lower_bound, p.plan.values
    p.handle("kv")                                # a copy of the handle's value
    carve.plan("trace.csv", strategy="exact", capacity=1 << 20)

Memory: inputs (numpy arrays, or anything with ``__dlpack__`` in host memory, e.g. a
torch tensor) are used in place, without copies, when C-contiguous; other arrays are
copied once with ``numpy.ascontiguousarray``. ``outputs={"y": array}`` fills caller
arrays in place (writable, C-contiguous, exactly the output's dtype and shape);
otherwise outputs are new arrays over carve-owned memory. ``Program.handle`` returns a
copy: a handle's memory belongs to the runs that update it.

Errors: every failure raises a subclass of ``carve.Error`` named after carve's error
code (``carve.ShapeError``, ``carve.CancelledError``, ...) with carve's message, which
names the node, value, input or line at fault.

Thread-safety: a Program runs one call at a time; ``run`` releases the GIL, so another
thread may ``CancelToken.cancel()`` it.
"""
from __future__ import annotations

import os
from typing import Optional

from . import _carve

__version__ = _carve.__version__
__all__ = ["Session", "Program", "CancelToken", "plan", "Error", "__version__"]


class Error(Exception):
    """A carve error; ``code`` is carve's error code name (e.g. "ShapeError", "Cancelled")."""

    code = "Internal"


# One subclass per carve error code, in carve_code order (carve/carve.h); the class is
# the code's name, with "Error" appended where it has none (InvalidArgumentError).
_CODES = ["InvalidArgument", "ParseError", "VerifyError", "ShapeError", "TypeMismatch", "OutOfBounds",
          "NotAllocated", "NotCpuAccessible", "ReadOnly", "OutOfMemory", "IoError", "NotFound", "Unsupported",
          "Infeasible", "Timeout", "Cancelled", "Unavailable", "Internal"]
_CLASSES = {}
for _number, _code in enumerate(_CODES, start=1):
    _class_name = _code if _code.endswith("Error") else _code + "Error"
    _class = type(_class_name, (Error,), {"code": _code, "__module__": __name__,
                                          "__doc__": f"carve error code {_code}."})
    globals()[_class_name] = _class
    __all__.append(_class_name)
    _CLASSES[_number] = _class


def _error_class(code: int) -> type:
    """The exception class for a carve_code (the native module raises through this)."""
    return _CLASSES.get(code, Error)


CancelToken = _carve.CancelToken
Program = _carve.Program


class Session:
    """A carve session: the JIT, its kernel cache and the worker threads of runs."""

    def __init__(self, threads: int = 0, device: str = "cpu"):
        self._session = _carve.Session(threads, device)

    def compile(self, model: str | os.PathLike, strategy: str = "greedy-size", order: str = "given",
                inplace: bool = True, fuse: bool = True, sequential: bool = False,
                parallel_safe: bool = False, share_handles_with: Optional[Program] = None) -> Program:
        """Compiles ``model``: a path ending in ``.onnx``, a path to a text-format graph, or
        the text itself (a string that is not an existing file and holds a ``{``).
        ``share_handles_with`` binds that program's handles of the same names (e.g. a KV
        cache shared by a prefill and a decode program); the others start as zeros."""
        text = os.fspath(model)
        if text.endswith(".onnx"):
            kind = "onnx"
        elif os.path.exists(text) or "{" not in text:
            kind = "text_file"  # a missing file is an IoError naming it
        else:
            kind = "text"
        return self._session._compile(text, kind, strategy, order, inplace, fuse, sequential, parallel_safe,
                                      share_handles_with)


def plan(path: str | os.PathLike, strategy: str = "best", capacity: Optional[int] = None,
         time_limit: float = 10.0):
    """The planner alone, on a MiniMalloc CSV (id,lower,upper,size[,alignment]): returns
    ``strategy``, ``arena_bytes``, ``lower_bound``, ``optimal`` and ``offsets`` (id -> offset).
    With ``capacity`` the exact strategy looks for a plan within it (InfeasibleError if none)."""
    return _carve._plan_csv(os.fspath(path), strategy, capacity, time_limit)
