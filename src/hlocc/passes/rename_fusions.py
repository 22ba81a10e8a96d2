"""`rename-fusions`: XLA's RenameFusions (run after the fusion passes). A fusion is named after
its kind and the opcodes of its roots' heroes, sorted and joined by `_` (`-` becomes `_`):
`loop_add_fusion`, `input_reduce_fusion`, `input_reduce_select_fusion`, and its computation
`fused_<heroes>` (`fused_add`); duplicates get XLA's `.1`, `.2` suffixes. kCustom fusions keep
their names. The hero of a root is `find_non_trivial_hero`'s, also for loop fusions (so a loop
fusion around a concatenate is `loop_concatenate_fusion`, as in XLA).
"""

from __future__ import annotations

from hlocc.analysis.fusion_adaptor import FusionAdaptor
from hlocc.analysis.hero import roots_and_heroes
from hlocc.hlo.ir import HloInstruction, HloModule
from hlocc.hlo.name_uniquer import NameUniquer
from hlocc.passes.base import HloPass, register_hlo_pass

_KIND_WORDS = {"kLoop": "loop", "kInput": "input", "kOutput": "output"}


def hero_names(fusion: HloInstruction) -> str:
    """The sorted, `_`-joined hero opcodes of a fusion's roots."""
    adaptor = FusionAdaptor.for_instruction(fusion)
    _, heroes = roots_and_heroes(adaptor)
    heroes = {h.opcode for h in heroes}
    return "_".join(sorted(heroes)).replace("-", "_")


@register_hlo_pass
class RenameFusions(HloPass):
    """See the module doc."""

    name = "rename-fusions"

    def run(self, module: HloModule) -> bool:
        fused = {id(i.attrs["calls"]) for i in module.all_instructions() if i.opcode == "fusion"}
        instruction_names = NameUniquer((i.name for i in module.all_instructions()), after_suffix=False)
        computation_names = NameUniquer((c.name for c in module.computations), after_suffix=False)
        changed = False
        for comp in module.computations:
            if id(comp) in fused:
                continue
            for instr in comp.instructions:
                kind = _KIND_WORDS.get(instr.attrs.get("kind")) if instr.opcode == "fusion" else None
                if kind is None:
                    continue
                heroes = hero_names(instr)
                instruction_names.release(instr.name)
                computation_names.release(instr.attrs["calls"].name)
                name = instruction_names.unique(f"{kind}_{heroes}_fusion")
                comp_name = computation_names.unique(f"fused_{heroes}")
                changed |= name != instr.name or comp_name != instr.attrs["calls"].name
                instr.name = name
                instr.attrs["calls"].name = comp_name
        return changed
