"""docs/conformance.md cannot silently go stale: every built-in procedure in the registry has a row
and a section there and a page in docs/procedures/; each row's difference count equals the lines of
its section, and every link of the page reaches an existing file and heading."""

from __future__ import annotations

import re
from pathlib import Path

import procedures.builtin  # noqa: F401 -- registers the built-in procedures
from procedures.framework import registry

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PAGE = DOCS / "conformance.md"

ROW = re.compile(r"^\| \[`([a-z0-9_]+)`\]\(#([^)]*)\) \|")
COUNT = re.compile(r"\| \[(\d+)\]\((procedures/[a-z0-9_]+\.md)#([^)]*)\) \|")
LINK = re.compile(r"\]\(([^)#\s]*)(?:#([^)\s]*))?\)")


def slug(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Anchors of every heading of a Markdown file (fenced code skipped)."""
    found, fenced = set(), False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (m := re.match(r"^#{1,6} (.+)$", line)):
            found.add(slug(m.group(1)))
    return found


def section_lines(text: str, name: str) -> list[str] | None:
    """The lines of the ``### `name``` section of the page, or None when it has none."""
    lines = text.splitlines()
    try:
        start = lines.index(f"### `{name}`")
    except ValueError:
        return None
    out = []
    for line in lines[start + 1:]:
        if line.startswith("#"):
            break
        out.append(line)
    return out


def problems(names: list[str], text: str) -> list[str]:
    """What docs/conformance.md (``text``) and docs/procedures/ lack for the procedures ``names``."""
    rows = {}
    for line in text.splitlines():
        if m := ROW.match(line):
            rows[m.group(1)] = line
    found = []
    for name in names:
        if not (DOCS / "procedures" / f"{name}.md").is_file():
            found.append(f"{name}: no docs/procedures/{name}.md")
        row = rows.get(name)
        if row is None:
            found.append(f"{name}: no row in docs/conformance.md")
            continue
        section = section_lines(text, name)
        if section is None:
            found.append(f"{name}: no '### `{name}`' section in docs/conformance.md")
            continue
        count = COUNT.search(row)
        if count is None:
            found.append(f"{name}: its row has no difference count linking to docs/procedures/{name}.md")
            continue
        if count.group(2) != f"procedures/{name}.md":
            found.append(f"{name}: its difference count links to {count.group(2)}")
        listed = sum(1 for line in section if line.startswith("* "))
        if int(count.group(1)) != listed:
            found.append(f"{name}: the row counts {count.group(1)} differences, its section lists {listed}")
    for name in rows:
        if name not in names:
            found.append(f"{name}: a row in docs/conformance.md but no such procedure is registered")
    return found


def builtin_names() -> list[str]:
    """The built-in procedures (a user procedure another test registers needs no page)."""
    return [n for n in registry.list_procedures()
            if registry.get_procedure(n).fn.__module__.startswith("procedures.builtin.")]


def test_every_registered_procedure_has_a_row_a_section_and_a_page():
    names = builtin_names()
    assert {"expire_snapshots", "table_health", "plan_maintenance"} <= set(names)
    assert problems(names, PAGE.read_text(encoding="utf-8")) == []


def test_the_check_notices_a_procedure_missing_from_the_page():
    text = PAGE.read_text(encoding="utf-8")
    assert problems(["no_such_procedure"], "") == [
        "no_such_procedure: no docs/procedures/no_such_procedure.md",
        "no_such_procedure: no row in docs/conformance.md",
    ]
    found = problems(builtin_names()[:1], text)  # every other row is then unregistered
    assert found and all("no such procedure is registered" in f for f in found)
    first = builtin_names()[0]
    without_section = text.replace(f"### `{first}`", "### elsewhere")
    assert problems([first], without_section)[0].startswith(f"{first}: no '### ")


def test_every_link_reaches_a_file_and_a_heading():
    text = PAGE.read_text(encoding="utf-8")
    own = anchors(PAGE)
    broken = []
    for target, anchor in LINK.findall(text):
        if target.startswith(("http://", "https://")):
            continue
        path = (PAGE.parent / target).resolve() if target else PAGE
        if not path.exists():
            broken.append(f"{target}: no such file")
        elif anchor and anchor not in (own if not target else anchors(path)):
            broken.append(f"{target}#{anchor}: no such heading")
    assert broken == []
