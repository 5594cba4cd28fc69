"""Skimming Avro records: a reader compiled for one writer schema that walks a record's bytes, keeps
a few chosen fields and skips the rest without building anything.

Scan planning tests every manifest entry's column metrics, and a full decode of an entry with
fastavro (every map of metrics turned into a list of dicts) costs several times what the test
needs: the entry's status, record count and the metrics of the filtered columns.  A
:class:`Skimmer` reads just those straight from a block's bytes and returns the position after the
record, so the caller can decode in full only the records that pass (from the position it started
at) and step over the others.

The reader is Python source generated once per (schema, wanted fields) and compiled: straight-line
code per field keeps the per-record cost to a few byte comparisons and slices, where interpreting
the schema for every record would cost more than fastavro's full decode.  Encodings follow the
Avro specification ("Binary Encoding"): zig-zag varints for int, long, enum indexes, union branches,
lengths and block counts; a negative block count is followed by the block's byte size.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

__all__ = ["SkimField", "Skimmer", "compile_skimmer", "named_types"]

_FIXED_WIDTH = {"null": 0, "boolean": 1, "float": 4, "double": 8}
_VARINTS = ("int", "long", "enum")
_FLOAT, _DOUBLE = struct.Struct("<f"), struct.Struct("<d")
#: nesting the generated code may reach (Python refuses more than 20 nested blocks)
_MAX_DEPTH = 12


@dataclass(frozen=True)
class SkimField:
    """A field to keep: its path of Avro field ids from the top record, and how to keep it.

    ``kind`` is ``"long"`` for an int or long, ``"string"``, ``"bytes"`` (bytes or fixed),
    ``"longs"`` for an array of ints or longs (a list), ``"record"`` for a record of primitive
    fields (a dict by field name, values as fastavro gives them without logical types), or
    ``"map"`` for an Iceberg map stored as an array of ``key``/``value`` records with int keys (as
    manifests store metrics): a dict of the entries whose key is in ``keys`` (every entry when
    ``keys`` is None), or ``"span"`` for the value's encoded bytes as they are, of any type (a
    union's branch index included), to compare or decode later, or ``"records"`` for an array of
    records of primitive fields (a list of tuples in the record's field order).  A union with null
    gives None, except for a span.
    """

    path: tuple[int, ...]
    kind: str
    keys: frozenset[int] | None = frozenset()


class _Unsupported(Exception):
    """The schema has a shape the generator does not handle; callers fall back to a full decode."""


@dataclass(frozen=True)
class Skimmer:
    """``skim(buf, pos)`` returns ``(end, values)``: the position after the record starting at
    ``pos`` and the kept fields' values in the order of the fields given to :func:`compile_skimmer`
    (None for a field the schema does not have)."""

    skim: Callable[[bytes, int], tuple[int, tuple]]
    source: str
    found: frozenset[int] = frozenset()  # positions (in the fields given) of the fields the schema has


def compile_skimmer(schema: Mapping[str, Any], fields: Sequence[SkimField]) -> Skimmer | None:
    """A :class:`Skimmer` for records written with ``schema`` (a record schema whose logical types
    do not matter: only encodings are read), or None when the schema has a shape it does not handle."""
    try:
        gen = _Generator(named_types(schema), fields)
        body = gen.record(schema, (), 1)
    except _Unsupported:
        return None
    names = [gen.outputs[i] for i in range(len(fields))]
    lines = ["def skim(buf, pos):"]
    lines += [f"    {n} = None" for n in names]
    lines += body
    lines.append(f"    return pos, ({', '.join(names)}{',' if len(names) == 1 else ''})")
    # only field ids, sizes and indexes reach the source (as ints); names and values never do
    source = "\n".join(lines) + "\n"
    scope: dict[str, Any] = {"_float": _FLOAT.unpack_from, "_double": _DOUBLE.unpack_from}
    scope.update(gen.constants)
    try:
        exec(compile(source, "<avro skimmer>", "exec"), scope)  # noqa: S102 -- generated from the schema above
    except (SyntaxError, RecursionError):  # too deep for the compiler: read in full instead
        return None
    return Skimmer(scope["skim"], source, frozenset(gen.found))


def named_types(schema: Any, out: dict[str, Any] | None = None) -> dict[str, Any]:
    """Every named type (record, fixed, enum) defined in an Avro schema, by name and by full name
    (later uses of a named type are bare name strings)."""
    out = {} if out is None else out
    if isinstance(schema, list):
        for s in schema:
            named_types(s, out)
    elif isinstance(schema, dict):
        if "name" in schema and schema.get("type") in ("record", "fixed", "enum"):
            out[schema["name"]] = schema
            if "namespace" in schema and "." not in schema["name"]:
                out[f"{schema['namespace']}.{schema['name']}"] = schema
        for key in ("type", "items", "values", "fields"):
            if key in schema and not isinstance(schema[key], str):
                named_types(schema[key], out)
    return out


class _Generator:
    def __init__(self, named: Mapping[str, Any], fields: Sequence[SkimField]) -> None:
        self.named = named
        self.wanted = {f.path: (i, f) for i, f in enumerate(fields)}
        self.prefixes = {f.path[:k] for f in fields for k in range(1, len(f.path))}
        self.outputs = {i: f"out{i}" for i in range(len(fields))}
        self.constants: dict[str, Any] = {}
        self.found: set[int] = set()
        self.counter = 0

    def var(self, stem: str) -> str:
        self.counter += 1
        return f"{stem}{self.counter}"

    def resolve(self, t: Any) -> Any:
        if isinstance(t, str) and t not in _FIXED_WIDTH and t not in _VARINTS and t not in ("bytes", "string"):
            if t not in self.named:
                raise _Unsupported(f"unknown named type {t}")
            return self.named[t]
        if isinstance(t, dict) and t.get("type") in ("record", "enum", "fixed", "array", "map"):
            return t
        if isinstance(t, dict):
            return self.resolve(t["type"])
        return t

    # -- code for one value; ``depth`` is the indentation level
    def record(self, t: Mapping[str, Any], path: tuple[int, ...], depth: int) -> list[str]:
        if depth > _MAX_DEPTH:
            raise _Unsupported("schema nested too deeply")
        out: list[str] = []
        run = 0  # plain int/long fields skipped in a row, stepped over at once
        for f in t["fields"]:
            fid = f.get("field-id")
            sub = path + (fid,) if fid is not None else None
            kept = sub is not None and (sub in self.wanted or sub in self.prefixes)
            if not kept and self.resolve(f["type"]) in ("int", "long"):
                run += 1
                continue
            out += self.skip_varints(run, depth)
            run = 0
            if sub is not None and sub in self.wanted:
                self.found.add(self.wanted[sub][0])
                out += self.keep(f["type"], self.wanted[sub], depth)
            elif sub is not None and sub in self.prefixes:
                inner = self.resolve(f["type"])
                if isinstance(inner, list):
                    out += self.union(inner, depth, lambda b, d, sub=sub: self.nested(b, sub, d))
                else:
                    out += self.nested(inner, sub, depth)
            else:
                out += self.skip(f["type"], depth)
        return out + self.skip_varints(run, depth)

    def skip_varints(self, count: int, depth: int) -> list[str]:
        """Code stepping over ``count`` varints in a row: one regular-expression match for several
        (a varint is bytes with the high bit set, then one without), cheaper than a loop per byte."""
        if count <= 1:
            return self.skip("long", depth) if count else []
        ind, name, m = "    " * depth, f"VARINTS{count}", self.var("m")
        self.constants[name] = re.compile(rb"(?:[\x80-\xff]*[\x00-\x7f]){%d}" % count, re.DOTALL).match
        return [f"{ind}{m} = {name}(buf, pos)", f"{ind}if {m} is None:",
                f"{ind}    raise ValueError('truncated varints')", f"{ind}pos = {m}.end()"]

    def nested(self, t: Any, path: tuple[int, ...], depth: int) -> list[str]:
        t = self.resolve(t)
        if isinstance(t, dict) and t.get("type") == "record":
            return self.record(t, path, depth)
        return self.skip(t, depth)

    def union(self, branches: list, depth: int, emit: Callable[[Any, int], list[str]]) -> list[str]:
        # a branch index below 64 is one byte holding twice the index: compare the byte itself
        if len(branches) > 63:
            raise _Unsupported("union of more than 63 branches")
        ind = "    " * depth
        u = self.var("u")
        out = [f"{ind}{u} = buf[pos]", f"{ind}pos += 1"]
        for k, b in enumerate(branches):
            body = emit(b, depth + 1) or [f"{ind}    pass"]
            out += [f"{ind}{'if' if k == 0 else 'elif'} {u} == {2 * k}:"] + body
        out += [f"{ind}else:", f"{ind}    raise ValueError('union branch out of range')"]
        return out

    def read_long(self, name: str, depth: int) -> list[str]:
        # the varint's bytes inline (a call per value would cost as much as the rest of the read)
        ind = "    " * depth
        b, shift = self.var("b"), self.var("s")
        return [
            f"{ind}{name} = buf[pos]",
            f"{ind}pos += 1",
            f"{ind}if {name} >= 128:",
            f"{ind}    {name} &= 127",
            f"{ind}    {shift} = 7",
            f"{ind}    while True:",
            f"{ind}        {b} = buf[pos]",
            f"{ind}        pos += 1",
            f"{ind}        {name} |= ({b} & 127) << {shift}",
            f"{ind}        if {b} < 128:",
            f"{ind}            break",
            f"{ind}        {shift} += 7",
            f"{ind}{name} = ({name} >> 1) ^ -({name} & 1)",
        ]

    def non_negative(self, name: str, depth: int) -> list[str]:
        # a negative length would walk backwards: corrupt data must fail, never loop
        ind = "    " * depth
        return [f"{ind}if {name} < 0:", f"{ind}    raise ValueError('negative length')"]

    def skip(self, t: Any, depth: int) -> list[str]:
        if depth > _MAX_DEPTH:
            raise _Unsupported("schema nested too deeply")
        ind = "    " * depth
        t = self.resolve(t)
        if isinstance(t, list):
            return self.union(t, depth, self.skip)
        if isinstance(t, str):
            if t in _FIXED_WIDTH:
                return [f"{ind}pos += {_FIXED_WIDTH[t]}"] if _FIXED_WIDTH[t] else []
            if t in _VARINTS:
                return [f"{ind}while buf[pos] >= 128:", f"{ind}    pos += 1", f"{ind}pos += 1"]
            if t in ("bytes", "string"):
                n = self.var("n")
                return self.read_long(n, depth) + self.non_negative(n, depth) + [f"{ind}pos += {n}"]
            raise _Unsupported(f"type {t}")
        kind = t.get("type")
        if kind == "record":
            return self.plain_record(t, depth)
        if kind == "enum":
            return self.skip("int", depth)
        if kind == "fixed":
            size = int(t["size"])
            if size < 0:
                raise _Unsupported(f"fixed of size {size}")
            return [f"{ind}pos += {size}"] if size else []
        if kind == "array":
            return self.blocks(depth, lambda d: self.skip(t["items"], d))
        if kind == "map":
            return self.blocks(depth, lambda d: self.skip("string", d) + self.skip(t["values"], d))
        raise _Unsupported(f"type {kind}")

    def plain_record(self, t: Mapping[str, Any], depth: int) -> list[str]:
        out: list[str] = []
        run = 0
        for f in t["fields"]:
            if self.resolve(f["type"]) in ("int", "long"):
                run += 1
                continue
            out += self.skip_varints(run, depth) + self.skip(f["type"], depth)
            run = 0
        return out + self.skip_varints(run, depth)

    def blocks(self, depth: int, item: Callable[[int], list[str]]) -> list[str]:
        ind = "    " * depth
        c = self.var("c")
        body = item(depth + 2)
        if not body:  # items of no bytes: a hostile count could spin without reading anything
            raise _Unsupported("array or map of zero-width items")
        return (
            [f"{ind}while True:"]
            + self.read_long(c, depth + 1)
            + [f"{ind}    if {c} == 0:", f"{ind}        break", f"{ind}    if {c} < 0:", f"{ind}        {c} = -{c}"]
            + self.skip("long", depth + 2)
            + [f"{ind}    for _ in range({c}):"]
            + body
        )

    # -- code that keeps a wanted field in its output variable
    def keep(self, t: Any, wanted: tuple[int, SkimField], depth: int) -> list[str]:
        index, field = wanted
        if field.kind == "span":  # the value's own bytes, whatever its type (union index included)
            ind, start = "    " * depth, self.var("st")
            return [f"{ind}{start} = pos"] + self.skip(t, depth) + [f"{ind}{self.outputs[index]} = buf[{start}:pos]"]
        t = self.resolve(t)
        if isinstance(t, list):
            return self.union(t, depth, lambda b, d: self.keep_one(b, index, field, d))
        return self.keep_one(t, index, field, depth)

    def keep_one(self, t: Any, index: int, field: SkimField, depth: int) -> list[str]:
        t = self.resolve(t)
        ind = "    " * depth
        target = self.outputs[index]
        if t == "null":
            return [f"{ind}{target} = None"]
        if field.kind == "long":
            if t not in ("int", "long"):
                raise _Unsupported(f"field {field.path} is {t}, not an int or long")
            return self.read_long(target, depth)
        if field.kind in ("string", "bytes"):
            if t != field.kind and not (field.kind == "bytes" and isinstance(t, dict) and t.get("type") == "fixed"):
                raise _Unsupported(f"field {field.path} is {t}, not {field.kind}")
            return self.value(t, target, depth)
        if field.kind == "longs":
            if not isinstance(t, dict) or t.get("type") != "array" or self.resolve(t["items"]) not in ("int", "long"):
                raise _Unsupported(f"field {field.path} is not an array of ints or longs")
            v = self.var("v")
            body = self.read_long(v, depth + 2) + [f"{ind}        {target}.append({v})"]
            return [f"{ind}{target} = []"] + self.blocks(depth, lambda d: body)
        if field.kind == "record":
            if not isinstance(t, dict) or t.get("type") != "record":
                raise _Unsupported(f"field {field.path} is not a record")
            out = [f"{ind}{target} = {{}}"]
            for f in t["fields"]:
                name, v = self.var("NAME"), self.var("v")
                self.constants[name] = f["name"]
                ft = self.resolve(f["type"])
                if isinstance(ft, list):
                    out += self.union(ft, depth, lambda b, d, v=v: self.value(b, v, d))
                else:
                    out += self.value(ft, v, depth)
                out.append(f"{ind}{target}[{name}] = {v}")
            return out
        if field.kind == "records":
            item = self.resolve(t.get("items")) if isinstance(t, dict) and t.get("type") == "array" else None
            if not isinstance(item, dict) or item.get("type") != "record":
                raise _Unsupported(f"field {field.path} is not an array of records")
            return [f"{ind}{target} = []"] + self.blocks(depth, lambda d: self.row(item, target, d))
        if field.kind != "map" or not isinstance(t, dict) or t.get("type") != "array":
            raise _Unsupported(f"field {field.path} is not an array of key/value records")
        item = self.resolve(t["items"])
        if not isinstance(item, dict) or item.get("type") != "record" or [f["name"] for f in item["fields"]] != [
                "key", "value"]:
            raise _Unsupported(f"field {field.path} is not an array of key/value records")
        key_type, value_type = (self.resolve(f["type"]) for f in item["fields"])
        if key_type not in ("int", "long") or value_type not in ("int", "long", "bytes"):
            raise _Unsupported(f"field {field.path} has key {key_type} and value {value_type}")
        k, v = self.var("k"), self.var("v")
        inner = "    " * (depth + 2)
        body = self.read_long(k, depth + 2)
        if field.keys is None:  # every entry
            body += self.value(value_type, v, depth + 2) + [f"{inner}{target}[{k}] = {v}"]
            return [f"{ind}{target} = {{}}"] + self.blocks(depth, lambda d: body)
        keys = self.var("KEYS")
        self.constants[keys] = frozenset(field.keys)
        if value_type == "bytes":
            body += self.read_long(v, depth + 2) + self.non_negative(v, depth + 2) + [
                f"{inner}if {k} in {keys}:",
                f"{inner}    {target}[{k}] = buf[pos:pos + {v}]",
                f"{inner}pos += {v}",
            ]
        else:  # only the wanted keys' values are decoded
            body += ([f"{inner}if {k} in {keys}:"] + self.read_long(v, depth + 3)
                     + [f"{inner}    {target}[{k}] = {v}", f"{inner}else:"] + self.skip(value_type, depth + 3))
        return [f"{ind}{target} = {{}}"] + self.blocks(depth, lambda d: body)

    def row(self, t: Mapping[str, Any], target: str, depth: int) -> list[str]:
        """Code appending a record of primitive fields to the list ``target`` as a tuple."""
        out, names = [], []
        for f in t["fields"]:
            v = self.var("v")
            names.append(v)
            ft = self.resolve(f["type"])
            if isinstance(ft, list):
                out += self.union(ft, depth, lambda b, d, v=v: self.value(b, v, d))
            else:
                out += self.value(ft, v, depth)
        return out + [f"{'    ' * depth}{target}.append(({', '.join(names)},))"]

    def value(self, t: Any, target: str, depth: int) -> list[str]:
        """Code decoding a primitive (or fixed) value into ``target`` as fastavro does without
        logical types."""
        t = self.resolve(t)
        ind = "    " * depth
        if t == "null":
            return [f"{ind}{target} = None"]
        if t == "boolean":
            return [f"{ind}{target} = buf[pos] != 0", f"{ind}pos += 1"]
        if t in ("int", "long"):
            return self.read_long(target, depth)
        if t in ("float", "double"):
            return [f"{ind}{target} = _{t}(buf, pos)[0]", f"{ind}pos += {_FIXED_WIDTH[t]}"]
        if t in ("string", "bytes"):
            n = self.var("n")
            decoded = ".decode()" if t == "string" else ""
            return self.read_long(n, depth) + self.non_negative(n, depth) + [
                f"{ind}{target} = buf[pos:pos + {n}]{decoded}", f"{ind}pos += {n}"]
        if isinstance(t, dict) and t.get("type") == "fixed":
            size = int(t["size"])
            if size < 0:
                raise _Unsupported(f"fixed of size {size}")
            return [f"{ind}{target} = buf[pos:pos + {size}]", f"{ind}pos += {size}"]
        raise _Unsupported(f"value of type {t}")
