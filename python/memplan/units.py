"""Byte sizes as memplan's command line writes them: a number with an
optional unit, B KB MB GB TB (powers of 1000) or KiB MiB GiB TiB (powers of
1024), e.g. "24GiB", "1.5GB", 4096."""
import re
from typing import Union

_UNITS = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
          "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}
_SIZE = re.compile(r"^(\d+(?:\.\d*)?|\.\d+)\s*([A-Za-z]*)$")

Size = Union[int, str]


def parse_size(size: Size) -> int:
    """Bytes of `size` (an int is bytes already). Raises ValueError naming
    the text and what was expected, as `memplan plan --budget` does."""
    if isinstance(size, bool) or not isinstance(size, (int, str)):
        raise ValueError(f"invalid size {size!r}; expected an int (bytes) or a text like 24GiB")
    if isinstance(size, int):
        if size < 0:
            raise ValueError(f"invalid size {size}; expected a number of bytes >= 0")
        return size
    m = _SIZE.match(size.strip())
    if not m or m.group(2) not in _UNITS:
        raise ValueError(f'invalid size "{size}"; expected a number of bytes with an optional '
                         "unit (B KB MB GB TB KiB MiB GiB TiB), e.g. 24GiB")
    number, scale = m.group(1), _UNITS[m.group(2)]
    if "." not in number:
        return int(number) * scale
    return int(round(float(number) * scale))  # as memplan: nearest byte


def format_size(n: int) -> str:
    """1234567 -> '1.18 MiB' (binary units, two decimals)."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.2f} {unit}" if unit != "B" else f"{n} B"
        value /= 1024
    return f"{n} B"
