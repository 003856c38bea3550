"""Arguments' one-line meanings read off Google-style docstrings, for the recipe tables (:mod:`zoo.core.schema`) and
``zoo info``."""

from __future__ import annotations

import inspect
import re


def arg_docs(cls) -> dict[str, str]:
    """Each argument's one-line meaning from the ``Args:`` section of ``cls``'s (or its ``__init__``'s) docstring,
    Google style; ``a, b: text`` documents both, and ``a: text; b: text`` (or ``a: text. b: text``) on one line
    documents each."""
    names = set(inspect.signature(cls.__init__).parameters) - {"self"}
    out: dict[str, str] = {}
    for doc in (inspect.getdoc(cls.__init__) if cls.__init__.__doc__ else None, inspect.getdoc(cls)):
        lines, entries, indent = (doc or "").splitlines(), [], None
        at = next((i for i, x in enumerate(lines) if x.strip() == "Args:"), len(lines))
        floor = -1 if at == 0 else len(lines[at]) - len(lines[at].lstrip()) if at < len(lines) else 0
        for line in lines[at + 1 :]:  # (a docstring opening with "Args:" has its entries unindented by getdoc)
            depth = len(line) - len(line.lstrip())
            if not line.strip() or depth <= floor:
                break
            indent = depth if indent is None else indent
            if depth < indent:
                break
            if depth == indent:
                entries.append(line.strip())
            elif entries:
                entries[-1] += " " + line.strip()
        head = r"(\*{0,2}\w+(?:, \*{0,2}\w+)*)(?: \([^)]*\))?: "
        for entry in entries:
            for part in re.split(r"(?:;|\.) +(?=\*{0,2}\w+(?:, \*{0,2}\w+)*(?: \([^)]*\))?: )", entry):
                m = re.match(head + r"(.*)", part)
                if not m:
                    continue
                for n in (x.strip("* ") for x in m.group(1).split(",")):
                    if n in names and n not in out:
                        out[n] = m.group(2).strip()
    return out
