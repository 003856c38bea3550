"""Chat JSON-lines files, the one reader zoo-lm-chat, FAST and any chat fine-tune share.

Schema: one object per line, ``{"messages": [{"role": "system"|"user"|"assistant", "content": str}, ...]}`` (other
keys ignored, blank lines skipped); every conversation needs at least one ``assistant`` turn, since only assistant
tokens are trained on.
"""

from __future__ import annotations

from pathlib import Path

from zoo.core.data import DataError, parse_json_line, text_lines

ROLES = ("system", "user", "assistant")
EMPTY_CONTENT = ("keep", "error", "drop")


def read_conversations(path: str | Path, empty_content: str = "error") -> tuple[list[list[dict[str, str]]], int]:
    """Read a chat JSON-lines file (schema in the module docstring).

    Args:
        empty_content: what to do with a message whose content is empty or blank: ``"error"`` refuses it,
            ``"drop"`` skips its conversation and counts it, ``"keep"`` keeps it (zoo-lm-chat's shipped data holds
            three empty Alpaca replies and its released weights were trained with them).

    Returns:
        ``(conversations, n_dropped)``; each conversation is a list of ``{"role", "content"}`` dicts.

    Raises:
        DataError: ``file:line: key ...`` for a missing file, a byte that is not UTF-8, invalid JSON, no
            ``messages`` list, a message whose ``role`` is unknown or whose ``content`` is not a string (or is empty
            under ``"error"``), or a conversation without an assistant turn.
        ValueError: ``empty_content`` is not one of ``keep``, ``error``, ``drop``.
    """
    path = Path(path)
    if empty_content not in EMPTY_CONTENT:
        raise ValueError(f"data.empty_content: {empty_content!r} is not one of {EMPTY_CONTENT}")
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    out, dropped = [], 0
    for lineno, line in enumerate(text_lines(path), 1):
        if not line.strip():
            continue
        where = f"{path}:{lineno}"
        row = parse_json_line(line, where)
        messages = row.get("messages") if isinstance(row, dict) else None
        if not isinstance(messages, list) or not messages:
            raise DataError(f"{where}: messages: expected a non-empty list of {{role, content}} objects")
        empty = False
        for j, m in enumerate(messages):
            if not isinstance(m, dict) or m.get("role") not in ROLES:
                role = m.get("role") if isinstance(m, dict) else m
                raise DataError(f"{where}: messages[{j}].role: {role!r} is not one of {ROLES}")
            if not isinstance(m.get("content"), str):
                raise DataError(f"{where}: messages[{j}].content: expected a string")
            if not m["content"].strip() and empty_content != "keep":
                if empty_content == "error":
                    raise DataError(f"{where}: messages[{j}].content: empty")
                empty = True
        if not any(m["role"] == "assistant" for m in messages):
            raise DataError(f"{where}: messages: no 'assistant' turn (only assistant tokens are trained on)")
        if empty:
            dropped += 1
            continue
        out.append([{"role": m["role"], "content": m["content"]} for m in messages])
    return out, dropped
