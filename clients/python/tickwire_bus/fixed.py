"""Prices and sizes: signed int64 counts of 1e-9 (crates/tickwire-bus/src/fixed.rs)."""

from decimal import Decimal

SCALE = 1_000_000_000


def fixed_to_str(raw) -> str:
    """The shortest exact decimal form (``61234.5``, ``-0.001``, ``0``), as ``Fixed`` displays."""
    raw = int(raw)
    sign = "-" if raw < 0 else ""
    integer, fraction = divmod(abs(raw), SCALE)
    if fraction == 0:
        return f"{sign}{integer}"
    return f"{sign}{integer}.{fraction:09d}".rstrip("0")


def fixed_to_decimal(raw) -> Decimal:
    """The exact value as a ``Decimal``."""
    return Decimal(int(raw)).scaleb(-9)


def fixed_to_float(raw):
    """The nearest float; works on numpy arrays of raw values too (element-wise)."""
    return raw / SCALE
