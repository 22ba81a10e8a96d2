"""Typed values of HLO instruction attributes.

Instruction attributes are kept in `HloInstruction.attrs` under their HLO text names
(`dimensions`, `slice`, `padding`, `window`, `dim_labels`, `lhs_contracting_dims`, `direction`, ...).
Integer lists are tuples of ints, flags are bools, enumerations (`direction=GT`, `kind=kLoop`) are
strings, and the structured ones use the frozen dataclasses below. Attributes that hlocc does not
interpret (sharding, backend_config, frontend_attributes, replica groups, ...) are kept as their raw
text so that they print back unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

from hlocc.hlo.symbolic import size_text


@dataclass(frozen=True)
class SliceDim:
    start: int
    limit: int
    stride: int = 1

    def __str__(self) -> str:
        tail = f":{self.stride}" if self.stride != 1 else ""
        return f"[{size_text(self.start)}:{size_text(self.limit)}{tail}]"


@dataclass(frozen=True)
class PadDim:
    """Low and high edge padding (may be negative) and interior padding of one dimension."""

    lo: int
    hi: int
    interior: int = 0

    def __str__(self) -> str:
        return f"{size_text(self.lo)}_{size_text(self.hi)}" + (f"_{self.interior}" if self.interior else "")


def padding_str(dims: tuple[PadDim, ...]) -> str:
    return "x".join(str(d) for d in dims)


@dataclass(frozen=True)
class WindowDim:
    size: int
    stride: int = 1
    pad_lo: int = 0
    pad_hi: int = 0
    lhs_dilate: int = 1
    rhs_dilate: int = 1
    reversal: bool = False


def window_str(dims: tuple[WindowDim, ...]) -> str:
    """XLA's window text: `{size=3x3 stride=2x2 pad=1_1x1_1 ...}`, omitting default fields."""

    def field(name, values, default):
        if all(v == default for v in values):
            return None
        return f"{name}=" + "x".join(str(v) for v in values)

    parts = [f"size={'x'.join(size_text(d.size) for d in dims)}"]
    for name, get, default in (
        ("stride", lambda d: d.stride, 1),
        ("pad", lambda d: f"{size_text(d.pad_lo)}_{size_text(d.pad_hi)}", "0_0"),
        ("lhs_dilate", lambda d: d.lhs_dilate, 1),
        ("rhs_dilate", lambda d: d.rhs_dilate, 1),
        ("rhs_reversal", lambda d: int(d.reversal), 0),
    ):
        text = field(name, [get(d) for d in dims], default)
        if text:
            parts.append(text)
    return "{" + " ".join(parts) + "}"


@dataclass(frozen=True)
class ConvDimensionNumbers:
    """Convolution dimension labels (`b01f_01io->b01f`): which dimension of each operand is the
    batch/feature/spatial one. Spatial tuples are ordered by spatial index (label digit)."""

    input_batch: int
    input_feature: int
    input_spatial: tuple[int, ...]
    kernel_input_feature: int
    kernel_output_feature: int
    kernel_spatial: tuple[int, ...]
    output_batch: int
    output_feature: int
    output_spatial: tuple[int, ...]
    text: str = ""

    def __str__(self) -> str:
        return self.text


def parse_dim_labels(text: str) -> ConvDimensionNumbers:
    """Parse `b01f_01io->b01f`; raises ValueError with the cause on malformed labels."""
    lhs_rhs, _, out = text.partition("->")
    lhs, _, rhs = lhs_rhs.partition("_")
    if not (lhs and rhs and out):
        raise ValueError(f"malformed dim_labels '{text}'")

    def roles(labels: str, a: str, b: str):
        first = labels.find(a)
        second = labels.find(b)
        if first < 0 or second < 0 or labels.count(a) != 1 or labels.count(b) != 1:
            raise ValueError(f"dim_labels '{text}': '{labels}' needs exactly one '{a}' and one '{b}'")
        digits = sorted((int(c), i) for i, c in enumerate(labels) if c.isdigit())
        if [d for d, _ in digits] != list(range(len(digits))):
            raise ValueError(f"dim_labels '{text}': spatial labels of '{labels}' must be 0..n-1")
        return first, second, tuple(i for _, i in digits)

    ib, ifeat, isp = roles(lhs, "b", "f")
    ki, ko, ksp = roles(rhs, "i", "o")
    ob, of, osp = roles(out, "b", "f")
    if not (len(isp) == len(ksp) == len(osp)):
        raise ValueError(f"dim_labels '{text}': operands have different numbers of spatial dims")
    return ConvDimensionNumbers(ib, ifeat, isp, ki, ko, ksp, ob, of, osp, text)


@dataclass(frozen=True)
class RawAttr:
    """An attribute kept as its source text (printed back verbatim)."""

    text: str

    def __str__(self) -> str:
        return self.text
