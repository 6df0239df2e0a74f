"""Every name the project's Python reads is defined somewhere: a module-level name, an import, an
argument or a builtin. Most GPU tests and tools only run on the GPU; this finds an unbound name (a
missing import, a renamed helper) in them on any machine."""
import builtins
import pathlib
import symtable

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
FILES = sorted(p for d in ("fastlaunch", "tests", "tools", "benchmarks") for p in (ROOT / d).rglob("*.py"))
# names Python binds in every module
MODULE_NAMES = {"__file__", "__name__", "__doc__", "__spec__", "__loader__", "__package__", "__builtins__"}


def unbound_names(source: str, filename: str) -> list[str]:
    top = symtable.symtable(source, filename, "exec")
    defined = {s.get_name() for s in top.get_symbols() if s.is_assigned() or s.is_imported()}
    known = defined | set(dir(builtins)) | MODULE_NAMES
    missing = []

    def walk(table):
        for s in table.get_symbols():
            free_global = s.is_global() or table is top
            if s.is_referenced() and free_global and not s.is_assigned() and s.get_name() not in known:
                missing.append(f"{table.get_name()}: {s.get_name()}")
        for child in table.get_children():
            walk(child)

    walk(top)
    return missing


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_name_read_is_bound(path):
    assert unbound_names(path.read_text(), str(path)) == []


def test_the_check_finds_a_missing_import():
    src = "import os\n\ndef f():\n    return json.dumps(os.sep)\n"
    assert unbound_names(src, "x.py") == ["f: json"]
    assert unbound_names("import json\n" + src, "x.py") == []
