"""A character scanner for HLO text: positions, whitespace and comments, and the small lexical
pieces (names, integers, strings, balanced raw text) that the parser asks for in context.

HLO's lexer is context sensitive (`3x3` is a window size, `1_1x0_0` a padding, `b01f_01io->b01f`
dimension labels), so the parser drives the scanner and asks for the token it expects. Every error
is an HloParseError with line:column, the offending line and a caret.
"""

from __future__ import annotations

import re

from hlocc.errors import HloParseError, SourceLocation

NAME_RE = re.compile(r"%?([A-Za-z_][A-Za-z0-9_.\-]*)")
INT_RE = re.compile(r"[-+]?\d+")
NUMBER_RE = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")
_SKIP_RE = re.compile(r"(?:\s+|//[^\n]*|/\*.*?\*/)+", re.S)


class Scanner:
    def __init__(self, text: str, filename: str = "<hlo>"):
        self.text = text
        self.pos = 0
        self.filename = filename
        self._line_starts = [0] + [m.end() for m in re.finditer("\n", text)]

    # -- positions and errors -----------------------------------------------------------------
    def location(self, pos: int | None = None) -> tuple[int, int]:
        pos = self.pos if pos is None else pos
        lo, hi = 0, len(self._line_starts) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self._line_starts[mid] <= pos:
                lo = mid
            else:
                hi = mid - 1
        return lo + 1, pos - self._line_starts[lo] + 1

    def error(self, message: str, pos: int | None = None) -> HloParseError:
        if pos is None:
            self.skip()
            pos = self.pos
        place = self.source_location(pos)
        return HloParseError(message, line=place.line, column=place.column, source_line=place.source_line,
                             filename=self.filename)

    def source_location(self, pos: int) -> SourceLocation:
        """Where `pos` is: the file, line, column and the line's text."""
        line, column = self.location(pos)
        start = self._line_starts[line - 1]
        end = self.text.find("\n", start)
        return SourceLocation(self.filename, line, column, self.text[start:] if end < 0 else self.text[start:end])

    def expected(self, what: str) -> HloParseError:
        self.skip()
        if self.pos >= len(self.text):
            return self.error(f"expected {what}, found end of input")
        found = self.text[self.pos:self.pos + 12].split("\n")[0]
        return self.error(f"expected {what}, found '{found}'")

    # -- primitives ---------------------------------------------------------------------------
    def skip(self) -> None:
        # (most calls are at a token already: one character says so, without the regex)
        pos = self.pos
        if pos < len(self.text):
            c = self.text[pos]
            if c != "/" and not c.isspace():
                return
        m = _SKIP_RE.match(self.text, pos)
        if m:
            self.pos = m.end()

    def at_end(self) -> bool:
        self.skip()
        return self.pos >= len(self.text)

    def peek(self, n: int = 1) -> str:
        self.skip()
        return self.text[self.pos:self.pos + n]

    def accept(self, literal: str) -> bool:
        self.skip()
        if self.text.startswith(literal, self.pos):
            self.pos += len(literal)
            return True
        return False

    def expect(self, literal: str, what: str | None = None) -> None:
        if not self.accept(literal):
            raise self.expected(what or f"'{literal}'")

    def match(self, regex: re.Pattern) -> re.Match | None:
        self.skip()
        m = regex.match(self.text, self.pos)
        if m:
            self.pos = m.end()
        return m

    def peek_match(self, regex: re.Pattern) -> re.Match | None:
        self.skip()
        return regex.match(self.text, self.pos)

    def name(self, what: str = "a name") -> str:
        m = self.match(NAME_RE)
        if not m:
            raise self.expected(what)
        return m.group(1)

    def peek_name(self) -> str | None:
        m = self.peek_match(NAME_RE)
        return m.group(1) if m else None

    def keyword(self, word: str) -> bool:
        """Accept `word` only as a whole identifier."""
        m = self.peek_match(NAME_RE)
        if m and m.group(0) == word:
            self.pos = m.end()
            return True
        return False

    def integer(self, what: str = "an integer") -> int:
        m = self.match(INT_RE)
        if not m or (m.end() < len(self.text) and self.text[m.end()] in ".eE"):
            if m:
                self.pos = m.start()
            raise self.expected(what)
        return int(m.group(0))

    def string(self) -> str:
        self.skip()
        start = self.pos
        if not self.text.startswith('"', self.pos):
            raise self.expected("a string")
        i = self.pos + 1
        out = []
        while i < len(self.text):
            c = self.text[i]
            if c == "\\" and i + 1 < len(self.text):
                out.append(self.text[i:i + 2])
                i += 2
                continue
            if c == '"':
                self.pos = i + 1
                return "".join(out)
            if c == "\n":
                break
            out.append(c)
            i += 1
        raise self.error("unterminated string", start)

    def raw_balanced(self) -> str:
        """Text of one attribute value: a balanced `{...}`/`(...)`/`[...]` group, a string, or a bare
        token, up to the next ',' or ')' at depth 0 (strings respected)."""
        self.skip()
        start = self.pos
        depth = 0
        i = self.pos
        text = self.text
        closers = {"}": "{", ")": "(", "]": "["}
        while i < len(text):
            c = text[i]
            if c == '"':
                j = i + 1
                while j < len(text) and text[j] != '"':
                    j += 2 if text[j] == "\\" else 1
                if j >= len(text):
                    raise self.error("unterminated string", i)
                i = j + 1
                continue
            if c in "{([":
                depth += 1
            elif c in closers:
                if depth == 0:
                    break
                depth -= 1
                if depth == 0 and c == "}" and text[start] == "{":
                    i += 1
                    break
            elif depth == 0 and (c == "," or c == "\n"):
                break
            i += 1
        if depth != 0:
            raise self.error("unbalanced brackets in attribute value", start)
        self.pos = i
        value = text[start:i].strip()
        if not value:
            raise self.expected("an attribute value")
        return value
