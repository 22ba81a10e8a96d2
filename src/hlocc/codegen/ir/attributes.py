"""The `xla` dialect's attribute: `#xla.indexing_map<"...">`, an hlocc `IndexingMap` printed in XLA's
syntax, and `INDEX`, the index type the ops' dimension and symbol operands have."""

from __future__ import annotations

from xdsl.dialects.builtin import IndexType
from xdsl.ir import Data
from xdsl.irdl import irdl_attr_definition
from xdsl.parser import AttrParser
from xdsl.printer import Printer

from hlocc.analysis.affine_expr import IndexingError
from hlocc.analysis.indexing_map import IndexingMap
from hlocc.analysis.indexing_map_text import map_to_text, parse_indexing_map

INDEX = IndexType()




# -- the indexing-map attribute -------------------------------------------------------------------

@irdl_attr_definition
class IndexingMapAttr(Data[IndexingMap]):
    """An hlocc IndexingMap as an attribute: `#xla.indexing_map<"(d0)[s0] -> (...), domain: ...">`."""

    name = "xla.indexing_map"

    @classmethod
    def parse_parameter(cls, parser: AttrParser) -> IndexingMap:
        with parser.in_angle_brackets():
            start = parser.pos
            text = parser.parse_str_literal("indexing map")
            while (more := parser.parse_optional_str_literal()) is not None:
                text += more
            try:
                return parse_indexing_map(text)
            except IndexingError as e:
                parser.raise_error(f"invalid indexing map: {e}", start, parser.pos)

    def print_parameter(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            printer.print_string_literal(map_to_text(self.data))

    @property
    def indexing_map(self) -> IndexingMap:
        return self.data


def map_attr(m: IndexingMap | IndexingMapAttr) -> IndexingMapAttr:
    return m if isinstance(m, IndexingMapAttr) else IndexingMapAttr(m)


