"""The server options a host's own `mariadbd` accepts, and what it says about a spec's option values.

Option names are checked against the host's ``mariadbd --verbose --help`` (parsed here, pure; cached per
host, mariadbd version and loaded plugins, see :func:`option_list`), so every unknown name is reported at
once with a close match. Values are checked by mariadbd itself: ``mariadbd --no-defaults <plugins>
--name=value --verbose --help`` starts no server (~0.05 s) and reports a bad value on stderr, as the server
would at startup. A server variable's bad value exits non-zero (only the first is reported); a plugin's
(InnoDB, RocksDB) exits 0 and disables the plugin; a bad boolean is ignored with a warning; an out-of-range
number is adjusted with a warning; a removed option "does nothing now". Every new ``[ERROR]`` or
``[Warning]`` line (compared with the same command without the spec's options) refuses the option: the run
would fail, or would not run what the spec says.

Measured here (10.11.19, 2 vCPUs): one check 0.02-0.08 s (0.08 with ha_rocksdb.so); the whole help
~190 KiB (230 KiB with RocksDB: 159 more options).
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from dbmatrix.cache import cache_dir, kept
from dbmatrix.hosts.remote import Host

# PATH gains the sbin directories: a non-root SSH session often lacks them (mariadbd is in /usr/sbin).
PRELUDE = 'PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"'
MISSING_RC = 127  # the shell's "command not found"

_OPTION_LINE = re.compile(r"^  --([A-Za-z0-9_-]+)(\[?=[#a-z]+\]?)?\s*(.*)$")
_TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}\s+\d{1,2}:\d{2}:\d{2}\s+\d+\s+")
_BUFFERED = re.compile(r"Buffered (error|warning): ")
# Prefixes my_getopt understands before a boolean option's name (skip_x = x OFF), and loose_ before any.
BOOL_PREFIXES = ("skip_", "disable_", "enable_")
LOOSE = "loose_"


def norm(name: str) -> str:
    """An option name as server_options holds it: lower case, '_' for '-'."""
    return name.strip().replace("-", "_").lower()


@dataclass(frozen=True)
class OptionInfo:
    """What the help says of one option: ``kind`` bool, number, enum, set or string; ``choices`` for
    enum and set; ``default`` as printed in the variables table (None if not listed there)."""

    kind: str
    default: str | None = None
    choices: tuple[str, ...] = ()

    def allowed(self) -> str:
        """The allowed values in words, for an error message."""
        if self.kind == "bool":
            return "ON or OFF (also 1/0, TRUE/FALSE)"
        if self.kind == "number":
            return "a whole number, optionally with a K, M, G, T, P or E suffix (e.g. 64M)"
        if self.kind == "enum":
            return "one of " + ", ".join(self.choices)
        if self.kind == "set":
            return "a comma list of " + ", ".join(self.choices)
        return "a string"


@dataclass(frozen=True)
class ServerOptions:
    """The options of one mariadbd (version and plugins as given), by normalised name."""

    version: str | None
    plugins: tuple[str, ...] = ()
    options: Mapping[str, OptionInfo] = field(default_factory=dict)

    def known(self, name: str) -> bool:
        return self.resolve(name) is not None

    def resolve(self, name: str) -> str | None:
        """The option `name` sets (its ``loose_``/``skip_``… prefix understood), or None if unknown."""
        n = norm(name)
        if n.startswith(LOOSE):
            n = n[len(LOOSE):]
        if n in self.options:
            return n
        for p in BOOL_PREFIXES:
            rest = n[len(p):]
            if n.startswith(p) and self.options.get(rest, OptionInfo("")).kind == "bool":
                return rest
        return None

    def suggest(self, name: str, n: int = 3) -> list[str]:
        """Up to `n` known option names close to `name` (difflib), closest first."""
        return difflib.get_close_matches(norm(name), list(self.options), n=n, cutoff=0.75)

    def to_dict(self) -> dict[str, object]:
        return {"version": self.version, "plugins": list(self.plugins),
                "options": {k: asdict(v) for k, v in sorted(self.options.items())}}

    @classmethod
    def from_dict(cls, d: Mapping[str, object]) -> ServerOptions:
        opts = d.get("options") or {}
        assert isinstance(opts, dict)
        return cls(d.get("version"), tuple(d.get("plugins") or ()),  # type: ignore[arg-type]
                   {k: OptionInfo(v["kind"], v.get("default"), tuple(v.get("choices") or ())) for k, v in opts.items()})


# ---------------------------------------------------------------- pure parsers

def parse_help(text: str, plugins: Sequence[str] = ()) -> ServerOptions:
    """``mariadbd --verbose --help`` -> the options it lists: the ``--name`` entries (their argument
    says the kind: none = boolean, ``=#`` number, ``=name`` string, enum with "One of:", set with "Any
    combination of:") and the variables table (``name  value``) below them."""
    lines = text.splitlines()
    version = None
    m = re.search(r"Ver\s+(\S+)", text)
    if m:
        version = m.group(1)
    entries: dict[str, tuple[str, list[str]]] = {}
    current: str | None = None
    table_at = None
    for i, line in enumerate(lines):
        if line.startswith("------------------------------------------------------------ "):
            table_at = i + 1
            break
        om = _OPTION_LINE.match(line)
        if om:
            current = norm(om.group(1))
            entries[current] = (om.group(2) or "", [om.group(3)])
        elif current is not None and line.startswith("    ") and line.strip():
            entries[current][1].append(line.strip())
        elif not line.strip():
            current = None
    defaults: dict[str, str] = {}
    for line in lines[table_at or len(lines):]:
        if not line.strip():
            break
        parts = line.split(None, 1)
        defaults[norm(parts[0])] = parts[1].strip() if len(parts) > 1 else ""
    options: dict[str, OptionInfo] = {}
    for name in sorted(set(entries) | set(defaults)):
        arg, desc_lines = entries.get(name, ("", []))
        desc = " ".join(d for d in desc_lines if d)
        default = defaults.get(name)
        kind, choices = _kind(arg, desc, default, name in entries)
        options[name] = OptionInfo(kind, default, choices)
    return ServerOptions(version, tuple(plugins), options)


def _kind(arg: str, desc: str, default: str | None, listed: bool) -> tuple[str, tuple[str, ...]]:
    for marker, kind in (("One of:", "enum"), ("Any combination of:", "set")):
        if marker in desc:
            rest = desc.split(marker, 1)[1]
            rest = re.split(r"(?<=[a-z0-9_])\.\s|\s{2,}|\(", rest)[0]
            choices = tuple(c.strip().rstrip(".") for c in rest.split(",") if c.strip())
            return kind, choices
    if "#" in arg:
        return "number", ()
    if "=" in arg:
        return "string", ()
    if not listed:  # only in the variables table
        return ("bool" if default in ("TRUE", "FALSE") else "string"), ()
    return "bool", ()


# Messages about the machine, not the options: the open-files request grows with max_connections and
# table caches, and a start under a lower `ulimit -n` goes on with fewer files.
ENVIRONMENT_MESSAGES = ("Could not increase number of max_open_files", "Changed limits:")


def option_messages(stderr: str) -> list[str]:
    """mariadbd's ``[ERROR]``/``[Warning]`` lines (and untagged ``mariadbd: …`` ones) without the timestamp
    and "Buffered error: " noise, each once, without :data:`ENVIRONMENT_MESSAGES`."""
    out = []
    for line in stderr.splitlines():
        line = _TIMESTAMP.sub("", re.sub(r"[\x00-\x1f]", "", line).strip())  # mariadbd rings a bell (\a) at times
        if any(e in line for e in ENVIRONMENT_MESSAGES):
            continue
        if "[ERROR]" in line or "[Warning]" in line or line.startswith("mariadbd: "):
            out.append(_BUFFERED.sub("", line).strip())
    return list(dict.fromkeys(out))  # some messages come twice (an unknown character set)


def new_messages(stderr: str, baseline: Iterable[str]) -> list[str]:
    """The messages of `stderr` that the baseline (the same command without the spec's options) lacks."""
    seen = set(baseline)
    return [m for m in option_messages(stderr) if m not in seen]


def render(name: str, value: str) -> str:
    """``--name=value`` as :func:`dbmatrix.run.mysqld.render_options` writes it."""
    return f"--{norm(name).replace('_', '-')}={value}"


# ---------------------------------------------------------------- commands (pure) and the host side

def help_command(plugins: Sequence[str], options: Sequence[str] = (), *, stderr_only: bool = False,
                 server: Sequence[str] = ("mariadbd",)) -> str:
    """``mariadbd --no-defaults [--plugin-load-add=P…] [options] --verbose --help``; with `stderr_only`
    the help text is dropped and stderr kept (the section then holds only mariadbd's messages). `server`: the
    binary and the options that follow --no-defaults (a server build's basedir and plugin directory)."""
    binary, *base = server
    argv = [binary, "--no-defaults", *base, *(f"--plugin-load-add={p}" for p in plugins), *options,
            "--verbose", "--help"]
    cmd = shlex.join(argv)
    return f"{cmd} 2>&1 >/dev/null" if stderr_only else f"{cmd} 2>/dev/null"


OPTIONS_KIND = "mariadbd-options"  # one file per host, version and plugin set: never pruned


def cache_key(host_id: str, version: str, plugins: Sequence[str]) -> str:
    """One key per host, mariadbd version and plugin set: a package upgrade gives a new version string,
    so a stale list is never read."""
    key = hashlib.sha256(json.dumps([host_id, version, list(plugins)]).encode()).hexdigest()[:16]
    return f"{re.sub(r'[^A-Za-z0-9_.-]', '_', host_id)[:60]}-{key}"


def cache_path(host_id: str, version: str, plugins: Sequence[str], root: Path | None = None) -> Path:
    """Where :func:`option_list` keeps the list of :func:`cache_key` (:func:`dbmatrix.cache.kept`)."""
    return (root or cache_dir()) / OPTIONS_KIND / f"{cache_key(host_id, version, plugins)}.json"


def option_list(host: Host, host_id: str, version: str, plugins: Sequence[str],
                root: Path | None = None, server: Sequence[str] = ("mariadbd",)) -> ServerOptions:
    """The host's option list for this version and plugin set: from the cache, else from its help (a damaged
    cache file is rebuilt). `server`: as :func:`help_command` (a build's own binary is part of the key)."""
    def compute() -> dict[str, object]:
        out = host.run_sections({"help": help_command(plugins, server=server)}, prelude=PRELUDE,
                                timeout=120)["help"]
        opts = parse_help(out.text, plugins)
        if not opts.options:
            raise RuntimeError(f"mariadbd --verbose --help on {host.name} listed no options (exit {out.rc})")
        return opts.to_dict()

    key = cache_key(host_id if server[0] == "mariadbd" else f"{host_id}:{server[0]}", version, plugins)
    return kept(OPTIONS_KIND, key, compute, root, ServerOptions.from_dict, keep=None)
