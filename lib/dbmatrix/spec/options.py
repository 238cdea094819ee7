"""Server options in a spec (pure): the options a factor or the harness sets (a spec cannot hold them
constant), and the text a name and a value may hold.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

from dbmatrix import engines
from dbmatrix.spec.errors import SpecError

# Server options set by a factor or by the harness itself: a spec may not hold them constant (the engines'
# own: each engine's `harness_options`, dbmatrix.engines).
HARNESS_OPTIONS = engines.harness_options() | frozenset({
    "datadir",
    "socket", "port", "bind_address", "skip_networking", "pid_file", "log_error", "tmpdir", "user", "no_defaults",
    "plugin_load_add",
    "wsrep_on", "wsrep_provider", "wsrep_cluster_address", "wsrep_node_address", "wsrep_provider_options",
    "wsrep_sst_receive_address", "wsrep_sst_method", "wsrep_slave_threads", "wsrep_cluster_name",
    "wsrep_node_name", "binlog_format", "innodb_autoinc_lock_mode",
    "binlog_commit_wait_count", "binlog_commit_wait_usec",  # the group_commit factor
})
_OPTION_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]*\Z")


def _control_char(text: str) -> str | None:
    """The first control character of `text` as words (``newline (U+000A)``), or None."""
    for ch in text:
        if unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp"):
            name = {"\n": "newline", "\r": "carriage return", "\t": "tab"}.get(ch, unicodedata.name(ch, "control"))
            return f"{name.lower()} (U+{ord(ch):04X})"
    return None


def check_option_text(name: Any, value: Any) -> None:
    """A server option's name and value as text mariadbd can take on one command line: a name of letters,
    digits, '_' and '-'; a value without control characters (a newline would end the option, or the
    command). Pure: what the host's mariadbd says of them is checked at plan time (run/preflight)."""
    if not isinstance(name, str) or not _OPTION_NAME.match(name):
        raise SpecError(f"server_options.{name}: {name!r} is not an option name; allowed: letters, digits, "
                        "'_' and '-', starting with a letter (e.g. innodb_flush_method)")
    if isinstance(value, (dict, list)) or value is None:
        raise SpecError(f"server_options.{name}: {value!r} must be one value (a number, a word, ON/OFF or a "
                        "string)")
    bad = _control_char(str(value))
    if bad:
        raise SpecError(f"server_options.{name}: {str(value)!r} contains a control character, {bad}; allowed: "
                        "one line of printable text")


def option_value(v: Any) -> str:
    if isinstance(v, bool):
        return "ON" if v else "OFF"
    return str(v)
