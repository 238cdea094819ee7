"""Marked sections: many commands in one shell script (one round trip), their outputs split by name.

:func:`sections_script` runs each command in turn and prints ``@@<name> <rc>`` and then the
command's standard output (stderr dropped: redirect ``2>&1`` inside a command to keep it);
:func:`parse_sections` splits that output back into ``{name: Section(text, rc)}``.
:meth:`dbmatrix.hosts.remote.Host.run_sections` does both through the host seam.

The parser also reads a marker without an exit code (``@@name``; rc None), the format media
fixtures were captured in.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass

NOT_FOUND = 127  # shell exit code of a command that does not exist

# Section names: safe unquoted in a shell word and in a marker line.
_NAME = re.compile(r"[\w.:-]+\Z")
_MARKER = re.compile(r"@@([\w.:-]+)(?: (\d+))?")


@dataclass(frozen=True)
class Section:
    """One command's stdout and exit code (127: the command does not exist; None: not recorded)."""

    text: str
    rc: int | None

    @property
    def missing(self) -> bool:
        return self.rc == NOT_FOUND

    @property
    def ok(self) -> bool:
        return self.rc == 0


def sections_script(sections: Mapping[str, str], *, prelude: str = "") -> str:
    """One POSIX sh script printing ``@@name rc`` and then the stdout of each command (stderr dropped).

    Each command runs in a command substitution with stdin from /dev/null: variables it sets do
    not reach the next one; set shared ones in `prelude` (run first, in the script's shell). The
    script exits 0 whatever the commands did."""
    lines = [prelude] if prelude else []
    for name, command in sections.items():
        if not _NAME.match(name):
            raise ValueError(f"section name {name!r} must be letters, digits, _ . : or -")
        lines.append(f"out=$({{ {command}\n}} 2>/dev/null </dev/null); rc=$?; "
                     f"printf '@@%s %s\\n%s\\n' {name} \"$rc\" \"$out\"")
    lines.append("exit 0")
    return "\n".join(lines)


def parse_sections(text: str, names: Collection[str] | None = None) -> dict[str, Section]:
    """Split :func:`sections_script` output into {name: Section}, in output order.

    With `names`, only a marker of one of them starts a section (another ``@@`` line is text of the
    current section); text before the first marker is dropped. A name seen twice keeps the last."""
    out: dict[str, Section] = {}
    name: str | None = None
    rc: int | None = None
    lines: list[str] = []
    for line in text.splitlines():
        m = _MARKER.fullmatch(line)
        if m and (names is None or m.group(1) in names):
            if name is not None:
                out[name] = Section("\n".join(lines), rc)
            name, rc, lines = m.group(1), int(m.group(2)) if m.group(2) else None, []
        elif name is not None:
            lines.append(line)
    if name is not None:
        out[name] = Section("\n".join(lines), rc)
    return out
