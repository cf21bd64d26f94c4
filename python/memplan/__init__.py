"""memplan: predicts, plans and proves the memory of a training step, backward
pass included, before anything runs.

The `memplan` command runs the C++ analyzer shipped in this package
(`memplan analyze|plan|check|verify|report|snapshot|...`) and the PyTorch
exporter (`memplan export|measure`). From Python::

    import memplan.torch
    est = memplan.torch.estimate(model, (x,), optimizer=torch.optim.AdamW)
    est.peak_bytes, est.fits("24GiB")

`memplan.torch` needs PyTorch (`pip install "memplan[torch]"`); importing
`memplan` itself does not import torch.
"""
from ._version import __version__

__all__ = ["__version__"]
