"""The sort kernel's row loop in LLVM IR (codegen/emitters/sort.py writes the comparator): the
entry `<entry>(buffers..., [table of the dimension variables,] i64 thread, i64 row)` the block loop
calls once per row.

Per row:

    perm[i] = i                              i32 positions, in a scratch array
    insertion sort of each run of RUN        shift while less(x, perm[j - 1]): stable
    bottom-up merges of runs, width doubling perm and tmp in turn; a merge takes the right
                                             element only when less(right, left): stable; two
                                             runs already in order (not less(first right, last
                                             left)) are copied whole
    out_o[i] = operand_o[perm[i]]            for i < keep (top-k's indices: perm[i] itself)

A top-k of k up to SELECT_MAX keeps its k best keys in one pass instead (`select_best`).

`less(p, q)` calls the comparator on the elements at positions p and q of every operand (LLVM
inlines it and drops the loads of the operands it does not read). Stable for any comparator that
is a strict weak order (an unstable sort may be stable); a comparator that is not one (a FLOAT
compare of NaNs) gives some permutation of the row, as in XLA.

A key comparator whose compare is a total order on the key's bits (codegen/emitters/sort.py
`RadixKey`, what JAX emits for floats and integers) sorts rows of RADIX_MIN or more elements by a
stable LSD radix sort instead: the key computed once per element (`sort_key`), mapped to an
unsigned integer in the comparator's order, then one counting pass per byte over (key, position)
pairs: O(n) per row against the merge sort's O(n log n) comparator calls through the positions.
A lexicographic comparator's keys are sorted so one after another, the least significant first
(each later key read through the positions so far). A FLOAT compare is an order only without
NaN: a row whose keys hold one is merge sorted.

Why a merge sort: it is stable without a tie-breaking key, O(n log n) in the worst case, and
sorts positions, so payload operands move once, at the end; insertion sort below RUN elements
because it is the cheapest stable sort of a few elements (fewer branches and no copies).

Runtime dims: the sizes come from `@sort_sizes` (called once per row with the table of the
variables' values), scratch is always malloc'd, and a RadixKey row chooses between the radix and
the merge sort by its length at run time (both are compiled).

Scratch: the two position arrays (and, when an output may share bytes with an operand, a staging
array of the row's outputs written after every read) are on the stack up to STACK_BYTES, from
malloc above (freed at the row's end). With `check_bounds` every load and store of a buffer is
checked as the `check-bounds` pass checks kernel IR (same record, codegen/transforms/check_bounds.py):
an access outside its buffer touches element 0 instead and is reported after the launch.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from llvmlite import ir

from hlocc.codegen.llvm.types import declare_function
from hlocc.codegen.transforms.check_bounds import GLOBAL as BOUNDS_GLOBAL
from hlocc.codegen.transforms.check_bounds import RECORD, record_slots
from hlocc.errors import UnsupportedError
from hlocc.hlo.symbolic import Dim, DimExpr

if TYPE_CHECKING:
    from hlocc.codegen.emitters.sort import BufferGeometry, RadixKey, SortSpec

RUN = 16
"""Rows are first sorted in runs of this many elements by insertion sort."""
RADIX_MIN = 32
"""Rows of a RadixKey comparator at least this long are radix sorted (module doc). Measured on
1000 rows of f32 argsort (2-vCPU machine, shared): length 16 merge 0.26 ms against radix 0.43,
32: 1.01 against 0.54, 64: 7.0 against 0.80, 128: 19.9 against 1.34 (the histograms' clearing and
prefix sums are what a short row pays)."""
SELECT_MAX = 64
"""A top-k of up to this many keeps its best k in one pass (`select_best`): O(n) compares and, on
random data, O(k log(n / k)) insertions of up to k moves each, against the radix sort of the row.
Measured (f32, largest, shared 2-vCPU machine): [8, 32000] k=40 0.23 ms against the radix sort's
6.8, k=64 0.30 against 6.7, [1, 150000] k=5 0.11 against 2.1, [64, 1000] k=10 0.08 against 0.54."""
SELECT_MOVES = 8
"""A selection that has moved keys more than this many times the row's length sorts the row
instead: ascending input (every element enters, k moves each) took 23 ms at [8, 32000] k=64
against the radix sort's 6.8."""
STACK_BYTES = 64 * 1024
"""Scratch up to this size is on the stack (a pool thread's stack is 8 MiB); beyond, malloc."""

COMPARATOR = "sort_compare"
"""The comparator function's name in the kernel module (codegen/emitters/sort.py writes it)."""
KEY = "sort_key"
"""The prefix of the key functions' names, `sort_key<k>` for RadixKey k."""
SIZES = "sort_sizes"
"""The function of a kernel with runtime dims that computes the symbolic sizes (`SortSpec.sizes`)."""

I1, I32, I64, PTR, VOID = ir.IntType(1), ir.IntType(32), ir.IntType(64), ir.PointerType(), ir.VoidType()


def _c(value: int, ty: ir.Type = I64) -> ir.Constant:
    return ir.Constant(ty, value)


class _RowSort:
    """Builds the entry function (module doc) for one SortSpec."""

    def __init__(self, module: ir.Module, name: str, spec: SortSpec, noalias: bool, check_bounds: bool):
        self.module, self.spec, self.noalias = module, spec, noalias
        self.buffers = [*spec.operands, *spec.outputs]
        symbolic = bool(spec.sizes)  # the table of the dimension variables' values follows the buffers
        self.fn = ir.Function(module, ir.FunctionType(VOID, [PTR] * (len(self.buffers) + symbolic) + [I64, I64]),
                              name=name)
        self.fn.linkage = "internal"
        self.fn.attributes.add("alwaysinline")
        self.b = ir.IRBuilder(self.fn.append_basic_block("entry"))
        self.table = self.fn.args[len(self.buffers)] if symbolic else None
        self.less_fn = module.get_global(COMPARATOR)
        self.key_fns = [module.get_global(f"{KEY}{k}") for k in range(len(spec.keys))]
        self.record = self._bounds_record() if check_bounds else None
        self.frees: list[list[ir.Value]] = [[]]
        self.sizes: dict[DimExpr, ir.Value] = {}
        if symbolic:
            values = self.call(module.get_global(SIZES), [])
            for k, d in enumerate(spec.sizes):
                self.sizes[d] = values if len(spec.sizes) == 1 else self.b.extract_value(values, k)
        self.n = self.size(spec.length)

    def size(self, d: Dim) -> ir.Value:
        """A size of the spec (an int, or a DimExpr computed by `@sort_sizes`) as an i64."""
        return self.sizes[d] if d in self.sizes else _c(int(d))

    def call(self, function: ir.Function, args: list[ir.Value]) -> ir.Value:
        """A call of one of the module's functions; a kernel with runtime dims passes its table to
        those that take it (`lower-symbol-values` appends it to every public function)."""
        if len(function.args) > len(args):
            args = [*args, self.table]
        return self.b.call(function, args)

    # -- helpers -------------------------------------------------------------------------------------
    def var(self, ty: ir.Type, init: ir.Value | None = None) -> ir.AllocaInstr:
        """A mutable local (LLVM's mem2reg makes it a register)."""
        with self.b.goto_entry_block():
            slot = self.b.alloca(ty)
        if init is not None:
            self.b.store(init, slot)
        return slot

    @contextmanager
    def while_(self, condition: Callable[[], ir.Value]) -> Iterator[None]:
        """Blocks of `while condition(): <body>`: the caller emits the body in the context."""
        header, body, done = (self.fn.append_basic_block(n) for n in ("while", "do", "done"))
        self.b.branch(header)
        self.b.position_at_end(header)
        self.b.cbranch(condition(), body, done)
        self.b.position_at_end(body)
        yield
        self.b.branch(header)
        self.b.position_at_end(done)

    @contextmanager
    def for_(self, start: ir.Value, end: ir.Value, step: ir.Value | None = None) -> Iterator[ir.Value]:
        """`for i in range(start, end, step)` (i64); yields i."""
        b = self.b
        i = self.var(I64, start)
        with self.while_(lambda: b.icmp_signed("<", b.load(i), end)):
            value = b.load(i)
            yield value
            b.store(b.add(b.load(i), step or _c(1)), i)

    def and_then(self, first: ir.Value, second: Callable[[], ir.Value]) -> ir.Value:
        """`first and second()`, `second` emitted in a block run only when `first` holds (a load
        it makes may be out of range otherwise)."""
        b = self.b
        here = b.block
        test, joined = self.fn.append_basic_block("and.then"), self.fn.append_basic_block("and.join")
        b.cbranch(first, test, joined)
        b.position_at_end(test)
        result = second()
        tested = b.block
        b.branch(joined)
        b.position_at_end(joined)
        phi = b.phi(I1)
        phi.add_incoming(ir.Constant(I1, 0), here)
        phi.add_incoming(result, tested)
        return phi

    def scratch(self, ty: ir.Type, count: Dim, times: int = 1) -> ir.Value:
        """An array of `count` (a size of the spec) × `times` elements of `ty`: on the stack, or
        malloc'd and freed at the end of the enclosing `scratch_scope` (a symbolic count: always
        malloc'd)."""
        width = ty.width // 8
        if not isinstance(count, DimExpr) and count * times * width <= STACK_BYTES:
            with self.b.goto_entry_block():
                slot = self.b.alloca(ty, size=_c(max(count * times, 1)))
            slot.align = 64
            return slot
        malloc = declare_function(self.module, "malloc", PTR, [I64])
        block = self.b.call(malloc, [self.b.mul(self.size(count), _c(times * width))])
        self.frees[-1].append(block)
        return block

    @contextmanager
    def scratch_scope(self) -> Iterator[None]:
        """The heap scratch made inside is freed at the end (where every use is done)."""
        self.frees.append([])
        yield
        free = declare_function(self.module, "free", VOID, [PTR])
        for block in self.frees.pop():
            self.b.call(free, [block])

    def _bounds_record(self) -> ir.GlobalVariable:
        """The check-bounds record: the one the pass made (sized for the comparator's arguments,
        which touch no buffer) resized for the kernel's buffers, or a new one."""
        ty = ir.ArrayType(I64, record_slots(len(self.buffers)))
        record = self.module.globals.get(BOUNDS_GLOBAL)
        if record is None:
            record = ir.GlobalVariable(self.module, ty, BOUNDS_GLOBAL)
        record.value_type = ty
        record.initializer = ir.Constant(ty, None)
        record.align = 64
        return record

    def element(self, buffer: int, base: ir.Value, position: ir.Value) -> ir.Value:
        """The address of element `position` (i64) along the row starting at `base` in buffer `buffer`."""
        b, geometry = self.b, self.buffers[buffer]
        stride = geometry.stride
        index = b.add(base, position) if stride == 1 else b.add(base, b.mul(position, self.size(stride)))
        if self.record is not None:
            size = self.size(geometry.shape.num_elements)
            ok = b.and_(b.icmp_signed(">=", index, _c(0)), b.icmp_signed("<", index, size))
            slot = b.select(ok, _c(0), _c(RECORD * (buffer + 2)))
            for k, value in enumerate((_c(1), index, size)):
                b.store(value, b.gep(self.record, [_c(0), b.add(slot, _c(k))], inbounds=True))
            index = b.select(ok, index, _c(0))
        return b.gep(self.fn.args[buffer], [index], inbounds=True, source_etype=ir.IntType(geometry.bits))

    def load(self, buffer: int, base: ir.Value, position: ir.Value) -> ir.Value:
        return self.b.load(self.element(buffer, base, position), typ=ir.IntType(self.buffers[buffer].bits))

    def row_base(self, geometry: BufferGeometry, indices: list[ir.Value]) -> ir.Value:
        base = _c(0)
        for index, step in zip(indices, geometry.steps):
            base = self.b.add(base, self.b.mul(index, self.size(step)))
        return base

    # -- the row -------------------------------------------------------------------------------------
    def build(self) -> None:
        b, spec = self.b, self.spec
        row = self.fn.args[-1]
        indices = []
        for size in reversed(spec.row_dims):  # the row's index in each non-sort dim
            indices.insert(0, b.urem(row, self.size(size)))
            row = b.udiv(row, self.size(size))
        self.bases = [self.row_base(g, indices) for g in self.buffers]
        if not spec.keys:
            self.merge_sort()
        elif is_selection(spec):
            self.select_best()
        else:
            self.sort_keys()
        b.ret_void()

    def sort_keys(self) -> None:
        """The row of a RadixKey comparator sorted: radix from RADIX_MIN elements, else merge."""
        b, spec = self.b, self.spec
        if spec.length in self.sizes:  # a runtime length: both
            with b.if_else(b.icmp_signed(">=", self.n, _c(RADIX_MIN))) as (radix, merge):
                with radix:
                    self.radix_sort()
                with merge:
                    self.merge_sort()
        elif spec.length >= RADIX_MIN:
            self.radix_sort()
        else:
            self.merge_sort()

    def select_best(self) -> None:
        """Top-k of a short k (`is_selection`): one pass over the row keeping the k best mapped
        keys so far, in order, with their positions; an element enters only when strictly better
        than the k-th (scanning in order, so equal keys keep the lower index first). A row that
        moves keys more than SELECT_MOVES times its length (an input in the worst order, where
        every element enters) stops and is sorted instead."""
        b, spec, n = self.b, self.spec, self.n
        (key,) = spec.keys
        ty, k = ir.IntType(key.bits), spec.keep
        with self.scratch_scope():
            best, positions = self.scratch(ty, k), self.scratch(I32, k)
            b.store(ir.Constant(ty, 0), b.gep(best, [_c(k - 1)], source_etype=ty))  # read before the k-th enters
            held, moves, index = self.var(I64, _c(0)), self.var(I64, _c(0)), self.var(I64, _c(0))
            budget = b.mul(n, _c(SELECT_MOVES))
            with self.while_(lambda: b.icmp_signed("<", b.load(index), n)):
                i = b.load(index)
                bits = self.call(self.key_fns[0], [self.load(key.operand, self.bases[key.operand], i)])
                value, _ = self.radix_bits(key, bits)
                count = b.load(held)
                full = b.icmp_signed("==", count, _c(k))
                last = b.load(b.gep(best, [_c(k - 1)], source_etype=ty), typ=ty)
                enters = b.or_(b.not_(full), b.icmp_unsigned("<", value, last))
                with b.if_then(enters):
                    j = self.var(I64, b.select(full, _c(k - 1), count))

                    def shifting() -> ir.Value:  # j > 0 and best[j - 1] > value
                        return self.and_then(b.icmp_signed(">", b.load(j), _c(0)), lambda: b.icmp_unsigned(
                            ">", b.load(b.gep(best, [b.sub(b.load(j), _c(1))], source_etype=ty), typ=ty), value))

                    with self.while_(shifting):
                        jv = b.load(j)
                        before = b.sub(jv, _c(1))
                        b.store(b.load(b.gep(best, [before], source_etype=ty), typ=ty),
                                b.gep(best, [jv], source_etype=ty))
                        b.store(self.get(positions, before), self.at(positions, jv))
                        b.store(before, j)
                    b.store(value, b.gep(best, [b.load(j)], source_etype=ty))
                    b.store(b.trunc(i, I32), self.at(positions, b.load(j)))
                    b.store(b.select(full, count, b.add(count, _c(1))), held)
                    moved = b.add(b.load(moves), b.add(b.sub(b.select(full, _c(k - 1), count), b.load(j)), _c(1)))
                    b.store(moved, moves)
                    b.store(b.select(b.icmp_signed("<", moved, budget), i, n), index)  # past the budget: stop
                b.store(b.add(b.load(index), _c(1)), index)
            with b.if_else(b.icmp_signed("<", b.load(moves), budget)) as (selected, stopped):
                with selected:
                    self.write_outputs(positions)
                with stopped:
                    self.sort_keys()

    def merge_sort(self) -> None:
        """The row sorted by insertion runs and merges, and its outputs written."""
        b, n = self.b, self.n
        with self.scratch_scope():
            perm, tmp = self.scratch(I32, self.spec.length), self.scratch(I32, self.spec.length)
            with self.for_(_c(0), n) as i:
                b.store(b.trunc(i, I32), b.gep(perm, [i], source_etype=I32))
            self.insertion_runs(perm)
            self.write_outputs(self.merges(perm, tmp))

    def less(self, p: ir.Value, q: ir.Value) -> ir.Value:
        """comparator(row[p], row[q]) over every operand (p, q: i32 positions)."""
        b = self.b
        p, q = b.sext(p, I64), b.sext(q, I64)
        args = []
        for k in range(len(self.spec.operands)):
            args += [self.load(k, self.bases[k], p), self.load(k, self.bases[k], q)]
        return self.call(self.less_fn, args)

    def at(self, array: ir.Value, i: ir.Value) -> ir.Value:
        return self.b.gep(array, [i], source_etype=I32)

    def get(self, array: ir.Value, i: ir.Value) -> ir.Value:
        return self.b.load(self.at(array, i), typ=I32)

    def insertion_runs(self, perm: ir.Value) -> None:
        b, n = self.b, self.n
        with self.for_(_c(0), n, _c(RUN)) as start:
            end = self.min(b.add(start, _c(RUN)), n)
            with self.for_(b.add(start, _c(1)), end) as i:
                x = self.get(perm, i)
                j = self.var(I64, i)

                def shifting() -> ir.Value:  # j > start and less(x, perm[j - 1])
                    return self.and_then(b.icmp_signed(">", b.load(j), start),
                                         lambda: self.less(x, self.get(perm, b.sub(b.load(j), _c(1)))))

                with self.while_(shifting):
                    jv = b.load(j)
                    b.store(self.get(perm, b.sub(jv, _c(1))), self.at(perm, jv))
                    b.store(b.sub(jv, _c(1)), j)
                b.store(x, self.at(perm, b.load(j)))

    def copy(self, dst: ir.Value, src: ir.Value, start: ir.Value, end: ir.Value) -> None:
        """dst[start:end] = src[start:end] (positions)."""
        self.copy_to(dst, start, src, start, end)

    def merges(self, perm: ir.Value, tmp: ir.Value) -> ir.Value:
        """The bottom-up merges; returns the array holding the sorted positions."""
        b, n = self.b, self.n
        if self.spec.length not in self.sizes and self.spec.length <= RUN:
            return perm
        src, dst = self.var(PTR, perm), self.var(PTR, tmp)
        width = self.var(I64, _c(RUN))
        with self.while_(lambda: b.icmp_signed("<", b.load(width), n)):
            w = b.load(width)
            s, d = b.load(src), b.load(dst)
            with self.for_(_c(0), n, b.mul(w, _c(2))) as lo:
                mid = self.min(b.add(lo, w), n)
                hi = self.min(b.add(mid, w), n)
                self.merge(s, d, lo, mid, hi)
            b.store(d, src)
            b.store(s, dst)
            b.store(b.mul(w, _c(2)), width)
        return b.load(src)

    def min(self, a: ir.Value, c: ir.Value) -> ir.Value:
        return self.b.select(self.b.icmp_signed("<", a, c), a, c)

    def merge(self, s: ir.Value, d: ir.Value, lo: ir.Value, mid: ir.Value, hi: ir.Value) -> None:
        """d[lo:hi] = the stable merge of the sorted runs s[lo:mid] and s[mid:hi]."""
        b = self.b
        single = b.icmp_signed(">=", mid, hi)
        with b.if_else(single) as (whole, two):
            with whole:
                self.copy(d, s, lo, hi)
            with two:
                ordered = b.not_(self.less(self.get(s, mid), self.get(s, b.sub(mid, _c(1)))))
                with b.if_else(ordered) as (in_order, interleave):
                    with in_order:
                        self.copy(d, s, lo, hi)
                    with interleave:
                        self.interleave(s, d, lo, mid, hi)

    def interleave(self, s: ir.Value, d: ir.Value, lo: ir.Value, mid: ir.Value, hi: ir.Value) -> None:
        b = self.b
        i, j, k = self.var(I64, lo), self.var(I64, mid), self.var(I64, lo)
        with self.while_(lambda: b.and_(b.icmp_signed("<", b.load(i), mid), b.icmp_signed("<", b.load(j), hi))):
            iv, jv, kv = b.load(i), b.load(j), b.load(k)
            left, right = self.get(s, iv), self.get(s, jv)
            take_right = self.less(right, left)
            b.store(b.select(take_right, right, left), self.at(d, kv))
            b.store(b.select(take_right, b.add(jv, _c(1)), jv), j)
            b.store(b.select(take_right, iv, b.add(iv, _c(1))), i)
            b.store(b.add(kv, _c(1)), k)
        iv, jv, kv = b.load(i), b.load(j), b.load(k)
        self.copy_to(d, kv, s, iv, mid)
        self.copy_to(d, b.add(kv, b.sub(mid, iv)), s, jv, hi)

    def copy_to(self, dst: ir.Value, at: ir.Value, src: ir.Value, start: ir.Value, end: ir.Value) -> None:
        """dst[at:at + end - start] = src[start:end]."""
        b = self.b
        memcpy = declare_function(self.module, "llvm.memcpy.p0.p0.i64", VOID, [PTR, PTR, I64, I1])
        b.call(memcpy, [self.at(dst, at), self.at(src, start), b.mul(b.sub(end, start), _c(4)), ir.Constant(I1, 0)])

    def radix_bits(self, key: RadixKey, bits: ir.Value) -> tuple[ir.Value, ir.Value | None]:
        """A key's bits as an unsigned integer in the comparator's order (RadixKey), and for a
        FLOAT compare whether the key is a NaN."""
        b = self.b
        ty = ir.IntType(key.bits)
        sign = ir.Constant(ty, 1 << (key.bits - 1))
        nan = None
        if key.order == "float":  # -0.0 is +0.0; a NaN is any magnitude above the infinity's
            nan = b.icmp_unsigned(">", b.and_(bits, ir.Constant(ty, (1 << (key.bits - 1)) - 1)),
                                  ir.Constant(ty, key.infinity))
            bits = b.select(b.icmp_unsigned("==", bits, sign), ir.Constant(ty, 0), bits)
        if key.order in ("total", "float"):  # negative: every bit flipped; else the sign bit set
            bits = b.xor(bits, b.or_(b.ashr(bits, ir.Constant(ty, key.bits - 1)), sign))
        elif key.order == "signed":
            bits = b.xor(bits, sign)
        return (b.not_(bits) if key.descending else bits), nan

    def radix_sort(self) -> None:
        """The row radix sorted by its keys, least significant first (each pass stable), and its
        outputs written. A row holding a NaN under a FLOAT compare (not an order: the radix
        sort's answer would be one of many) goes to the merge sort, which calls the comparator as
        written."""
        b, spec = self.b, self.spec
        with self.scratch_scope():
            positions = [self.scratch(I32, spec.length), self.scratch(I32, spec.length)]
            src, dst = self.var(PTR, positions[0]), self.var(PTR, positions[1])
            for level, k in enumerate(reversed(range(len(spec.keys)))):
                key = spec.keys[k]
                ty = ir.IntType(key.bits)
                keys = [self.scratch(ty, spec.length), self.scratch(ty, spec.length)]
                counts = self.scratch(I32, 256 * (key.bits // 8))
                nan = self.radix_keys(k, keys[0], counts, b.load(src), level == 0)
                if nan is None:
                    self.radix_passes(key, keys, counts, src, dst)
                    continue
                with b.if_else(b.load(nan)) as (unordered, ordered):  # one FLOAT key (comparator_keys)
                    with unordered:
                        self.merge_sort()
                    with ordered:
                        self.radix_passes(key, keys, counts, src, dst)
                        self.write_outputs(b.load(src))
                return
            self.write_outputs(b.load(src))

    def radix_keys(self, k: int, keys: ir.Value, counts: ir.Value, order: ir.Value, first: bool) -> ir.Value | None:
        """keys[i] = key k, mapped, of the row's element at order[i] (`first`: at i, and order[i]
        = i); every byte's histogram into `counts` from this one read; for a FLOAT compare a flag
        set when a key is a NaN."""
        b, n, key = self.b, self.n, self.spec.keys[k]
        ty, digits = ir.IntType(key.bits), key.bits // 8
        memset = declare_function(self.module, "llvm.memset.p0.i64", VOID, [PTR, ir.IntType(8), I64, I1])
        b.call(memset, [counts, ir.Constant(ir.IntType(8), 0), _c(1024 * digits), ir.Constant(I1, 0)])
        seen = self.var(I1, ir.Constant(I1, 0)) if key.order == "float" else None
        with self.for_(_c(0), n) as i:
            if first:
                b.store(b.trunc(i, I32), self.at(order, i))
            p = i if first else b.sext(self.get(order, i), I64)
            bits = self.call(self.key_fns[k], [self.load(key.operand, self.bases[key.operand], p)])
            value, nan = self.radix_bits(key, bits)
            if seen is not None:
                b.store(b.or_(b.load(seen), nan), seen)
            b.store(value, b.gep(keys, [i], source_etype=ty))
            for d in range(digits):
                at = self.count(counts, d, value)
                b.store(b.add(b.load(at, typ=I32), ir.Constant(I32, 1)), at)
        return seen

    def count(self, counts: ir.Value, d: int, value: ir.Value) -> ir.Value:
        """The address of the count of byte d of `value` (a mapped key)."""
        b, bits = self.b, value.type.width
        shifted = b.lshr(value, ir.Constant(value.type, 8 * d)) if d else value
        byte = b.zext(b.trunc(shifted, ir.IntType(8)), I64) if bits > 8 else b.zext(shifted, I64)
        return b.gep(counts, [b.add(_c(256 * d), byte)], source_etype=I32)

    def radix_passes(self, key: RadixKey, keys: list[ir.Value], counts: ir.Value, src_p: ir.AllocaInstr,
                     dst_p: ir.AllocaInstr) -> None:
        """The LSD passes of one key, one per byte that not every key shares (`radix_keys`'
        histograms), moving (key, position) pairs between `keys[0]`/`keys[1]` and the position
        arrays `src_p`/`dst_p` hold; `src_p` holds the sorted positions after."""
        b, n = self.b, self.n
        ty, digits = ir.IntType(key.bits), key.bits // 8
        count = functools.partial(self.count, counts)
        first = b.load(keys[0], typ=ty)  # every pass permutes the same keys: any one tells a shared byte
        src_k, dst_k = self.var(PTR, keys[0]), self.var(PTR, keys[1])
        for d in range(digits):
            shared = b.icmp_signed("==", b.load(count(d, first), typ=I32), b.trunc(n, I32))
            with b.if_then(b.not_(shared)):
                total = self.var(I32, ir.Constant(I32, 0))  # the counts become each byte's first slot
                with self.for_(_c(256 * d), _c(256 * (d + 1))) as j:
                    at = self.at(counts, j)
                    here = b.load(at, typ=I32)
                    b.store(b.load(total), at)
                    b.store(b.add(b.load(total), here), total)
                sk, sp, dk, dp = b.load(src_k), b.load(src_p), b.load(dst_k), b.load(dst_p)
                with self.for_(_c(0), n) as i:
                    value = b.load(b.gep(sk, [i], source_etype=ty), typ=ty)
                    at = count(d, value)
                    slot = b.load(at, typ=I32)
                    b.store(b.add(slot, ir.Constant(I32, 1)), at)
                    slot = b.sext(slot, I64)
                    b.store(value, b.gep(dk, [slot], source_etype=ty))
                    b.store(self.get(sp, i), self.at(dp, slot))
                b.store(dk, src_k)
                b.store(sk, dst_k)
                b.store(dp, src_p)
                b.store(sp, dst_p)

    def write_outputs(self, final: ir.Value) -> None:
        """out_o[i] = its source at final[i], for i < keep; through a staging array when an
        output may share bytes with an operand (every read before the first write)."""
        b, spec = self.b, self.spec
        first = len(spec.operands)
        outputs = range(first, len(self.buffers))

        def value(o: int, i: ir.Value) -> ir.Value:
            source = spec.sources[o - first]
            p = self.get(final, i)
            if source < 0:
                bits = self.buffers[o].bits
                return b.trunc(p, ir.IntType(bits)) if bits < 32 else b.sext(p, ir.IntType(bits)) if bits > 32 else p
            return self.load(source, self.bases[source], b.sext(p, I64))

        keep = self.size(spec.keep)
        if self.noalias:
            with self.for_(_c(0), keep) as i:
                for o in outputs:
                    b.store(value(o, i), self.element(o, self.bases[o], i))
            return
        if len({(g.steps, g.stride) for g in self.buffers}) > 1:
            raise UnsupportedError("sort kernel: an output shares bytes with an operand of another layout")
        stage = self.scratch(I64, spec.keep, len(outputs))
        with self.for_(_c(0), keep) as i:
            for n, o in enumerate(outputs):
                slot = b.gep(stage, [b.add(b.mul(i, _c(len(outputs))), _c(n))], source_etype=I64)
                b.store(b.zext(value(o, i), I64) if self.buffers[o].bits < 64 else value(o, i), slot)
        with self.for_(_c(0), keep) as i:
            for n, o in enumerate(outputs):
                slot = b.gep(stage, [b.add(b.mul(i, _c(len(outputs))), _c(n))], source_etype=I64)
                staged = b.load(slot, typ=I64)
                bits = self.buffers[o].bits
                b.store(b.trunc(staged, ir.IntType(bits)) if bits < 64 else staged, self.element(o, self.bases[o], i))


def is_selection(spec: SortSpec) -> bool:
    """Whether the kernel keeps the first few positions of a row (top-k of k up to SELECT_MAX,
    known at compile time) by one selecting pass instead of sorting the row."""
    return (len(spec.keys) == 1 and spec.keys[0].order != "float" and isinstance(spec.keep, int)
            and 0 < spec.keep <= SELECT_MAX and not (isinstance(spec.length, int) and spec.keep >= spec.length))


def add_sort_rows(module: ir.Module, name: str, spec: SortSpec, *, noalias: bool, check_bounds: bool) -> None:
    """Add the entry `name` (module doc) to the translated kernel module holding the functions
    COMPARATOR, KEY for a RadixKey and SIZES for runtime dims (codegen/emitters/sort.py)."""
    _RowSort(module, name, spec, noalias, check_bounds).build()


__all__ = ["COMPARATOR", "KEY", "RADIX_MIN", "RUN", "SELECT_MAX", "SELECT_MOVES", "SIZES", "STACK_BYTES",
           "add_sort_rows", "is_selection"]
