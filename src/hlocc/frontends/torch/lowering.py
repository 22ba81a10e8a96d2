"""An FX graph of core ATen ops → an HloModule, through the op table (`table.ATEN_OPS`).

The graph is what `aot_autograd` (or `make_fx`, or `ExportedProgram.run_decompositions`) gives
after PyTorch's core-ATen decompositions: placeholders, `call_function` nodes of ATen/prims ops,
SymInt arithmetic (`operator.add`, `aten.sym_size`), `getitem` of multi-output ops, and one output
node. Every node carries its FakeTensor (`meta["val"]`), the result PyTorch's own shape rules
computed: each lowered op's result is checked against it, so a wrong lowering is an error at
compile time, never a silently wrong answer.

Values while lowering: a tensor node is an HloInstruction; a multi-output op a list of them (None
for an output the table does not lower); a SymInt node an hlocc size (`int` or `DimExpr`).
Tensor placeholders become the entry's parameters, in order; SymInt placeholders become the size
they stand for (hlocc binds it from the tensor sizes). The entry's root is a tuple of the outputs
that are computed; outputs that are inputs, sizes or None are returned by the caller as they are
(`LoweredGraph.outputs`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hlocc.errors import HloError, UnsupportedError
from hlocc.frontends.torch.folding import KnownValues
from hlocc.frontends.torch.types import divisibility, element_type, is_tensor, range_guards, tensor_shape, to_dim
from hlocc.frontends.torch.views import input_view, is_view_node
from hlocc.hlo.attributes import PadDim
from hlocc.hlo.guards import ShapeGuard, SizeComparison, SizePredicate
from hlocc.hlo.ir import HloComputation, HloInstruction, HloModule
from hlocc.hlo.symbolic import Dim, DimExpr, mod, symbol
from hlocc.hlo.types import Shape, primitive_type


@dataclass(frozen=True)
class Output:
    """Where one graph output comes from: `kind` is "result" (element `index` of the root tuple),
    "number" (that element as a Python number: a SymFloat PyTorch computes from sizes),
    "input" (graph input `index`, returned as is), "view" (a view of a graph input or of another
    output, made by the function `value` of the graph's inputs then outputs: views.input_view),
    "size" (the size `value`, evaluated per call), or "value" (the Python value `value`, e.g. None)."""

    kind: str
    index: int = 0
    value: Any = None
    broadcast: tuple[int, ...] = ()  # a result's dims whose eager stride is 0 (an expand): returned so


def broadcast_dims(meta: Any) -> tuple[int, ...]:
    """The dims of an FX value's tensor whose stride is 0 (its eager form is an expand)."""
    strides = meta.stride() if is_tensor(meta) else ()
    return tuple(d for d, s in enumerate(strides) if isinstance(s, int) and s == 0)


@dataclass
class LoweredGraph:
    """An FX graph as an HloModule: `parameters[i]` is the graph input that is entry parameter i;
    `outputs` how to build the graph's outputs from the root tuple."""

    module: HloModule
    parameters: list[int]
    outputs: list[Output]
    ops: dict[str, int] = field(default_factory=dict)  # ATen op → count, for explain()
    # (root tuple index of a pred scalar, message): the graph's `_assert_async` checks, which the
    # caller raises RuntimeError(message) for where the value is false (ops_elementwise)
    assertions: list[tuple[int, str]] = field(default_factory=list)
    # graph input -> its size's name, for the inputs passed as Python ints (SymInts whose value the
    # graph uses as data and no tensor input has as a size): each an s32[] entry parameter
    # (`size_parameter`), and bound by its value where a "size" output reads it
    number_inputs: dict[int, str] = field(default_factory=dict)


def op_name(target: Any) -> str:
    """The table key of an FX node target: `aten.add.Tensor`, `prims.convert_element_type.default`,
    or a Python operator's name (`add`, `getitem`)."""
    if hasattr(target, "_schema") or hasattr(target, "_overloadname"):
        return str(target)
    return getattr(target, "__name__", str(target))


def unsupported_ops(graph_module: Any) -> dict[str, str]:
    """The ops of the graph the table does not lower, each with the reason."""
    from hlocc.frontends.torch.table import why_not_lowered

    missing: dict[str, str] = {}
    for node in graph_module.graph.nodes:
        if node.op == "call_function":
            name = op_name(node.target)
            why = why_not_lowered(name)
            if why is not None:
                missing[name] = why
    return missing


class LoweringContext:
    """What an op rule sees: the node, its result shape(s) from PyTorch, and the instruction
    helpers (`add`, `constant`, `convert`, `broadcast_to`, `reducer`)."""

    def __init__(self, lowering: _Lowering, node: Any):
        self.lowering = lowering
        self.node = node
        self.computation = lowering.entry

    # -- the node's results --------------------------------------------------------------------
    @property
    def val(self) -> Any:
        return self.node.meta.get("val")

    @property
    def shape(self) -> Shape:
        """The result shape PyTorch computed for the node (its first result for several)."""
        val = self.val
        return tensor_shape(val[0] if isinstance(val, (tuple, list)) else val, self.lowering.facts)

    def shapes(self) -> list[Shape | None]:
        return [tensor_shape(v, self.lowering.facts) if is_tensor(v) else None for v in self.val]

    @property
    def element_type(self) -> str:
        return self.shape.element_type.name

    # -- instruction helpers -------------------------------------------------------------------
    def add(self, opcode: str, operands: Sequence[HloInstruction] = (), attrs: dict | None = None, *,
            shape: Shape | None = None, literal: Any = None) -> HloInstruction:
        """A new instruction of the entry (shape inferred by HLO's rules when None)."""
        try:
            return self.computation.add(opcode, list(operands), attrs, shape=shape, literal=literal)
        except HloError as e:
            raise self.error(f"{opcode}: {e}") from None

    def constant(self, value: Any, element_type: str) -> HloInstruction:
        """A scalar constant of `element_type` (a Python number, or a size: a symbolic size is the
        value of a parameter dimension that has it; a float computed from sizes is already a
        scalar instruction)."""
        if isinstance(value, HloInstruction):
            return self.convert(value, element_type)
        if isinstance(value, DimExpr):
            return self.convert(self.lowering.size_value(self, value), element_type)
        et = primitive_type(element_type)
        return self.add("constant", shape=Shape.array(et, ()), literal=np.array(value).astype(et.dtype))

    def full(self, value: Any, shape: Shape) -> HloInstruction:
        scalar = self.constant(value, shape.element_type.name)
        return scalar if shape.rank == 0 else self.add("broadcast", [scalar], {"dimensions": ()}, shape=shape)

    def size_of(self, x: HloInstruction, dims: Sequence[int], element_type: str) -> HloInstruction:
        """The product of `x`'s sizes along `dims` as a scalar of `element_type` (a constant when
        static; from `get-dimension-size` for symbolic sizes)."""
        static, result = 1, None
        for d in dims:
            size = x.shape.dims[d]
            if isinstance(size, int):
                static *= size
                continue
            value = self.convert(self.add("get-dimension-size", [x], {"dimensions": (d,)},
                                          shape=Shape.array("s32", ())), element_type)
            result = value if result is None else self.add("multiply", [result, value])
        if result is None:
            return self.constant(static, element_type)
        return result if static == 1 else self.add("multiply", [result, self.constant(static, element_type)])

    def convert(self, x: HloInstruction, element_type: str) -> HloInstruction:
        if x.shape.element_type.name == element_type:
            return x
        return self.add("convert", [x], shape=x.shape.with_element_type(primitive_type(element_type)))

    def reshape(self, x: HloInstruction, dims: Sequence[Dim]) -> HloInstruction:
        if tuple(x.shape.dims) == tuple(dims):
            return x
        return self.add("reshape", [x], shape=x.shape.with_dims(list(dims)))

    def broadcast_to(self, x: HloInstruction, dims: Sequence[Dim]) -> HloInstruction:
        """`x` broadcast to `dims` by PyTorch's rule (trailing dimensions aligned, size 1 stretched)."""
        dims = tuple(dims)
        if tuple(x.shape.dims) == dims:
            return x
        offset = len(dims) - x.shape.rank
        if offset < 0:
            raise self.error(f"cannot broadcast {x.shape} to {list(dims)}")
        kept = [i for i, d in enumerate(x.shape.dims) if not (d == 1 and dims[offset + i] != 1)]
        x = self.reshape(x, [x.shape.dims[i] for i in kept])
        for j, i in enumerate(kept):
            if x.shape.dims[j] != dims[offset + i]:
                x = self.matched_size(x, j, dims, offset + i)
        return self.add("broadcast", [x], {"dimensions": tuple(offset + i for i in kept)},
                        shape=x.shape.with_dims(list(dims)))

    def matched_size(self, x: HloInstruction, dim: int, target: Sequence[Dim], target_dim: int) -> HloInstruction:
        """`x` with dimension `dim` of the size of `target[target_dim]` (broadcasting to `target`),
        where PyTorch's rule needs the two equal and nothing proved them so (a static value put into a symbolic dim:
        index_put's meta function checks no broadcast): a module guard checks them equal at each
        call, an ArgumentError naming the op and both sizes as eager's RuntimeError does, and a pad
        by their difference (0 whenever the guard holds) gives `x` the size."""
        have, size = x.shape.dims[dim], target[target_dim]
        if isinstance(have, int) and isinstance(size, int):
            raise self.error(f"cannot broadcast {x.shape} to {list(target)}")
        where = self.where().replace("{", "{{").replace("}", "}}")
        shown = [str(d) for d in target]
        self.lowering.module.guards.append(ShapeGuard(
            SizePredicate((SizeComparison("EQ", have, size),)),
            f"{where}: a tensor of size {{0}} cannot be broadcast to size {{1}} (dimension {target_dim} of "
            f"[{', '.join(shown)}]): PyTorch's broadcasting needs equal sizes or 1", (have, size)))
        padding = [PadDim(0, 0)] * x.shape.rank
        padding[dim] = PadDim(0, size - have)
        return self.add("pad", [x, self.constant(0, x.shape.element_type.name)], {"padding": tuple(padding)},
                        shape=x.shape.with_dims([size if d == dim else n for d, n in enumerate(x.shape.dims)]))

    def operand(self, value: Any, element_type: str, dims: Sequence[Dim] | None = None) -> HloInstruction:
        """A tensor or Python scalar operand of an elementwise op, converted to `element_type` and
        broadcast to `dims` (when given)."""
        if not isinstance(value, HloInstruction):
            value = self.constant(value, element_type)
        value = self.convert(value, element_type)
        return self.broadcast_to(value, dims) if dims is not None else value

    def reducer(self, opcode: str, element_type: str) -> HloComputation:
        """The scalar computation `opcode(a, b)` of `element_type` (one per module and kind)."""
        return self.lowering.reducer(opcode, element_type)

    def binary_computation(self, name: str, element_type: str,
                           build: Callable[[HloComputation, HloInstruction, HloInstruction], HloInstruction]
                           ) -> HloComputation:
        """A scalar computation of two `element_type` parameters (a, b) whose root `build(comp, a, b)`
        makes (a reducer of more than one op: logaddexp); one per module, name and type."""
        return self.lowering.reducer(name, element_type, build)

    def error(self, why: str) -> UnsupportedError:
        return UnsupportedError(f"{self.where()}: {why}")

    def where(self) -> str:
        stack = self.node.meta.get("stack_trace")
        line = stack.strip().splitlines()[-2].strip() if stack and len(stack.strip().splitlines()) >= 2 else ""
        return f"node '{self.node.name}' ({op_name(self.node.target)}){' at ' + line if line else ''}"


class _Lowering:
    def __init__(self, graph_module: Any, table: dict[str, Callable], name: str, constants: dict[str, Any],
                 device: str = "cpu", facts: dict[str, Dim] | None = None):
        self.gm = graph_module
        self.facts = facts or {}  # symbol → its multiple form (types.divisibility)
        self.device = device  # the torch device type of the graph's tensor inputs ("cpu", "cuda")
        self.table = table
        self.module = HloModule(name)
        self.entry = self.module.add_computation(HloComputation(f"{name}.entry", is_entry=True))
        self.constants = constants  # placeholder name → tensor baked in as a constant
        self.values: dict[Any, Any] = {}
        self.parameters: list[int] = []
        self._reducers: dict[tuple[str, str], HloComputation] = {}
        self.ops: dict[str, int] = {}
        self.known = KnownValues()  # nodes whose values depend on no input
        self.assertions: list[tuple[HloInstruction, str]] = []  # (pred scalar, message): LoweredGraph
        self.checks: list[tuple[int, str]] = []  # the same by root tuple index (output())
        self.graph_inputs: dict[Any, int] = {}  # placeholder node -> graph input number, if passed per call
        self.input_count = 0  # the graph's placeholders
        self.size_inputs: list[tuple[DimExpr, int]] = []  # (a SymInt input's size, its graph input number)
        self._size_parameters: list[tuple[DimExpr, HloInstruction]] = []

    def run(self) -> LoweredGraph:
        inputs = 0
        outputs: list[Output] = []
        for node in self.gm.graph.nodes:
            if node.op == "placeholder":
                self.values[node] = self.placeholder(node, inputs)
                if node.name not in self.constants:
                    self.graph_inputs[node] = inputs
                inputs += 1
                self.input_count = inputs
            elif node.op == "get_attr":
                self.values[node] = self.attribute_constant(node)
            elif node.op == "call_function":
                self.values[node] = self.call(node)
            elif node.op == "output":
                outputs = self.output(node)
            else:
                raise UnsupportedError(f"node '{node.name}': FX op '{node.op}' is not lowered (not a core ATen graph)")
        self.module.computations[:] = self.module.computation_post_order()
        numbers = {self.parameters[p.parameter_number]: min(size.variables) for size, p in self._size_parameters}
        return LoweredGraph(self.module, self.parameters, outputs, self.ops, self.checks, numbers)

    # -- nodes -----------------------------------------------------------------------------------
    def placeholder(self, node: Any, index: int) -> Any:
        val = node.meta.get("val")
        if node.name in self.constants:
            tensor = self.constants[node.name]
            return self.constant_tensor(tensor, node.name)
        if is_tensor(val):
            device = getattr(getattr(val, "device", None), "type", "cpu")
            if device != self.device:
                raise UnsupportedError(f"input '{node.name}' is on {val.device}; the graph is compiled for "
                                       f"{self.device} tensors")
            number = len(self.parameters)
            self.parameters.append(index)
            param = HloInstruction(self.entry.unique_name(node.name), "parameter", tensor_shape(val, self.facts),
                                   parameter_number=number)
            return self.entry.add_fresh(param)
        if val is None and "val" not in node.meta:
            raise UnsupportedError(f"input '{node.name}' has no FakeTensor (meta['val']): lower the graphs of "
                                   "aot_autograd, make_fx or torch.export, which carry PyTorch's shapes")
        if val is None or isinstance(val, (int, float, bool)) or hasattr(val, "node"):
            if not hasattr(val, "node"):
                return val
            dim = to_dim(val, self.facts)
            if isinstance(dim, DimExpr):
                self.size_inputs.append((dim, index))
            return dim
        raise UnsupportedError(f"input '{node.name}' of type {type(val).__name__} is not lowered")

    def attribute_constant(self, node: Any) -> HloInstruction:
        target = self.gm
        for part in node.target.split("."):
            target = getattr(target, part)
        return self.constant_tensor(target, node.name)

    def constant_tensor(self, tensor: Any, name: str) -> HloInstruction:
        from torch._subclasses.fake_tensor import unset_fake_temporarily

        from hlocc.frontends.torch.tensors import to_numpy

        # aot_autograd compiles a graph that mutates an input with its FakeTensorMode still active:
        # detach() of a real constant (`x[:, 0] = 0.0` lifts the 0.0) would be refused by that mode
        with unset_fake_temporarily():
            array = to_numpy(tensor.detach().cpu()).copy()  # (a CUDA model's weights: read once, baked in)
        shape = Shape.array(element_type(tensor.dtype), array.shape)
        return self.entry.add("constant", shape=shape, literal=array, name=name)

    def call(self, node: Any) -> Any:
        name = op_name(node.target)
        self.ops[name] = self.ops.get(name, 0) + 1
        from hlocc.frontends.torch.table import refusal

        rule = self.table.get(name)
        cx = LoweringContext(self, node)
        if rule is None or refusal(name):
            raise cx.error(refusal(name) or "no lowering for this op")
        known = self.known.evaluate(node, name)
        if known is not None and self.known.should_emit(node, known):
            array = self.known.literal(known)  # computed once, by PyTorch (folding.py)
            result = self.entry.add("constant", shape=Shape.array(element_type(known.dtype), array.shape),
                                    literal=array, name=node.name)
        else:
            args = [self.value(a) for a in node.args]
            kwargs = {k: self.value(v) for k, v in node.kwargs.items()}
            result = rule(cx, *args, **kwargs)
        self.check_result(cx, result)
        return result

    def value(self, arg: Any) -> Any:
        if isinstance(arg, (list, tuple)):
            return type(arg)(self.value(a) for a in arg)
        if type(arg).__name__ == "Node":
            return self.values[arg]
        return arg

    def check_result(self, cx: LoweringContext, result: Any) -> None:
        """The lowered result against PyTorch's: same element type and sizes."""
        val = cx.val
        pairs = zip(result, val) if isinstance(result, list) and isinstance(val, (list, tuple)) else [(result, val)]
        for got, want in pairs:
            if isinstance(got, HloInstruction) and is_tensor(want):
                expected = tensor_shape(want, self.facts)
                if got.shape != expected:
                    raise cx.error(f"lowered to {got.shape}, PyTorch computes {expected} (a lowering bug)")

    def output(self, node: Any) -> list[Output]:
        results: list[HloInstruction] = []
        outputs = []
        parameter_of = {id(p): i for i, p in enumerate(self.entry.parameters)}
        for arg in node.args[0]:
            value = self.value(arg)
            # an output that is the graph's input itself; an op that lowered to the input (x.clone(),
            # x.to(copy=True)) is a result, copied out of the input as eager's is a tensor of its own
            placeholder = getattr(arg, "op", "") == "placeholder"
            view = None if placeholder else input_view(arg, self.graph_inputs)
            if isinstance(value, HloInstruction) and id(value) in parameter_of and placeholder:
                outputs.append(Output("input", self.parameters[parameter_of[id(value)]]))
            elif view is not None:  # (eager's view of the input itself, not a copy: views.py)
                outputs.append(Output("view", value=view))
            elif isinstance(value, HloInstruction):  # (a number computed from sizes: a float saved for
                meta = getattr(arg, "meta", {}).get("val")  # backward, returned as one)
                number = not is_tensor(meta)
                outputs.append(Output("number" if number else "result", len(results),
                                      broadcast=() if number else broadcast_dims(meta)))
                results.append(value)
            elif isinstance(value, DimExpr):
                outputs.append(Output("size", value=value))
            else:
                outputs.append(Output("value", value=value))
        self._views_of_outputs(list(node.args[0]), outputs)
        for condition, message in self.assertions:  # (after the outputs: their indices stay the outputs')
            self.checks.append((len(results), message))
            results.append(condition)
        self.entry.root = self.entry.add("tuple", results, name="outputs")
        return outputs

    def _views_of_outputs(self, args: list, outputs: list[Output]) -> None:
        """An output that is a view of another output (`y = x * 2; return y, y[1:]`, or `y` twice) is
        eager's view of that output's tensor, as eager returns it (views.py; the replay's arguments
        are the graph's inputs, then its outputs): they were separate tensors, so a write to one did
        not show in the other. The bases are results computed by an op that is not a view, each the
        first output of its node; an expanded result (`broadcast`) is rebuilt by the caller, not one."""
        first = self.input_count  # (the outputs' places in the replay's arguments)
        roots = dict(self.graph_inputs)
        for j, (arg, out) in enumerate(zip(args, outputs)):
            if out.kind == "result" and not out.broadcast and arg not in roots and not is_view_node(arg):
                roots[arg] = first + j
        for k, (arg, out) in enumerate(zip(args, outputs)):
            if out.kind == "result" and not out.broadcast and roots.get(arg) != first + k:
                view = input_view(arg, roots)
                if view is not None:
                    outputs[k] = Output("view", value=view)

    # -- shared pieces ---------------------------------------------------------------------------
    def reducer(self, opcode: str, element_type: str, build: Callable | None = None) -> HloComputation:
        key = (opcode, element_type)
        if key not in self._reducers:
            comp = HloComputation(f"{opcode}_{element_type}")
            self.module.add_computation(comp)
            scalar = Shape.array(element_type, ())
            a = comp.add_fresh(HloInstruction(comp.unique_name("a"), "parameter", scalar, parameter_number=0))
            b = comp.add_fresh(HloInstruction(comp.unique_name("b"), "parameter", scalar, parameter_number=1))
            # "assign" (a scatter that overwrites) returns the update
            if build is not None:
                comp.root = build(comp, a, b)
            else:
                comp.root = b if opcode == "assign" else comp.add(opcode, [a, b], shape=scalar)
            self._reducers[key] = comp
        return self._reducers[key]

    def size_parameter(self, size: DimExpr) -> HloInstruction | None:
        """An s32[] entry parameter with the value of graph input `size` (a SymInt dynamo passes as
        a number where the graph uses its value and takes no tensor that has it as a size:
        `x * y.shape[0]`), made once; None where no graph input is that size, or on a device
        backend (whose inputs go in through DLPack: a number has no such form)."""
        for known, param in self._size_parameters:
            if known == size:
                return param
        index = next((i for known, i in self.size_inputs if known == size), None)
        if index is None or self.device != "cpu":
            return None
        param = HloInstruction(self.entry.unique_name(f"size_{size}"), "parameter", Shape.array("s32", ()),
                               parameter_number=len(self.parameters))
        self.parameters.append(index)
        self._size_parameters.append((size, self.entry.add_fresh(param)))
        return self._size_parameters[-1][1]

    def size_value(self, cx: LoweringContext, size: DimExpr) -> HloInstruction:
        """An s32 scalar with the value of a symbolic size: a parameter's dimension, or computed
        from those (`mod(s - 1, s)`, roll's shift), floordiv and mod rounding down as DimExpr's."""
        scalar = Shape.array("s32", ())

        def dimension(x: DimExpr) -> HloInstruction | None:
            """A parameter dimension of size `x`, or of `k * x` divided by k (types.divisibility)."""
            for param in self.entry.parameters:
                for d, dim in enumerate(param.shape.dims):
                    k = dim // x if isinstance(dim, DimExpr) and mod(dim, x) == 0 else None
                    if isinstance(k, int) and k > 0:
                        size = cx.add("get-dimension-size", [param], {"dimensions": (d,)}, shape=scalar)
                        return size if k == 1 else cx.add("divide", [size, value(k)], shape=scalar)
            return None

        def value(x: Dim) -> HloInstruction:
            if isinstance(x, int):
                return cx.add("constant", shape=scalar, literal=np.asarray(x, np.int32))
            found = dimension(x)
            if found is not None:
                return found
            total = None
            for monomial, coefficient in x.terms:
                term = None if coefficient == 1 and monomial else value(coefficient)
                for atom, power in monomial:
                    base = atom_value(atom)
                    for _ in range(power):
                        term = base if term is None else cx.add("multiply", [term, base], shape=scalar)
                total = term if total is None else cx.add("add", [total, term], shape=scalar)
            return total

        def atom_value(atom) -> HloInstruction:
            if atom.op == "var":
                found = dimension(symbol(atom.args[0]))
                if found is None:
                    found = self.size_parameter(symbol(atom.args[0]))
                if found is None:
                    raise cx.error(f"the value of the symbolic size '{size}' is used as data, and no input of "
                                   f"the graph has '{atom}' as a size or is its number")
                return found
            a, b = value(atom.args[0]), value(atom.args[1])  # b > 0: a size, or a positive constant
            rem = cx.add("remainder", [a, b], shape=scalar)
            negative = cx.add("compare", [rem, value(0)], {"direction": "LT"}, shape=Shape.array("pred", ()))
            modulo = cx.add("select", [negative, cx.add("add", [rem, b], shape=scalar), rem], shape=scalar)
            if atom.op == "mod":
                return modulo
            return cx.add("divide", [cx.add("subtract", [a, modulo], shape=scalar), b], shape=scalar)

        return value(size)


def lower_graph(graph_module: Any, name: str = "torch_graph", *, table: dict | None = None,
                constants: dict[str, Any] | None = None, shape_env: Any = None, device: str = "cpu") -> LoweredGraph:
    """The HloModule of an FX graph of core ATen ops (see the module docstring). `constants` maps
    placeholder names to tensors to bake in (an ExportedProgram's parameters); `shape_env` (or a
    {symbol: ValueRanges} dict) gives the symbolic sizes' ranges, which become the module's guards,
    and the divisibility its guards imply (types.divisibility: a symbol `s` known even is `2*s_over_2`).
    Raises UnsupportedError naming the node and op for what the table does not lower, and for a
    tensor input on another torch device type than `device`."""
    from hlocc.frontends.torch.table import ATEN_OPS

    facts = divisibility(shape_env) if shape_env is not None else {}
    lowered = _Lowering(graph_module, ATEN_OPS if table is None else table, name, constants or {}, device,
                        facts).run()
    symbols = frozenset().union(*(p.shape.symbols for p in lowered.module.entry.parameters))
    # hlocc binds a size from the tensor inputs' sizes: one that only a SymInt input carries (aot_autograd's
    # synthetic base passes the sizes of the views it replaced so) has no value where a shape needs it
    unbound = frozenset().union(*(i.shape.symbols for c in lowered.module.computations
                                  for i in c.instructions)) - symbols
    if unbound:
        raise UnsupportedError(f"sizes {', '.join(sorted(unbound))} are shapes in the graph, and no tensor input has "
                               "them as a size (a SymInt input alone: hlocc binds sizes from tensor inputs)")
    if shape_env is not None and symbols:
        lowered.module.guards.extend(range_guards(shape_env, set(symbols), name, facts))
    return lowered

