"""What `dbmatrix plan` (and `run`, before the first run) checks on the hosts: no time on runs that
cannot succeed.

Per host, in one round trip: the mariadbd version, ``mariadbd --verbose --help`` with each engine's plugins
and the spec's constant server options (mariadbd judges names and values, as it would at startup,
:mod:`dbmatrix.hosts.server_options`), ``df`` where the inventory does not say how much a medium holds, and
the tools a run calls there (sysbench, the collectors, the media's tools, the Galera provider). A host
without them is not set up: `plan` says so, `run` refuses before it opens a campaign (a fresh machine would
otherwise record every cell of the campaign as failed in seconds). Only when mariadbd complains: one more
round trip with each option alone (to name every bad option, not only the first) and the host's option list
(cached per host, version and plugins) for a close match and the allowed values. Datasets whose smallest
plausible size (:mod:`dbmatrix.spec.sizing`) exceeds their medium or the host's workdir are refused without
a server.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dbmatrix import engines
from dbmatrix.hosts import builds
from dbmatrix.hosts import server_options as so
from dbmatrix.hosts.builds import SYSTEM_BUILD, ServerBuild
from dbmatrix.hosts.capacity import df_command, parse_df, recipe_capacity
from dbmatrix.hosts.inventory import HostSpec
from dbmatrix.hosts.media import TOOL_PACKAGES, required_tools
from dbmatrix.hosts.remote import Host, HostError
from dbmatrix.run.context import media_used
from dbmatrix.run.galera_cluster import GALERA_PROVIDER
from dbmatrix.run.matrix import plan_hosts
from dbmatrix.run.mysqld import constants_for, engine_options
from dbmatrix.spec.experiment import Cell, Experiment, SpecError
from dbmatrix.spec.sizing import (
    DEFAULT_REDO_BYTES,
    Capacity,
    SizeBound,
    check_capacity,
    datadir_lower_bound,
    parse_server_size,
)
from dbmatrix.study import Study


@dataclass
class HostCheck:
    """What was checked on one host, for the plan's printout; `missing` the tools (and files) a run needs
    there that the host lacks, with the package that brings each."""

    host: str
    version: str | None = None
    options_checked: int = 0
    notes: list[str] = field(default_factory=list)
    missing: dict[str, str] = field(default_factory=dict)


# The tools every run calls on a measured host beyond its server build and media: the load generator and
# the collectors (dbmatrix.run.collectors), with the Debian package that brings each.
RUN_TOOLS = {"sysbench": "sysbench", "mpstat": "sysstat", "iostat": "sysstat", "pidstat": "sysstat",
             "vmstat": "procps"}
SETUP_HINT = "`dbmatrix setup --roles server` (make setup) installs them on this machine; nothing was run"


# ---------------------------------------------------------------- pure parts

def engine_plugins(exp: Experiment) -> dict[str, tuple[str, ...]]:
    """Engine -> the plugins its cells load (``--plugin-load-add``), as run/mysqld renders them."""
    out: dict[str, dict[str, None]] = {}
    for cell in exp.cells():
        plugins = out.setdefault(cell.engine, {})
        for opt in engine_options(cell, None):
            if opt.startswith("--plugin-load-add="):
                plugins[opt.split("=", 1)[1]] = None
    return {e: tuple(p) for e, p in out.items()}


def engine_constants(exp: Experiment) -> dict[str, dict[str, str]]:
    """Engine -> the spec's constant server options its cells get (rocksdb_* for MyRocks only)."""
    firsts: dict[str, Cell] = {}
    for c in exp.cells():
        firsts.setdefault(c.engine, c)
    return {e: constants_for(c, exp.server_options) for e, c in firsts.items()}


def redo_bytes(exp: Experiment) -> int:
    value = exp.server_options.get("innodb_log_file_size")
    return (parse_server_size(value) or DEFAULT_REDO_BYTES) if value is not None else DEFAULT_REDO_BYTES


def dataset_bounds(exp: Experiment) -> dict[str, dict[str, SizeBound]]:
    """Data medium -> {dataset name: lower bound of a run's datadir on it}."""
    out: dict[str, dict[str, SizeBound]] = {}
    for cell in exp.cells():
        key = exp.dataset_key(cell)
        # the redo log stays in the datadir unless the log medium takes it (MyRocks' log medium takes the WAL)
        holds_redo = engines.engine(cell.engine).log_dir_holds_redo
        redo = redo_bytes(exp) if cell.log_medium == "same" or not holds_redo else 0
        out.setdefault(cell.medium, {})[key.name] = datadir_lower_bound(
            cell.engine, cell.compression, key.schema, key.tables, key.table_size, redo)
    return out


def size_field(exp: Experiment) -> str:
    return "workload.warehouses" if "tpcc" in exp.factors["workload"] else "workload.table_size"


def check_sizes(exp: Experiment, hs: HostSpec, df: Mapping[str, Capacity | None]) -> None:
    """Every data medium must hold the largest dataset planned on it, and the workdir its snapshot
    (twice when a medium shares the workdir's file system). `df` holds the host's answers for the
    workdir and the media whose recipe states no size (empty: those are not checked)."""
    bounds = dataset_bounds(exp)
    where = size_field(exp)
    work = df.get("workdir")
    for medium, needs in sorted(bounds.items()):
        m = hs.media.get(medium)
        if m is None:
            continue
        cap = recipe_capacity(m) or df.get(f"medium:{medium}")
        if cap is not None:
            shared = work is not None and cap.mount is not None and cap.mount == work.mount
            check_capacity(needs, cap, where=where, what=f"medium {medium!r} of host {hs.name!r}",
                           copies=2 if shared else 1)
    all_needs = {k: v for needs in bounds.values() for k, v in needs.items()}
    if work is not None:
        check_capacity(all_needs, work, where=where, what=f"the workdir {hs.workdir} of host {hs.name!r} "
                       "(its snapshot)")


def option_error(name: str, value: str, messages: Sequence[str], opts: so.ServerOptions | None,
                 host: str, version: str | None, engine: str) -> str:
    """One line naming the field, what mariadbd said, a close match or the allowed values."""
    said = "; ".join(m.replace("[ERROR] ", "").replace("[Warning] ", "").replace("mariadbd: ", "")
                     for m in messages)
    who = f"mariadbd {version or ''} on host {host}".replace("  ", " ")
    e = engines.find(engine)
    plugin = f" (with the {e.title} plugin)" if e is not None and e.plugin else ""
    resolved = opts.resolve(name) if opts is not None else None
    if opts is not None and resolved is None:
        close = opts.suggest(name)
        words = " or ".join(filter(None, [", ".join(close[:-1]), close[-1]])) if close else ""
        hint = f"; did you mean {words}?" if close else "; see `mariadbd --verbose --help` for the options"
        return f"server_options.{name}: not an option of {who}{plugin}: {said}{hint}"
    info = opts.options[resolved] if opts is not None and resolved is not None else None
    allowed = f"; allowed: {info.allowed()}" + (f" (default {info.default})" if info.default else "") \
        if info is not None else ""
    return f"server_options.{name}: {value!r} is refused by {who}{plugin}: {said}{allowed}"


def run_tools(exp: Experiment, hs: HostSpec) -> dict[str, str]:
    """Tool (or file, for the Galera provider) -> its package: what a run of `exp` calls on host `hs`. The
    system server's own check is its --version (:func:`build_sections`)."""
    tools = dict(RUN_TOOLS)
    for name in media_used(exp):
        if name in hs.media:
            tools.update((t, TOOL_PACKAGES.get(t, t)) for t in required_tools(hs.media[name]))
    if exp.topology.galera:
        tools.update({GALERA_PROVIDER: "galera-4", "rsync": "rsync"})
    return dict(sorted(tools.items()))


def tools_command(tools: Sequence[str]) -> str:
    """Prints each of `tools` the host lacks, one per line (a path is tested as a file)."""
    words = " ".join(shlex.quote(t) for t in tools)
    return (f"for t in {words}; do case $t in /*) [ -e \"$t\" ] ;; *) command -v \"$t\" >/dev/null 2>&1 ;; "
            "esac || echo \"$t\"; done; true")


def missing_line(check: HostCheck) -> str:
    """``<tool> (package <p>), ...``: what `check.missing` names, in its order."""
    return ", ".join(f"{t} (package {p})" for t, p in check.missing.items())


def refuse_unready(checks: Sequence[HostCheck], study: str) -> None:
    """HostError for the first host a run of `study` cannot use for want of tools (`dbmatrix run`)."""
    for c in checks:
        if c.missing:
            raise HostError(c.host, f"not set up for study {study}: missing {missing_line(c)}", SETUP_HINT)


# ---------------------------------------------------------------- the host side

def hosts_to_check(study: Study) -> list[HostSpec]:
    names = dict.fromkeys([*plan_hosts(study), *study.experiment.topology.hosts])
    return [study.inventory.host(n) for n in names]


def check_sizes_offline(study: Study) -> None:
    """The size checks the inventory decides (tmpfs and loop sizes), without connecting."""
    for hs in hosts_to_check(study):
        check_sizes(study.experiment, hs, {})


def check_study(study: Study) -> list[HostCheck]:
    """Refuse (SpecError naming the field) what cannot run on the study's hosts; returns what was checked.
    Dataset sizes the inventory decides are checked before connecting."""
    exp = study.experiment
    check_sizes_offline(study)
    hosts = hosts_to_check(study)
    out = []
    for hs in hosts:
        with hs.connect() as host:
            out.append(check_host(host, hs, exp))
    return out


def build_sections(build: ServerBuild, plugins: Mapping[str, tuple[str, ...]],
                   constants: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
    """One build's checks (pure), keyed ``<build>.version``, ``<build>.base:<engine>``, ``<build>.all:<engine>``:
    its --version, and its --verbose --help with each engine's plugins, without and with the constants."""
    server = server_argv(build)
    out = {f"{build.name}.version": f"{shlex.quote(build.server)} --version"}
    for engine, p in plugins.items():
        out[f"{build.name}.base:{engine}"] = so.help_command(p, stderr_only=True, server=server)
        out[f"{build.name}.all:{engine}"] = so.help_command(
            p, [so.render(k, v) for k, v in sorted(constants[engine].items())], stderr_only=True, server=server)
    return out


def server_argv(build: ServerBuild) -> tuple[str, ...]:
    """The server binary and the options after --no-defaults that make it read its own tree."""
    return (build.server, *build.server_options())


def check_host(host: Host, hs: HostSpec, exp: Experiment) -> HostCheck:
    """The spec's server options judged by every server build the plan uses (each build's own binary, version
    and plugins), and the dataset sizes against the media and the workdir, in one round trip."""
    plugins = engine_plugins(exp)
    constants = engine_constants(exp)
    wanted = run_tools(exp, hs)
    sections = {"workdir": df_command(hs.workdir), "tools": tools_command(list(wanted))}
    for medium in sorted({*exp.factors["medium"]}):
        if medium in hs.media and recipe_capacity(hs.media[medium]) is None:
            sections[f"medium:{medium}"] = df_command(hs.media[medium].path)
    builds = [hs.builds[b] for b in dict.fromkeys(exp.factors["server_build"]) if b in hs.builds]
    for b in builds:
        sections.update(build_sections(b, plugins, constants))
    res = host.run_sections(sections, prelude=so.PRELUDE, timeout=120)
    check_sizes(exp, hs, {k: parse_df(res[k].text, hs.workdir if k == "workdir" else hs.media[k[7:]].path)
                          for k in sections if k == "workdir" or k.startswith("medium:")})
    result = HostCheck(hs.name)
    said = res["tools"].text.split() if "tools" in res else []
    result.missing = {t: wanted[t] for t in said if t in wanted}
    problems: list[str] = []
    versions = []
    for b in builds:
        version = _check_build(host, hs, b, res, plugins, constants, result, problems)
        if version is not None:
            versions.append(version if b.is_system and len(builds) == 1 else f"{version} ({b.name})")
    result.version = ", ".join(versions) or None
    if problems:
        raise SpecError("\n".join(dict.fromkeys(problems)))
    return result


def _check_build(host: Host, hs: HostSpec, build: ServerBuild, res: Mapping[str, Any],
                 plugins: Mapping[str, tuple[str, ...]], constants: Mapping[str, Mapping[str, str]],
                 result: HostCheck, problems: list[str]) -> str | None:
    """One build's answers: its version (None when it is not there to check), problems appended."""
    ver = res[f"{build.name}.version"]
    if ver.missing or not ver.text.strip():
        if build.is_system:
            result.missing = {"mariadbd": "mariadb-server", **result.missing}
            result.notes.append(f"host {hs.name}: mariadbd not found; server options not checked")
        elif build.packages:
            result.notes.append(f"host {hs.name}: server build {build.name} not unpacked yet (its packages are "
                                "unpacked and its version checked when the study starts); its server options "
                                "are judged by the server at its first start")
        else:
            problems.append(f"factors.server_build: {builds.version_problem(build, '', 127)} on host {hs.name} "
                            f"(inventory.hosts[{hs.name}].builds.{build.name}.basedir)")
        return None
    wrong = builds.version_problem(build, ver.text, 0)
    if wrong is not None:
        if build.packages:  # unpacked again when the study starts
            result.notes.append(f"host {hs.name}: {wrong}; its packages are unpacked again when the study starts")
            return None
        problems.append(f"factors.server_build: {wrong} on host {hs.name}")
        return None
    version = so.parse_help(ver.text).version
    who = version if build.is_system else f"{version} ({build.name})"
    suspects: dict[str, list[str]] = {}
    for engine, p in plugins.items():
        base, full = res[f"{build.name}.base:{engine}"], res[f"{build.name}.all:{engine}"]
        base_msgs = so.option_messages(base.text)
        broken = [m for m in base_msgs if "[ERROR]" in m]
        if broken:
            fix = ("install them (`dbmatrix setup --roles server`)" if build.is_system else
                   f"add them to server build {build.name}")
            problems.append(f"factors.engine: {engine} needs plugin(s) {', '.join(p)}, which mariadbd {who} on "
                            f"host {hs.name} cannot load: {'; '.join(broken)}; {fix} or remove the engine")
            continue
        result.options_checked += len(constants[engine])
        if full.rc != base.rc or so.new_messages(full.text, base_msgs):
            suspects[engine] = base_msgs
    if suspects:
        problems += _attribute(host, hs, who, plugins, constants, suspects, build)
    return version


def _attribute(host: Host, hs: HostSpec, version: str | None, plugins: Mapping[str, tuple[str, ...]],
               constants: Mapping[str, Mapping[str, str]], suspects: Mapping[str, list[str]],
               build: ServerBuild = SYSTEM_BUILD) -> list[str]:
    """Each option of the engines mariadbd complained about, alone: which ones it refuses and why."""
    server = server_argv(build)
    sections: dict[str, str] = {}
    keys: dict[str, tuple[str, str]] = {}
    for engine in suspects:
        for i, (k, v) in enumerate(sorted(constants[engine].items())):
            sec = f"opt:{engine}:{i}"
            sections[sec] = so.help_command(plugins[engine], [so.render(k, v)], stderr_only=True, server=server)
            keys[sec] = (engine, k)
    res = host.run_sections(sections, prelude=so.PRELUDE, timeout=120)
    problems = []
    reported: set[str] = set()
    lists: dict[str, so.ServerOptions] = {}
    for sec, (engine, k) in keys.items():
        out = res[sec]
        msgs = so.new_messages(out.text, suspects[engine])
        if (out.rc == 0 and not msgs) or k in reported:  # an option of every engine: named once
            continue
        reported.add(k)
        if engine not in lists:
            lists[engine] = so.option_list(host, f"{hs.name}@{hs.address}:{hs.port}", version or "?",
                                           plugins[engine], server=server)
        v = constants[engine][k]
        problems.append(option_error(k, v, msgs or [f"exit status {out.rc}"], lists[engine], hs.name, version, engine))
    return problems
