"""`dbmatrix` command line: thin wrappers over the same calls the notebooks make.

Conventions: options are taken only when spelled out (no abbreviations: ``--profil`` is an error, exit 2);
``dbmatrix --version`` prints the package version and the repository's commit; a bare ``dbmatrix`` prints
this help on stdout and exits 0; ``plan``, ``status`` and ``verdicts`` take ``--json`` (one JSON document on
stdout with what the text shows).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from dbmatrix import paths
from dbmatrix.commands.common import HostProblems, log_mode, print_host_error
from dbmatrix.commands.common import studies_of as _studies
from dbmatrix.commands.compare import add_compare_parser
from dbmatrix.commands.hosts import cmd_media, cmd_setup
from dbmatrix.commands.notebooks import cmd_notebooks, cmd_paper
from dbmatrix.commands.reports import cmd_readme, cmd_report
from dbmatrix.commands.studies import cmd_analyse, cmd_figures, cmd_sources, cmd_status, cmd_verdicts
from dbmatrix.hosts.remote import HostError, RunInterrupted
from dbmatrix.spec.experiment import SpecError

LOG_MODES = ("text", "json", "quiet")


def configure_logging(mode: str = "text", stream: TextIO | None = None) -> logging.Handler:
    """The entry point's logging: dbmatrix's loggers (the progress of runs, :mod:`dbmatrix.run.progress`)
    print to `stream` (default: stderr; stdout keeps each command's own output), as text lines with the time,
    as JSON lines (``json``, one object per event, for scripts) or only warnings (``quiet``). Called again,
    it replaces its handler."""
    from dbmatrix.run.progress import JsonLines

    if mode not in LOG_MODES:
        raise SpecError(f"logging: mode {mode!r}; allowed: {', '.join(LOG_MODES)}")
    logger = logging.getLogger("dbmatrix")
    for h in [h for h in logger.handlers if getattr(h, "dbmatrix_cli", False)]:
        logger.removeHandler(h)
    handler: logging.StreamHandler[TextIO] = logging.StreamHandler(stream or sys.stderr)
    handler.dbmatrix_cli = True  # type: ignore[attr-defined]
    handler.setFormatter(JsonLines() if mode == "json" else logging.Formatter("%(asctime)s %(message)s", "%H:%M:%S"))
    logger.addHandler(handler)
    logger.setLevel(logging.WARNING if mode == "quiet" else logging.INFO)
    logger.propagate = False
    return handler


def cli_path(value: str | None, what: str, must_exist: bool = False) -> str | None:
    """A path given on the command line, made absolute against the current directory (as any command
    line tool does). A missing file that exists relative to the repository is named in the error, since
    the params files and older versions resolved relative paths there."""
    if not value:
        return value
    p = Path(value).expanduser()
    resolved = p if p.is_absolute() else Path.cwd() / p
    if must_exist and not resolved.exists():
        hint = ""
        if not p.is_absolute() and (paths.repo_root() / p).exists():
            hint = f"; relative paths are relative to the current directory: did you mean {paths.repo_root() / p}?"
        raise SpecError(f"{what}: file {str(resolved)!r} does not exist{hint}")
    return str(resolved.resolve())


def _abs_args(args: argparse.Namespace) -> None:
    """--spec, --inventory, --results, --data and --out relative to the current directory."""
    from dbmatrix.datachoice import is_keyword

    for key, what, must in (("spec", "--spec", True), ("inventory", "--inventory", True),
                            ("results", "--results", False), ("data", "--data", False), ("out", "--out", False),
                            ("html", "--html", False)):
        if getattr(args, key, None) and not (key == "data" and is_keyword(args.data)):
            setattr(args, key, cli_path(getattr(args, key), what, must))


def _host_line(h) -> str:
    if h.is_local:
        return f"host {h.name}: this machine (workdir {h.workdir})"
    t = h.ssh_target()
    key = f"key {t.key_path}" if t.key_path else "agent/default keys"
    return (f"host {h.name}: {t.login}@{h.address} port {h.port}, {key}, host key in {t.known_hosts_path} "
            f"(workdir {h.workdir}; media {', '.join(sorted(h.media))})")


def _plan_one(study) -> None:
    from dbmatrix.run.context import media_used
    from dbmatrix.run.matrix import format_duration, summarize_study

    exp = study.experiment
    s = summarize_study(study)
    print(f"experiment {exp.name} (spec {study.spec_path}, digest {exp.digest()}), seed {exp.seed}")
    w = exp.workload
    size = (f"{w.tables} table set(s) x {w.warehouses} warehouse(s), isolation {w.isolation}, {w.strings} strings"
            if w.name == "tpcc" else f"{w.tables} tables x {w.table_size} rows")
    print(f"workload {w.name}: {size}, rand-type {w.rand_type}; warm-up {exp.warmup_s}s, measure {exp.measure_s}s")
    varied = exp.varied_factors()
    print(f"{len(exp.cells())} cells (varied: {', '.join(varied) or 'none'}) x {exp.repetitions} "
          f"repetitions = {len(s.runs)} runs on {', '.join(h.name for h in study.inventory.hosts)}")
    info = exp.design_info()
    if info["design"] == "fractional":
        print(f"design: {info['fraction']} fraction of resolution {info['resolution']} "
              f"(generators {', '.join(info['generators'])}; "
              + ", ".join(f"{k}={v}" for k, v in info["letters"].items()) + ")")
    elif info["design"] != "full":
        from dbmatrix.spec.experiment import design_text

        print(f"design: {design_text(info)}")
    cal = exp.topology.calibrate
    if cal is not None:
        what = ("each follower's CPU limit (% of one CPU, cgroup cpu.max)" if cal.cpu
                else f"{cal.limit} of medium {cal.medium}")
        print(f"calibration before each campaign: {what} from "
              f"{', '.join(map(str, cal.candidates))} (mildest first), one applier, {cal.warmup_s}s + "
              f"{cal.measure_s}s per candidate, until flow control pauses >= {cal.target_fc_paused_pct:g} %")
    if exp.topology.instances:
        t = exp.topology
        print(f"topology: instances {', '.join(map(str, exp.factors['instances']))} per run on "
              f"{', '.join(t.hosts) or 'the run host'} (client on {t.client or 'the run host'}); pinning "
              f"{', '.join(exp.factors['pinning'])} with {exp.cpu_placement.tool}")
    for h in study.inventory.hosts:
        print(_host_line(h))
    media = study.inventory.hosts[0].media  # every host defines the spec's media (checked at load)
    print("media: " + ", ".join(m + (f" (emulates {media[m].emulates})" if media[m].emulates else "")
                                for m in media_used(exp)))
    if list(exp.factors["server_build"]) != ["system"]:
        from dbmatrix.hosts.builds import build_line

        builds = study.inventory.hosts[0].builds  # every host defines the spec's builds (checked at load)
        print("server builds: " + "; ".join(build_line(builds[b]) for b in exp.factors["server_build"]))
    if exp.comparisons:
        print("comparisons: " + "; ".join(f"{c.factor} {c.a} vs {c.b}" + (f" within {', '.join(c.within)}"
                                                                        if c.within else "")
                                        for c in exp.comparisons))
    if exp.noise.adaptive:
        from dbmatrix.analyse.verdict_text import DEFAULT_CONFIDENCE, level_label

        print(f"adaptive: up to {exp.noise.max_repetitions} repetitions until the {level_label(DEFAULT_CONFIDENCE)} "
              "half-width is "
              f"under {exp.noise.target_halfwidth_pct:g} % of the mean")
    print("datasets to prepare: " + ", ".join(s.datasets))
    multi = len(s.hosts) > 1
    print(f"{'order':>5} {'block':>5}  " + ("host  " if multi else "") + "run_id")
    for row in s.table():
        print(f"{row['order']:>5} {row['block']:>5}  " + (f"{row['host']}  " if multi else "") + row["run_id"])
    if multi:
        for h in s.hosts:
            print(f"host {h}: {s.runs_per_host.get(h, 0)} runs, ~{format_duration(s.estimated_s_per_host.get(h, 0))}")
        for note in s.notes:
            print(f"note: {note}")
        print(f"estimated duration: {format_duration(s.estimated_wall_s)} wall clock on {len(s.hosts)} hosts "
              f"({format_duration(s.estimated_s)} of machine time in all; results in {study.store.root})")
    else:
        print(f"estimated duration: {format_duration(s.estimated_s)} (results in {study.store.root})")
    for line in _allocation_lines(study):
        print(line)


def _allocation_lines(study) -> list[str]:
    """With ``scheduler: slurm``: the allocation each replicate block will request and the time limit it
    needs (the block's estimated duration plus the inventory's margin)."""
    from dbmatrix.run.matrix import format_duration, plan_hosts, study_assignment, summarize_plan
    from dbmatrix.run.slurm import block_request, describe_request

    cfg = study.inventory.slurm
    if cfg is None:
        return []
    exp = study.experiment
    block_hosts = study_assignment(study, plan_hosts(study))
    plan = exp.plan()
    lines = [f"slurm allocations ({len(block_hosts)}, one per replicate block; whole nodes, released when the "
             "block is done):"]
    for block, host in sorted(block_hosts.items()):
        runs = [r for r in plan if r.block == block]
        est = summarize_plan(exp, runs, hosts=[host]).estimated_s
        req = block_request(exp, study.inventory, block, host, est)
        lines.append(f"  {describe_request(cfg, req)}")
        lines.append(f"    {len(runs)} runs, ~{format_duration(est)} estimated; time limit "
                     f"{format_duration(req.time_limit_s)}"
                     + (" (fixed by slurm.time_limit)" if cfg.time_limit else
                        f" (+{cfg.time_margin_pct:g} % margin, at least {format_duration(cfg.min_time_limit)})"))
    return lines


def _preflight(studies: list, *, skip: bool = False) -> dict[str, list]:
    """Each study's host checks (server options by the hosts' mariadbd, dataset sizes against the media):
    a SpecError names the field before anything runs. `skip` (--no-host-check): only the checks that need
    no connection."""
    from dbmatrix.run.preflight import check_sizes_offline, check_study

    out: dict[str, list] = {}
    for study in studies:
        if skip:
            check_sizes_offline(study)
            continue
        try:
            out[study.experiment.name] = check_study(study)
        except SpecError as exc:
            raise SpecError(f"{exc}\n(spec {study.spec_path}; nothing was run)") from None
    return out


def _checked_line(checks: list) -> str:
    from dbmatrix.run.preflight import missing_line

    parts = []
    for c in checks:
        if c.version:
            parts.append(f"{c.options_checked} server option setting(s) accepted by mariadbd {c.version} on "
                         f"{c.host}")
        parts += c.notes
        if c.missing:
            parts.append(f"host {c.host} is not set up: missing {missing_line(c)} (`dbmatrix setup --roles "
                         "server` installs them; `dbmatrix run` refuses until then)")
    return "checked: " + "; ".join(parts) + "; datasets fit their media"


def cmd_plan(args: argparse.Namespace) -> int:
    from dbmatrix.allocation_plan import allocation_lines
    from dbmatrix.claim_plan import claim_plan_lines, refuse_unidentified
    from dbmatrix.run.matrix import campaign_lines, format_duration, next_campaign
    from dbmatrix.sentinel_plan import sentinel_plan_lines

    studies = _studies(args, access=True)
    refuse_unidentified(studies)
    checks = _preflight(studies, skip=args.no_host_check)
    if args.as_json:
        return _plan_json(args, studies, checks)
    for i, study in enumerate(studies):
        if i:
            print()
        _plan_one(study)
        if study.experiment.name in checks:
            print(_checked_line(checks[study.experiment.name]))
        for line in [*campaign_lines(study, plan_note=True), *sentinel_plan_lines(study), *claim_plan_lines(study),
                     *(allocation_lines(study) if args.profile == "paper" else [])]:
            print(line)
    if len(studies) > 1:
        nxt = {s.experiment.name: next_campaign(s) for s in studies}
        total = sum(est for _, _, est in nxt.values())
        which = ", ".join(f"{name} {n}" for name, (n, _, _) in nxt.items())
        print(f"\nprofile {args.profile}: {len(studies)} studies, estimated {format_duration(total)} in all for "
              f"the campaign --campaign auto runs of each ({which})")
    return 0


def _plan_json(args: argparse.Namespace, studies: list, checks: dict[str, list]) -> int:
    """`plan --json`: :func:`dbmatrix.commands.documents.plan_doc` per study, and the profile's total."""
    from dbmatrix.allocation_plan import allocation_lines
    from dbmatrix.commands.documents import emit, plan_doc
    from dbmatrix.run.matrix import summarize_study

    docs = []
    for study in studies:
        name = study.experiment.name
        lines = {"hosts": [_host_line(h) for h in study.inventory.hosts],
                 "checked": [_checked_line(checks[name])] if name in checks else [],
                 "allocation": allocation_lines(study) if args.profile == "paper" else [],
                 "slurm": _allocation_lines(study)}
        docs.append(plan_doc(study, checks.get(name), lines))
    emit({"profile": args.profile, "studies": docs,
          "estimated_wall_s": sum(summarize_study(s).estimated_wall_s for s in studies)})
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from dbmatrix.analyse.claims.registration import current_registration
    from dbmatrix.claim_plan import refuse_unidentified
    from dbmatrix.decide import rounds_option
    from dbmatrix.run.matrix import lost_hosts_message, run_study
    from dbmatrix.run.preflight import refuse_unready
    from dbmatrix.run.reports import resume_hint
    from dbmatrix.study import sittings

    rounds_option(args.until_decided, args.budget)  # a bad --budget fails before anything runs
    lost, reports = False, {}
    studies, left = sittings(_studies(args, access=True), named=args.spec is not None)
    for line in left:
        print(line)
    rounds = rounds_option(args.until_decided, args.budget, studies)  # the budget is the studies' together
    refuse_unidentified(studies)
    for name, checks in _preflight(studies).items():  # a host not set up: before any campaign is opened
        refuse_unready(checks, name)
    for study in studies:
        kwargs: dict[str, Any] = {"host_name": args.host} if args.host else {}
        if rounds is not None:  # looks after every block: dbmatrix.decide
            kwargs["next_round"] = rounds(study)
        # one log line per run (dbmatrix.run.progress) instead of a tqdm bar, which the lines would break up
        counts = run_study(study, progress=False, max_runs=args.max_runs,
                           allow_lost_hosts=args.allow_lost_hosts, campaign=args.campaign,
                           registration=current_registration(), **kwargs)
        print(json.dumps({"experiment": study.experiment.name, **counts.as_dict()}))
        reports[study.experiment.name] = counts
        if (msg := lost_hosts_message(counts)) is not None:
            print(f"{study.experiment.name}: {msg}", file=sys.stderr)
            lost = lost or not args.allow_lost_hosts
    if (hint := resume_hint(reports, args.campaign)) is not None:
        print(hint, file=sys.stderr)
    return 4 if lost else 3 if any(r.failed for r in reports.values()) else 0


CAMPAIGN_HELP = ("which campaign (one run of the whole matrix on one boot) to run: auto = continue the latest "
                 "if incomplete, else start a new one; new = start a new one; last = continue the latest "
                 "(nothing to run if complete); K = continue campaign K.")


def _campaign_arg(value: str) -> str | int:
    from dbmatrix.run.campaigns import parse_option

    try:
        return parse_option(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


class Parser(argparse.ArgumentParser):
    """An argument parser without abbreviations (``--profil`` is not ``--profile``); its subparsers are of
    this class too (argparse makes them of the parent's class)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["allow_abbrev"] = False
        super().__init__(*args, **kwargs)


def version_text() -> str:
    """``dbmatrix <version>``, then the repository the commands use and its git commit (``+ uncommitted
    changes`` when dirty) when it is a git checkout, and where the code comes from when that is elsewhere."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        text = f"dbmatrix {version('dbmatrix')}"
    except PackageNotFoundError:
        text = "dbmatrix (not installed)"
    root = paths.repo_root()
    state = paths.git_state(root) if paths.is_checkout(root) else {"commit": None}
    if state["commit"]:
        text += f"\nrepository {root} at commit {state['commit']}" + (" + uncommitted changes"
                                                                      if state["dirty"] else "")
    code = Path(__file__).resolve().parents[1]
    if code != (root / "lib").resolve():
        text += f"\ncode from {code}"
    return text


class _Version(argparse.Action):
    """--version: print :func:`version_text` (git is asked only when the option is given) and exit 0."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **kwargs: Any) -> None:
        super().__init__(option_strings, dest=dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        print(version_text())
        parser.exit(0)


def profile_help() -> str:
    """The --profile help: every profile notebooks/params/ holds, read when the parser is built."""
    names = paths.profiles()
    return f"one of {', '.join(names) or '(none found)'} (notebooks/params/<profile>.yaml; default: quick)"


def json_arg(sp: argparse.ArgumentParser, what: str) -> None:
    sp.add_argument("--json", dest="as_json", action="store_true",
                    help=f"print {what} as one JSON document on stdout instead of text")


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="dbmatrix", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action=_Version, help="print the version and the repository's git commit")
    sub = p.add_subparsers(dest="command", required=True)
    profiles = profile_help()

    def study_args(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--profile", default="quick", help=profiles)
        sp.add_argument("--spec", help="one experiment spec YAML (default: every spec the profile lists)")
        sp.add_argument("--inventory", help="inventory YAML (default: localhost)")
        sp.add_argument("--results", help="one study's results directory (needs --spec when the profile "
                                          "lists several specs)")
        sp.add_argument("--data", metavar="auto|reference|runs|DIR",
                        help="which results analysis, figures and the paper read: reference (the committed "
                             "data/reference/<experiment>), runs (your data/runs/<experiment>, complete or "
                             "not), DIR (DIR/<experiment>), or auto (default: your runs once they hold a "
                             "complete campaign, else the reference). For runs: DIR/<experiment> instead of "
                             "data/runs/<experiment>")

    def log_args(sp: argparse.ArgumentParser) -> None:
        g = sp.add_mutually_exclusive_group()
        g.add_argument("--quiet", action="store_true", help="no progress lines (warnings and errors only)")
        g.add_argument("--json", action="store_true", help="progress as JSON lines on stderr, one per event "
                                                           "(study_start, run, study_end)")

    sp = sub.add_parser("plan", help="show cells, datasets and estimated duration; runs nothing")
    study_args(sp)
    sp.add_argument("--no-host-check", action="store_true",
                    help="do not connect: skip the hosts' check of the server options and of free space "
                         "(media sizes the inventory states are still checked)")
    json_arg(sp, "the plan")
    sp.set_defaults(func=cmd_plan)
    sp = sub.add_parser("run", help="run (or resume) the matrix")
    study_args(sp)
    sp.add_argument("--max-runs", type=int, help="stop after this many runs per study (resume later)")
    sp.add_argument("--host", help="run on this inventory host only (default: all hosts of the inventory)")
    sp.add_argument("--no-progress", action="store_true", help="the same as --quiet")
    log_args(sp)
    sp.add_argument("--allow-lost-hosts", action="store_true",
                    help="go on when a host is lost: the others take its whole blocks not yet started "
                         "(default: the line stops and the command fails)")
    sp.add_argument("--campaign", type=_campaign_arg, default="last", metavar="auto|new|last|K",
                    help=CAMPAIGN_HELP + " Default here: last (resume; `make reproduce` and `make run` pass "
                         "CAMPAIGN, default auto)")
    sp.add_argument("--until-decided", action="store_true", help="after the planned runs, add replicate blocks "
                    "to the cells of the claims still undecided (a sequential rule: docs/method.md)")
    sp.add_argument("--budget", metavar="DURATION", help="with --until-decided: the time "
                    "for all the studies run together (7200s, 90m, 2h, 1h30m), split in proportion to their "
                    "planned durations; no block that would end after a study's share")
    sp.set_defaults(func=cmd_run)
    sp = sub.add_parser("status", help="done, failed and pending runs")
    study_args(sp)
    json_arg(sp, "each study's status")
    sp.set_defaults(func=cmd_status)
    sp = sub.add_parser("setup", help="install OS packages on this machine or the inventory's hosts")
    sp.add_argument("--roles", default="server", help="comma list of: server, paper, test")
    sp.add_argument("--inventory", help="inventory YAML (default: this machine)")
    sp.add_argument("--dry-run", action="store_true", help="print the commands only")
    sp.set_defaults(func=cmd_setup)
    sp = sub.add_parser("notebooks", help="execute the notebooks with papermill")
    study_args(sp)
    sp.add_argument("--only", help="comma list of notebook numbers, e.g. 20,30")
    log_args(sp)
    sp.add_argument("--campaign", type=_campaign_arg, metavar="auto|new|last|K",
                    help=CAMPAIGN_HELP + " Passed to notebook 10 (its default: last; `make reproduce` passes "
                         "CAMPAIGN, default auto)")
    sp.set_defaults(func=cmd_notebooks)
    sp = sub.add_parser("media", help="plan, verify, ensure (apply) or tear down storage media")
    sp.add_argument("action", choices=("plan", "verify", "ensure", "teardown"))
    sp.add_argument("names", nargs="*", help="media names (default: all of each host)")
    sp.add_argument("--inventory", help="inventory YAML (default: localhost)")
    sp.set_defaults(func=cmd_media)
    sp = sub.add_parser("sources", help="which data figures and the paper read per study")
    study_args(sp)
    sp.add_argument("--make", action="store_true", help="print the makefile fragment the Makefile includes")
    sp.set_defaults(func=cmd_sources)
    sp = sub.add_parser("analyse", help="processed tables of every study with data (notebook 20's work)")
    study_args(sp)
    sp.set_defaults(func=cmd_analyse)
    sp = sub.add_parser("figures", help="figures and the paper's generated inputs (notebook 30's work)")
    study_args(sp)
    sp.add_argument("--timeline-cells", help="comma list of cell ids for the per-second figure")
    sp.add_argument("--out", help="write DIR/figures/ and DIR/paper/generated/ (default: the repository's "
                                  "figures/ and paper/generated/, or $DBMATRIX_OUTPUT_ROOT)")
    sp.set_defaults(func=cmd_figures)
    sp = sub.add_parser("verdicts", help="per claim: each campaign's verdict and the pooled one; flips; each "
                                         "interval with its level, how conditions combine, each condition's verdict")
    study_args(sp)
    sp.add_argument("--csv", help="also write the claims table to this CSV file (and each campaign's "
                    "estimates and verdicts beside it, <name>-campaigns.csv, and each condition's, <name>-levels.csv)")
    json_arg(sp, "the claims, their verdicts and the counts")
    sp.set_defaults(func=cmd_verdicts)
    add_compare_parser(sub, profiles)
    sp = sub.add_parser("report", help="one self-contained HTML file: figures, claims, cells with intervals, "
                                       "provenance, host facts (from what `dbmatrix figures` wrote)")
    sp.add_argument("--out", help="read DIR/figures and DIR/paper/generated, as `figures --out DIR` wrote them "
                                  "(default: the repository's, or $DBMATRIX_OUTPUT_ROOT's)")
    sp.add_argument("--html", help="the file to write (default: data/report.html)")
    sp.set_defaults(func=cmd_report)
    sp = sub.add_parser("readme", help="rewrite the README's generated blocks from the committed data")
    sp.add_argument("--check", action="store_true", help="only compare: exit 1 when a block differs")
    sp.set_defaults(func=cmd_readme)
    sp = sub.add_parser("paper", help="build paper/main.pdf with latexmk")
    sp.add_argument("--out", help="build in DIR/paper/ from the inputs `figures --out DIR` wrote (default: the "
                                  "repository's paper/, or $DBMATRIX_OUTPUT_ROOT/paper)")
    sp.set_defaults(func=cmd_paper)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command (exit 2 on a usage, spec or host error). A bare ``dbmatrix`` prints the help on stdout
    and returns 0: it is asking what there is, not an error; options without a command are still exit 2."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv:
        build_parser().print_help()
        return 0
    args = build_parser().parse_args(argv)
    configure_logging(log_mode(args))
    try:
        _abs_args(args)
        return args.func(args)
    except SpecError as exc:
        print(f"dbmatrix: {exc}", file=sys.stderr)
        return 2
    except HostProblems:  # each host's problem is printed already
        return 2
    except HostError as exc:
        print_host_error(exc)
        return 2
    except (KeyboardInterrupt, RunInterrupted):
        print("interrupted: completed runs are kept; run the same command again to resume", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
