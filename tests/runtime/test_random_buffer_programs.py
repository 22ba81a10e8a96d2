"""Property: on randomly generated programs (elementwise and non-elementwise ops, in-place updates,
tuples, bitcasts, fusions, while loops, conditionals, calls, aliased outputs), under every schedule
and layout option, no two simultaneously live values share a byte, and running the program on its
assigned memory gives the reference evaluator's bits."""

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from memory_runtime import assert_no_live_overlap, assert_runs_like_the_evaluator

import hlocc
from hlocc.runtime.buffer_assignment import assign_buffers
from hlocc.runtime.schedule import schedule_module

V = "f32[8]"
PRELUDE = f"""
fused_add {{
  a = {V} parameter(0)
  b = {V} parameter(1)
  ROOT r = {V} add({V} negate(a), b)
}}
fused_dus {{
  a = {V} parameter(0)
  u = f32[2] parameter(1)
  i = s32[] parameter(2)
  ROOT r = {V} dynamic-update-slice(a, u, i)
}}
called {{
  a = {V} parameter(0)
  ROOT r = {V} reverse(a), dimensions={{0}}
}}
"""


class Program:
    def __init__(self, draw):
        self.draw = draw
        self.computations: list[str] = []
        self.lines: list[str] = []
        self.values = ["p0", "p1"]
        self.n = 0

    def pick(self) -> str:
        return self.draw(st.sampled_from(self.values))

    def emit(self, text: str, shape: str = V, keep: bool = True) -> str:
        name = f"v{self.n}"
        self.n += 1
        self.lines.append(f"  {name} = {shape} {text}")
        if keep:
            self.values.append(name)
        return name

    def while_loop(self) -> None:
        k = self.n
        update = self.draw(st.sampled_from(["dus", "elementwise", "swap", "keep"]))
        body = {
            "dus": "u = f32[2] slice(y), slice={[0:2]}\n  ROOT t = (s32[], f32[8], f32[8]) tuple(i2, "
                   "f32[8] dynamic-update-slice(x, u, i), y)",
            "elementwise": "ROOT t = (s32[], f32[8], f32[8]) tuple(i2, f32[8] multiply(x, y), f32[8] sine(y))",
            "swap": "ROOT t = (s32[], f32[8], f32[8]) tuple(i2, y, x)",
            "keep": "ROOT t = (s32[], f32[8], f32[8]) tuple(i2, x, f32[8] add(x, y))",
        }[update]
        self.computations.append(f"""
cond{k} {{
  s = (s32[], f32[8], f32[8]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[8] get-tuple-element(s), index=1
  n = f32[8] negate(x)
  ROOT lt = pred[] compare(i, s32[] constant(3)), direction=LT
}}
body{k} {{
  s = (s32[], f32[8], f32[8]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[8] get-tuple-element(s), index=1
  y = f32[8] get-tuple-element(s), index=2
  i2 = s32[] add(i, s32[] constant(1))
  {body}
}}""")
        init = self.emit(f"tuple(s32[] constant(0), {self.pick()}, {self.pick()})", "(s32[], f32[8], f32[8])", False)
        w = self.emit(f"while({init}), condition=cond{k}, body=body{k}", "(s32[], f32[8], f32[8])", False)
        self.emit(f"get-tuple-element({w}), index=1")
        self.emit(f"get-tuple-element({w}), index=2")

    def conditional(self) -> None:
        k = self.n
        self.computations.append(f"""
then{k} {{
  a = {V} parameter(0)
  ROOT r = {V} exponential(a)
}}
else{k} {{
  a = {V} parameter(0)
  ROOT r = {V} a
}}""".replace("ROOT r = f32[8] a", "ROOT r = f32[8] copy(a)"))
        pred = self.emit("compare(idx, s32[] constant(2)), direction=LT", "pred[]", False)
        self.emit(f"conditional({pred}, {self.pick()}, {self.pick()}), true_computation=then{k}, "
                  f"false_computation=else{k}")

    def step(self) -> None:
        kind = self.draw(st.sampled_from(["unary", "binary", "reverse", "dus", "tuple", "reshape", "fusion",
                                          "dus_fusion", "copy", "while", "conditional", "call"]))
        if kind == "unary":
            self.emit(f"{self.draw(st.sampled_from(['negate', 'abs', 'sine', 'tanh']))}({self.pick()})")
        elif kind == "binary":
            self.emit(f"{self.draw(st.sampled_from(['add', 'multiply', 'maximum']))}({self.pick()}, {self.pick()})")
        elif kind == "reverse":
            self.emit(f"reverse({self.pick()}), dimensions={{0}}")
        elif kind == "dus":
            update = self.emit(f"slice({self.pick()}), slice={{[3:5]}}", "f32[2]", False)
            self.emit(f"dynamic-update-slice({self.pick()}, {update}, idx)")
        elif kind == "tuple":
            t = self.emit(f"tuple({self.pick()}, {self.pick()})", f"({V}, {V})", False)
            self.emit(f"get-tuple-element({t}), index={self.draw(st.integers(0, 1))}")
        elif kind == "reshape":
            r = self.emit(f"reshape({self.pick()})", "f32[2,4]", False)
            self.emit(f"reshape({r})")
        elif kind == "fusion":
            self.emit(f"fusion({self.pick()}, {self.pick()}), kind=kLoop, calls=fused_add")
        elif kind == "dus_fusion":
            update = self.emit(f"slice({self.pick()}), slice={{[1:3]}}", "f32[2]", False)
            self.emit(f"fusion({self.pick()}, {update}, idx), kind=kLoop, calls=fused_dus")
        elif kind == "copy":
            self.emit(f"copy({self.pick()})")
        elif kind == "while":
            self.while_loop()
        elif kind == "conditional":
            self.conditional()
        else:
            self.emit(f"call({self.pick()}), to_apply=called")

    def text(self) -> str:
        outputs = self.draw(st.lists(st.sampled_from(self.values), min_size=1, max_size=3))
        alias = self.draw(st.sampled_from(["", "must-alias", "may-alias"]))
        header = "HloModule random" + (f", input_output_alias={{ {{0}}: (0, {{}}, {alias}) }}" if alias else "")
        root = f"  ROOT out = ({', '.join([V] * len(outputs))}) tuple({', '.join(outputs)})"
        entry = ["ENTRY e {", f"  p0 = {V} parameter(0)", f"  p1 = {V} parameter(1)", "  idx = s32[] parameter(2)"]
        return "\n".join([header, PRELUDE, *self.computations, *entry, *self.lines, root, "}"])


@st.composite
def programs(draw):
    program = Program(draw)
    for _ in range(draw(st.integers(1, 12))):
        program.step()
    return program.text()


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=programs(), schedule=st.sampled_from(["default", "list", "post-order"]),
       layout=st.sampled_from(["arena", "allocations"]), heap=st.sampled_from(["auto", "best-fit", "decreasing-size"]),
       reuse=st.booleans(), index=st.integers(0, 6))
def test_random_programs_run_on_their_assigned_memory(text, schedule, layout, heap, reuse, index):
    module = hlocc.parse_hlo(text)
    assignment = assign_buffers(module, schedule_module(module, schedule), temp_layout=layout,
                                heap_algorithm=heap, reuse_operand_buffers=reuse)
    assignment.verify()
    assert_no_live_overlap(assignment)
    rng = np.random.default_rng(index)
    args = [rng.standard_normal(8).astype(np.float32), rng.standard_normal(8).astype(np.float32), np.int32(index)]
    assert_runs_like_the_evaluator(module, assignment, args)
