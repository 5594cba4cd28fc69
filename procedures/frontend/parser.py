"""The SQL text layer of the front end: lexer, script splitter and the statement parser.

The CALL grammar is Iceberg's Spark 3.5 SQL extension (procedures.md §1.2), with two additions
from Spark 4: a bare ``NULL`` argument (meaning "not provided") and empty ``map()``/``array()``::

    CALL [catalog.]system.<name>( [arg (, arg)*] )
    arg      := expr | name '=>' expr
    expr     := literal | MAP '(' [expr (, expr)*] ')' | ARRAY '(' [expr (, expr)*] ')'
    literal  := ['-'] number | string+ | TRUE | FALSE | NULL | TIMESTAMP string | DATE string

Numbers take Spark's suffixes (``5L`` bigint, ``5S``, ``5Y``, ``1.0D``, ``1.0F``, ``1BD``), strings
Spark's quotes and backslash escapes; adjacent strings concatenate.  A script is split on ``;``
outside strings and comments.  :class:`Parser` is shared by the CALL parser and the DDL/DML front
end (:mod:`procedures.frontend.sqlddl`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from procedures.errors import SqlSyntaxError
from procedures.framework.sqltypes import (
    BIGINT, BOOLEAN, DATE, DOUBLE, FLOAT, INT, NULL, SMALLINT, STRING, TIMESTAMP, TIMESTAMP_NTZ, TINYINT,
    Literal, SqlType, common_type, to_decimal,
)

__all__ = [
    "Token", "tokenize", "syntax_error", "split_statements", "Statement", "CallStatement", "Parser",
    "parse_call", "is_call",
]


@dataclass(frozen=True, slots=True)
class Token:
    """A lexical token: ``kind`` is IDENT, QIDENT (back-ticked), STRING, NUMBER, OP or EOF."""

    kind: str
    text: str
    pos: int
    value: Any = None


_NUMBER = re.compile(r"(\d+\.?\d*|\.\d+)(E[+-]?\d+)?(BD|L|S|Y|D|F)?(?![A-Za-z0-9_])", re.IGNORECASE)
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ESCAPES = {"0": "\0", "b": "\b", "n": "\n", "r": "\r", "t": "\t", "Z": "\x1a", "%": "\\%", "_": "\\_"}


def _position(text: str, pos: int) -> tuple[int, int]:
    line = text.count("\n", 0, pos) + 1
    col = pos - (text.rfind("\n", 0, pos) + 1) + 1
    return line, col


def syntax_error(text: str, pos: int, message: str, token: str | None = None) -> SqlSyntaxError:
    """A SqlSyntaxError naming line, column and token, with the offending line and a caret."""
    line, col = _position(text, pos)
    lines = text.split("\n")
    shown = "end of input" if token is None else repr(token)
    err = SqlSyntaxError(
        f"Syntax error at line {line}, column {col} near {shown}: {message}\n  {lines[line - 1]}\n  {' ' * (col - 1)}^",
        line=line, column=col, token=token,
    )
    err.reason = message  # type: ignore[attr-defined]
    return err


def _unescape(body: str) -> str:
    out, i = [], 0
    while i < len(body):
        c = body[i]
        if c != "\\" or i + 1 >= len(body):
            out.append(c)
            i += 1
            continue
        n = body[i + 1]
        if n == "u" and re.fullmatch(r"[0-9A-Fa-f]{4}", body[i + 2:i + 6] or ""):
            out.append(chr(int(body[i + 2:i + 6], 16)))
            i += 6
        elif re.fullmatch(r"[01][0-7]{2}", body[i + 1:i + 4] or ""):  # as Spark: \200 and up are not octal
            out.append(chr(int(body[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(_ESCAPES.get(n, n))
            i += 2
    return "".join(out)


def tokenize(text: str) -> list[Token]:
    """Tokens of one statement; comments and whitespace are dropped, errors name the position."""
    tokens: list[Token] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
        elif text.startswith("--", i):
            j = text.find("\n", i)
            i = n if j < 0 else j + 1
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            if j < 0:
                raise syntax_error(text, i, "unterminated /* comment", "/*")
            i = j + 2
        elif c in "'\"":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            if j >= n:
                raise syntax_error(text, i, "unterminated string literal", text[i:i + 20])
            tokens.append(Token("STRING", text[i:j + 1], i, _unescape(text[i + 1:j])))
            i = j + 1
        elif c == "`":
            j, parts = i + 1, []
            while True:
                k = text.find("`", j)
                if k < 0:
                    raise syntax_error(text, i, "unterminated back-ticked identifier", text[i:i + 20])
                parts.append(text[j:k])
                if text.startswith("``", k):
                    parts.append("`")
                    j = k + 2
                    continue
                break
            tokens.append(Token("QIDENT", text[i:k + 1], i, "".join(parts)))
            i = k + 1
        elif c.isdigit() or (c == "." and i + 1 < n and text[i + 1].isdigit()):
            m = _NUMBER.match(text, i)
            if not m:
                bad = re.match(r"[0-9A-Za-z_.]+", text[i:]).group(0)
                raise syntax_error(text, i, "malformed number", bad)
            tokens.append(Token("NUMBER", m.group(0), i))
            i = m.end()
        elif m := _IDENT.match(text, i):
            tokens.append(Token("IDENT", m.group(0), i, m.group(0)))
            i = m.end()
        elif text.startswith("=>", i):
            tokens.append(Token("OP", "=>", i))
            i += 2
        else:
            tokens.append(Token("OP", c, i))
            i += 1
    tokens.append(Token("EOF", "", n))
    return tokens


# ------------------------------------------------------------------------------------ scripts
@dataclass(frozen=True, slots=True)
class Statement:
    """One statement of a script: its text and where it starts in the script."""

    text: str
    offset: int
    line: int


def split_statements(script: str) -> list[Statement]:
    """Split on ``;`` outside strings, back-ticks and comments; empty statements are dropped."""
    out: list[Statement] = []
    start, i, n = 0, 0, len(script)

    def flush(end: int) -> None:
        chunk = script[start:end]
        if _strip_comments(chunk).strip():
            lead = len(chunk) - len(chunk.lstrip())
            out.append(Statement(chunk.strip(), start + lead, _position(script, start + lead)[0]))

    while i < n:
        c = script[i]
        if script.startswith("--", i):
            j = script.find("\n", i)
            i = n if j < 0 else j + 1
        elif script.startswith("/*", i):
            j = script.find("*/", i + 2)
            if j < 0:
                raise syntax_error(script, i, "unterminated /* comment", "/*")
            i = j + 2
        elif c in "'\"`":
            j = i + 1
            while j < n and script[j] != c:
                j += 2 if (script[j] == "\\" and c != "`") else 1
            if j >= n:
                raise syntax_error(script, i, "unterminated quoted text", script[i:i + 20])
            i = j + 1
        elif c == ";":
            flush(i)
            start = i = i + 1
        else:
            i += 1
    flush(n)
    return out


def _strip_comments(text: str) -> str:
    return "".join(t.text + " " for t in tokenize(text)[:-1]) if text.strip() else ""


# ------------------------------------------------------------------------------------ CALL
@dataclass(frozen=True)
class CallStatement:
    """A parsed CALL: optional catalog, procedure name, and positional or named arguments."""

    catalog: str | None
    name: str
    positional: tuple[Literal, ...]
    named: tuple[tuple[str, Literal], ...]


class Parser:
    """A recursive-descent parser over :func:`tokenize`'s tokens: the helpers every statement
    grammar uses (keywords, identifiers, multipart names, operators, errors with a caret) and the
    CALL grammar (:meth:`call`, :meth:`expr`, :meth:`literal`).  The DDL/DML front end
    (:mod:`procedures.frontend.sqlddl`) extends it."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = tokenize(text)
        self.i = 0

    @property
    def tok(self) -> Token:
        return self.tokens[self.i]

    def error(self, message: str, tok: Token | None = None) -> SqlSyntaxError:
        tok = tok or self.tok
        return syntax_error(self.text, tok.pos, message, None if tok.kind == "EOF" else tok.text)

    def next(self) -> Token:
        tok = self.tok
        self.i += 1
        return tok

    def keyword(self, *words: str) -> bool:
        return self.tok.kind == "IDENT" and self.tok.text.upper() in words

    def op(self, text: str) -> bool:
        """True when the current token is the operator ``text``."""
        return self.tok.kind == "OP" and self.tok.text == text

    def take(self, *words: str) -> bool:
        """Consume ``words`` (keywords, in order) when they come next; otherwise consume nothing."""
        save = self.i
        for w in words:
            if not self.keyword(w):
                self.i = save
                return False
            self.next()
        return True

    def need(self, *words: str) -> None:
        """Consume ``words`` or fail naming them."""
        if not self.take(*words):
            raise self.error(f"expected {' '.join(words)}")

    def comma(self) -> bool:
        """Consume a ``,`` when one comes next."""
        if self.op(","):
            self.next()
            return True
        return False

    def string(self, what: str) -> str:
        """A string literal's value."""
        if self.tok.kind != "STRING":
            raise self.error(f"expected {what}")
        return self.next().value

    def integer(self, what: str) -> int:
        """An integer literal."""
        if self.tok.kind != "NUMBER":
            raise self.error(f"expected {what}")
        tok = self.next()
        try:
            return int(tok.text)
        except ValueError:
            raise self.error(f"expected {what}", tok) from None

    def column(self, what: str = "a column name") -> str:
        """A (possibly nested) column name, dotted."""
        return ".".join(self.multipart(what))

    def end(self) -> None:
        """Fail unless the statement ends here."""
        if self.tok.kind != "EOF":
            raise self.error("unexpected text at the end of the statement")

    def expect_op(self, op: str, what: str) -> Token:
        if self.tok.kind != "OP" or self.tok.text != op:
            raise self.error(f"expected {what}")
        return self.next()

    def ident(self, what: str) -> str:
        if self.tok.kind not in ("IDENT", "QIDENT"):
            raise self.error(f"expected {what}")
        return self.next().value

    def multipart(self, what: str) -> list[str]:
        parts = [self.ident(what)]
        while self.tok.kind == "OP" and self.tok.text == ".":
            self.next()
            parts.append(self.ident(what))
        return parts

    def call(self) -> CallStatement:
        if not self.keyword("CALL"):
            raise self.error("expected CALL")
        self.next()
        name_tok = self.tok
        parts = self.multipart("a procedure name such as system.rollback_to_snapshot")
        if len(parts) not in (2, 3) or parts[-2].lower() != "system":
            raise self.error("expected [catalog.]system.<procedure>", name_tok)
        self.expect_op("(", "'(' after the procedure name")
        positional: list[Literal] = []
        named: list[tuple[str, Literal]] = []
        if not (self.tok.kind == "OP" and self.tok.text == ")"):
            while True:
                if self.tok.kind in ("IDENT", "QIDENT") and self.tokens[self.i + 1].text == "=>":
                    name = self.next().value
                    self.next()
                    named.append((name, self.expr()))
                else:
                    positional.append(self.expr())
                if self.tok.kind == "OP" and self.tok.text == ",":
                    self.next()
                    continue
                break
        self.expect_op(")", "',' or ')' in the argument list")
        if self.tok.kind != "EOF":
            raise self.error("unexpected text after the CALL statement")
        return CallStatement(parts[0] if len(parts) == 3 else None, parts[-1], tuple(positional), tuple(named))

    def expr(self) -> Literal:
        tok = self.tok
        if self.keyword("MAP", "ARRAY") and self.tokens[self.i + 1].text == "(":
            kind = self.next().text.upper()
            self.next()
            items: list[Literal] = []
            if not (self.tok.kind == "OP" and self.tok.text == ")"):
                while True:
                    items.append(self.expr())
                    if self.tok.kind == "OP" and self.tok.text == ",":
                        self.next()
                        continue
                    break
            self.expect_op(")", f"',' or ')' in {kind.lower()}(...)")
            if kind == "ARRAY":
                return Literal(SqlType("ARRAY", element=common_type([x.type for x in items], "array")), items, tok.pos)
            if len(items) % 2:
                raise self.error(f"map(...) needs key, value pairs; got {len(items)} arguments", tok)
            keys, vals = items[0::2], items[1::2]
            t = SqlType("MAP", key=common_type([k.type for k in keys], "map"), value=common_type([v.type for v in vals], "map"))
            return Literal(t, list(zip(keys, vals)), tok.pos)
        return self.literal()

    def literal(self) -> Literal:
        tok = self.tok
        if tok.kind == "OP" and tok.text == "-":
            self.next()
            if self.tok.kind != "NUMBER":
                raise self.error("expected a number after '-'")
            return self.number(self.next(), negative=True, pos=tok.pos)
        if tok.kind == "NUMBER":
            return self.number(self.next(), pos=tok.pos)
        if tok.kind == "STRING":
            parts = []
            while self.tok.kind == "STRING":
                parts.append(self.next().value)
            return Literal(STRING, "".join(parts), tok.pos)
        if self.keyword("TRUE", "FALSE"):
            return Literal(BOOLEAN, self.next().text.upper() == "TRUE", tok.pos)
        if self.keyword("NULL"):
            self.next()
            return Literal(NULL, None, tok.pos)
        if self.keyword("TIMESTAMP", "TIMESTAMP_LTZ", "TIMESTAMP_NTZ", "DATE") and self.tokens[self.i + 1].kind == "STRING":
            kind = self.next().text.upper()
            text = self.next().value
            t = {"DATE": DATE, "TIMESTAMP_NTZ": TIMESTAMP_NTZ}.get(kind, TIMESTAMP)
            return Literal(t, text, tok.pos)
        if tok.kind == "EOF":
            raise self.error("expected an argument value")
        raise self.error("expected a literal (number, 'string', TRUE, FALSE, NULL, TIMESTAMP '...', DATE '...', map(...), array(...))")

    def number(self, tok: Token, negative: bool = False, pos: int = -1) -> Literal:
        m = _NUMBER.fullmatch(tok.text)
        body, exp, suffix = m.group(1), m.group(2), (m.group(3) or "").upper()
        text = ("-" if negative else "") + body + (exp or "")
        is_integral = "." not in body and not exp
        if suffix in ("L", "S", "Y"):
            if not is_integral:
                raise self.error(f"a {suffix} suffix needs an integer", tok)
            t = {"L": BIGINT, "S": SMALLINT, "Y": TINYINT}[suffix]
            bits = {"L": 63, "S": 15, "Y": 7}[suffix]
            v = int(text)
            if not -(2**bits) <= v < 2**bits:
                raise self.error(f"numeric literal {text}{suffix} is out of range for {t}", tok)
            return Literal(t, v, pos)
        if suffix == "D" or (exp and suffix != "BD" and suffix != "F"):
            return Literal(DOUBLE, float(text), pos)
        if suffix == "F":
            return Literal(FLOAT, float(text), pos)
        if is_integral and suffix != "BD":
            v = int(text)
            if -(2**31) <= v < 2**31:
                return Literal(INT, v, pos)
            if -(2**63) <= v < 2**63:
                return Literal(BIGINT, v, pos)
        d = to_decimal(text)
        sign, digits, e = d.as_tuple()
        scale = max(0, -int(e))
        precision = max(len(digits), scale, 1)
        if precision > 38:
            raise self.error(f"numeric literal {text} does not fit DECIMAL(38)", tok)
        return Literal(SqlType("DECIMAL", precision, scale), d, pos)


def parse_call(text: str) -> CallStatement:
    """Parse one CALL statement; SqlSyntaxError names the line, column and token."""
    return Parser(text).call()


def is_call(text: str) -> bool:
    """Whether the statement's first word is CALL."""
    toks = tokenize(text)
    return toks[0].kind == "IDENT" and toks[0].text.upper() == "CALL"
