"""Random programs through the simplification pipeline must compute exactly what they computed
before. The programs are built to hit the rules' edge cases: constants are splats of 0, -0.0, 1,
-1, ±inf, NaN and integer extremes; ops are the ones the rules rewrite (identities, involutions,
select, conversions, data movement chains, broadcasts, reshapes); the inputs are full of special
values too. Each seed is one program, so a failure names a reproducible case."""

from __future__ import annotations

import numpy as np
import pytest
from passes_helpers import assert_same_results

import hlocc
from hlocc.hlo.verifier import verify_module
from hlocc.passes.pipeline import simplification_pipeline

SHAPE = (2, 3)
FLOAT_CONSTANTS = ("0", "-0", "1", "-1", "inf", "-inf", "nan", "2")
INT_CONSTANTS = ("0", "1", "-1", "-2147483648", "2147483647", "3")
BINARY = ("add", "subtract", "multiply", "divide", "maximum", "minimum", "and", "or", "xor", "power")
UNARY = ("negate", "abs", "not", "copy")


class _Program:
    """Builds HLO text over values of type f32, s32 or pred with shape SHAPE."""

    def __init__(self, rng: np.random.Generator):
        self.rng = rng
        self.lines: list[str] = []
        self.values = {"f32": ["pf"], "s32": ["pi"], "pred": ["pp"]}
        self.count = 0

    def name(self) -> str:
        self.count += 1
        return f"v{self.count}"

    def emit(self, ty: str, text: str) -> str:
        name = self.name()
        self.lines.append(f"  {name} = {text}")
        self.values[ty].append(name)
        return name

    def pick(self, ty: str) -> str:
        pool = self.values[ty]
        return pool[int(self.rng.integers(len(pool)))] if self.rng.random() < 0.7 else pool[-1]

    def splat(self, ty: str) -> str:
        pool = {"f32": FLOAT_CONSTANTS, "s32": INT_CONSTANTS, "pred": ("true", "false")}[ty]
        value = pool[int(self.rng.integers(len(pool)))]
        scalar = self.name()
        self.lines.append(f"  {scalar} = {ty}[] constant({value})")
        return self.emit(ty, f"{ty}[2,3] broadcast({scalar}), dimensions={{}}")

    def operand(self, ty: str) -> str:
        return self.splat(ty) if self.rng.random() < 0.35 else self.pick(ty)

    def step(self) -> None:
        ty = ("f32", "s32", "pred")[int(self.rng.integers(3))]
        kind = self.rng.random()
        if kind < 0.4:
            op = BINARY[int(self.rng.integers(len(BINARY)))]
            if op in ("and", "or", "xor") and ty == "f32":
                ty = "s32"
            if op in ("divide", "power", "subtract") and ty == "pred":
                ty = "f32"
            a, b = self.operand(ty), self.operand(ty)
            if self.rng.random() < 0.2:
                b = a
            self.emit(ty, f"{ty}[2,3] {op}({a}, {b})")
        elif kind < 0.55:
            op = UNARY[int(self.rng.integers(len(UNARY)))]
            if op == "not":
                ty = "pred" if ty == "f32" else ty
            if op in ("abs", "negate") and ty == "pred":
                ty = "s32"
            self.emit(ty, f"{ty}[2,3] {op}({self.pick(ty)})")
        elif kind < 0.65:
            p = self.operand("pred")
            if self.rng.random() < 0.3:
                p = self.emit("pred", f"pred[2,3] not({p})")
            self.emit(ty, f"{ty}[2,3] select({p}, {self.operand(ty)}, {self.operand(ty)})")
        elif kind < 0.75:
            self._convert_chain()
        elif kind < 0.9:
            self._data_movement(ty)
        else:
            direction = ("EQ", "NE", "LT", "GE")[int(self.rng.integers(4))]
            src = ("f32", "s32")[int(self.rng.integers(2))]
            self.emit("pred", f"pred[2,3] compare({self.operand(src)}, {self.operand(src)}), direction={direction}")

    def _convert_chain(self) -> None:
        chains = (("f32", "f64", "f32"), ("f32", "bf16", "f32"), ("s32", "s64", "s32"), ("s32", "f64", "s32"),
                  ("pred", "s32", "pred"), ("f32", "f64", "s32"), ("s32", "f32", "s32"))
        chain = chains[int(self.rng.integers(len(chains)))]
        value = self.pick(chain[0])
        for ty in chain[1:]:
            name = self.name()
            self.lines.append(f"  {name} = {ty}[2,3] convert({value})")
            value = name
        self.values[chain[-1]].append(value)

    def _data_movement(self, ty: str) -> None:
        x = self.pick(ty)
        moves = self.rng.integers(4)
        if moves == 0:
            t = self.name()
            self.lines.append(f"  {t} = {ty}[3,2] transpose({x}), dimensions={{1,0}}")
            self.emit(ty, f"{ty}[2,3] transpose({t}), dimensions={{1,0}}")
        elif moves == 1:
            r = self.name()
            self.lines.append(f"  {r} = {ty}[6,1] reshape({x})")
            u = self.name()
            self.lines.append(f"  {u} = {ty}[6,1] negate({r})" if ty != "pred" else f"  {u} = {ty}[6,1] not({r})")
            self.emit(ty, f"{ty}[2,3] reshape({u})")
        elif moves == 2:
            s = self.name()
            self.lines.append(f"  {s} = {ty}[2,2] slice({x}), slice={{[0:2], [1:3]}}")
            z = self.splat(ty)
            zs = self.name()
            self.lines.append(f"  {zs} = {ty}[2,1] slice({z}), slice={{[0:2], [0:1]}}")
            self.emit(ty, f"{ty}[2,3] concatenate({zs}, {s}), dimensions={{1}}")
        else:
            r = self.name()
            self.lines.append(f"  {r} = {ty}[2,3] reverse({x}), dimensions={{1}}")
            self.emit(ty, f"{ty}[2,3] reverse({r}), dimensions={{1}}")

    def text(self) -> str:
        outs = [self.values[t][-1] for t in ("f32", "s32", "pred")] + [self.pick("f32"), self.pick("s32")]
        shapes = ", ".join(["f32[2,3]", "s32[2,3]", "pred[2,3]", "f32[2,3]", "s32[2,3]"])
        body = "\n".join(self.lines)
        return (f"HloModule random\n\nENTRY main {{\n  pf = f32[2,3] parameter(0)\n  pi = s32[2,3] parameter(1)\n"
                f"  pp = pred[2,3] parameter(2)\n{body}\n  ROOT out = ({shapes}) tuple({', '.join(outs)})\n}}\n")


def random_program(seed: int, steps: int = 14) -> str:
    program = _Program(np.random.default_rng(seed))
    for _ in range(steps):
        program.step()
    return program.text()


@pytest.mark.parametrize("seed", range(60))
def test_random_program_keeps_its_values(seed):
    text = random_program(seed)
    before = hlocc.parse_hlo(text)
    verify_module(before)
    after = hlocc.parse_hlo(text)
    simplification_pipeline(debug=True).run(after)
    for input_seed in (seed, seed + 1000):
        assert_same_results(before, after, seed=input_seed)
