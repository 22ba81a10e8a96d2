"""Shape rules of the control-flow, side-effecting and asynchronous ops: call, while, conditional,
fusion, custom-call, opt-barrier, tokens, infeed/outfeed, send/recv, copy-start/done and
async-start/update/done (XLA's ShapeInference::InferWhileShape, InferConditionalShape,
InferCallShape; HloVerifier for the rest).

Where XLA cannot infer a shape (custom-call, infeed, recv, async-start, ...) the rule returns the
declared shape after checking what the operands determine.
"""

from __future__ import annotations

from hlocc.hlo.ir import HloComputation, HloInstruction
from hlocc.hlo.opcodes import register_shape_rule
from hlocc.hlo.shape_rules_common import (
    check_arity,
    check_call_params,
    check_call_result,
    check_pred_scalar,
    computation_attr,
    declared,
    declared_shape,
    fail,
    scalar,
    signature,
    strip_layout,
)
from hlocc.hlo.types import PRED, S32, U32, Shape


def _callee_result(instr: HloInstruction, shapes: list[Shape], attr: str, role: str) -> Shape:
    """Check that computation `attr` takes the operands' shapes; return its root shape."""
    comp = computation_attr(instr, attr)
    check_call_params(instr, comp, role, shapes)
    return strip_layout(signature(comp)[1])


@register_shape_rule("call")
def infer_call(instr: HloInstruction, shapes: list[Shape]) -> Shape:
    """The result of to_apply, which takes the operands."""
    return _callee_result(instr, shapes, "to_apply", "to_apply")


@register_shape_rule("fusion")
def infer_fusion(instr: HloInstruction, shapes: list[Shape]) -> Shape:
    """The root shape of the fused computation `calls`, which takes the operands; `kind` one of
    XLA's four fusion kinds."""
    kind = str(instr.attrs.get("kind", "kLoop"))
    if kind not in _FUSION_KINDS:
        fail(instr, f"fusion kind '{kind}' is not one of {', '.join(_FUSION_KINDS)}")
    return _callee_result(instr, shapes, "calls", "fused")


_FUSION_KINDS = ("kLoop", "kInput", "kOutput", "kCustom")


@register_shape_rule("while")
def infer_while(instr: HloInstruction, shapes: list[Shape]) -> Shape:
    """The loop state's shape: body maps state to state; condition maps state to pred[]."""
    check_arity(instr, shapes, 1)
    state = strip_layout(shapes[0])
    condition = computation_attr(instr, "condition")
    body = computation_attr(instr, "body")
    check_call_params(instr, condition, "condition", [state])
    check_call_result(instr, condition, "condition", scalar(PRED))
    check_call_params(instr, body, "body", [state])
    check_call_result(instr, body, "body", state)
    return state


def _branches(instr: HloInstruction) -> list[HloComputation]:
    if "branch_computations" in instr.attrs:
        branches = list(instr.attrs["branch_computations"])
        if not branches:
            fail(instr, "conditional needs at least one branch computation")
        return branches
    return [computation_attr(instr, "true_computation"), computation_attr(instr, "false_computation")]


@register_shape_rule("conditional")
def infer_conditional(instr: HloInstruction, shapes: list[Shape]) -> Shape:
    """conditional(selector, operand per branch): the branches' common result. The selector is
    pred[] with true/false computations, s32[] with branch_computations; branch i takes operand i+1."""
    branches = _branches(instr)
    if not shapes:
        fail(instr, "conditional needs a branch selector operand")
    selector = shapes[0]
    if "branch_computations" in instr.attrs:
        if selector != scalar(S32):
            fail(instr, f"branch index of conditional must be s32[], got {selector}")
    else:
        check_pred_scalar(instr, selector, "predicate")
    check_arity(instr, shapes, 1 + len(branches))
    result = None
    for i, branch in enumerate(branches):
        check_call_params(instr, branch, f"branch {i}", [shapes[1 + i]])
        _, root = signature(branch)
        if result is None:
            result = strip_layout(root)
        elif not root.compatible(result):
            fail(instr, f"branch {i} computation '{branch.name}' returns {root}, but branch 0 returns {result}")
    return result


@register_shape_rule("custom-call")
def infer_custom_call(instr: HloInstruction, shapes: list[Shape]) -> Shape:
    """The declared shape (a custom call's result is whatever its target produces)."""
    if not isinstance(instr.attrs.get("custom_call_target"), str):
        fail(instr, "custom-call requires a string attribute 'custom_call_target'")
    return declared(instr)


@register_shape_rule("opt-barrier", "domain")
def infer_pass_through(instr: HloInstruction, shapes: list[Shape]) -> Shape:
    """The operand's shape."""
    check_arity(instr, shapes, 1)
    return strip_layout(shapes[0])


def _check_token(instr: HloInstruction, shape: Shape, role: str) -> None:
    if not shape.is_token:
        fail(instr, f"{role} of {instr.opcode} must be a token, got {shape}")


@register_shape_rule("after-all")
def infer_after_all(instr: HloInstruction, shapes: list[Shape]) -> Shape:
    """token[]: joins token operands."""
    for i, s in enumerate(shapes):
        _check_token(instr, s, f"operand {i}")
    return Shape.token()


@register_shape_rule("add-dependency")
def infer_add_dependency(instr: HloInstruction, shapes: list[Shape]) -> Shape:
    """add-dependency(operand, token): the operand's shape."""
    check_arity(instr, shapes, 2)
    _check_token(instr, shapes[1], "operand 1")
    return strip_layout(shapes[0])


@register_shape_rule("replica-id", "partition-id")
def infer_device_id(instr: HloInstruction, shapes: list[Shape]) -> Shape:
    """u32[]."""
    check_arity(instr, shapes, 0)
    return scalar(U32)


def _declared_tuple(instr: HloInstruction, arity: int) -> tuple[Shape, ...]:
    out = declared_shape(instr)
    if not out.is_tuple or len(out.tuple_shapes) != arity:
        fail(instr, f"{instr.opcode} must produce a {arity}-tuple, declared {out}")
    return out.tuple_shapes


@register_shape_rule("infeed")
def infer_infeed(instr: HloInstruction, shapes: list[Shape]) -> Shape:
    """infeed(token): the declared (data, token[])."""
    check_arity(instr, shapes, 1)
    _check_token(instr, shapes[0], "operand")
    _check_token(instr, _declared_tuple(instr, 2)[1], "result element 1")
    return declared(instr)


@register_shape_rule("outfeed")
def infer_outfeed(instr: HloInstruction, shapes: list[Shape]) -> Shape:
    """outfeed(data, token): token[]."""
    check_arity(instr, shapes, 2)
    _check_token(instr, shapes[1], "operand 1")
    return Shape.token()


@register_shape_rule("send")
def infer_send(instr: HloInstruction, shapes: list[Shape]) -> Shape:
    """send(data, token): (data, u32[] context, token[])."""
    check_arity(instr, shapes, 2)
    _check_token(instr, shapes[1], "operand 1")
    return Shape.tuple([strip_layout(shapes[0]), scalar(U32), Shape.token()])


@register_shape_rule("recv")
def infer_recv(instr: HloInstruction, shapes: list[Shape]) -> Shape:
    """recv(token): the declared (data, u32[] context, token[])."""
    check_arity(instr, shapes, 1)
    _check_token(instr, shapes[0], "operand")
    data, context, token = _declared_tuple(instr, 3)
    _check_token(instr, token, "result element 2")
    return Shape.tuple([strip_layout(data), scalar(U32), Shape.token()])


def _tuple_operand(instr: HloInstruction, shapes: list[Shape], min_size: int) -> tuple[Shape, ...]:
    check_arity(instr, shapes, 1)
    if not shapes[0].is_tuple or len(shapes[0].tuple_shapes) < min_size:
        fail(instr, f"operand of {instr.opcode} must be a tuple of at least {min_size} elements, got {shapes[0]}")
    return shapes[0].tuple_shapes


@register_shape_rule("send-done")
def infer_send_done(instr: HloInstruction, shapes: list[Shape]) -> Shape:
    """send-done(send): token[]."""
    _tuple_operand(instr, shapes, 3)
    return Shape.token()


@register_shape_rule("recv-done")
def infer_recv_done(instr: HloInstruction, shapes: list[Shape]) -> Shape:
    """recv-done(recv): (data, token[])."""
    elements = _tuple_operand(instr, shapes, 3)
    return Shape.tuple([strip_layout(elements[0]), Shape.token()])


@register_shape_rule("copy-start")
def infer_copy_start(instr: HloInstruction, shapes: list[Shape]) -> Shape:
    """(destination, source, u32[] context), the buffers of the operand's shape."""
    check_arity(instr, shapes, 1)
    operand = strip_layout(shapes[0])
    return Shape.tuple([operand, operand, scalar(U32)])


@register_shape_rule("copy-done")
def infer_copy_done(instr: HloInstruction, shapes: list[Shape]) -> Shape:
    """copy-done(copy-start): the copied value, element 0 of the operand."""
    return strip_layout(_tuple_operand(instr, shapes, 2)[0])


@register_shape_rule("async-start")
def infer_async_start(instr: HloInstruction, shapes: list[Shape]) -> Shape:
    """The declared ((operands...), result, context...); `calls` takes the operands and returns the
    result."""
    out = declared_shape(instr)
    comp = computation_attr(instr, "calls")
    if not out.is_tuple or len(out.tuple_shapes) < 2:
        fail(instr, f"async-start must produce ((operands), result, ...), declared {out}")
    check_call_params(instr, comp, "async", shapes)
    check_call_result(instr, comp, "async", out.tuple_shapes[1])
    return declared(instr)


@register_shape_rule("async-update")
def infer_async_update(instr: HloInstruction, shapes: list[Shape]) -> Shape:
    """The operand's (async context) shape."""
    _tuple_operand(instr, shapes, 2)
    return strip_layout(shapes[0])


@register_shape_rule("async-done")
def infer_async_done(instr: HloInstruction, shapes: list[Shape]) -> Shape:
    """The wrapped computation's result: element 1 of the async context."""
    return strip_layout(_tuple_operand(instr, shapes, 2)[1])
