"""`dbmatrix` command line: thin wrappers over the same calls the notebooks make."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from dbmatrix import paths
from dbmatrix.hosts.remote import CommandError, HostError, RunInterrupted
from dbmatrix.spec.experiment import SpecError

NOTEBOOKS = ("00-host-setup", "10-run-matrix", "20-analysis", "30-figures")
# As committed, 00 and 10 print what they would do; `dbmatrix notebooks` (make reproduce) asks them to act.
ACTS: dict[str, dict[str, object]] = {"00-host-setup": {"confirm_install": True}, "10-run-matrix": {"run": True}}


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


def log_mode(args: argparse.Namespace) -> str:
    """--quiet (or --no-progress), --json, else text."""
    if getattr(args, "quiet", False) or getattr(args, "no_progress", False):
        return "quiet"
    return "json" if getattr(args, "json", False) else "text"


class HostProblems(Exception):
    """One or more hosts that cannot be used (each already printed); the command exits 2."""


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


def print_host_error(exc: BaseException, host: str | None = None) -> None:
    """``dbmatrix: <host>: <what is wrong>`` and an indented hint, on stderr; no traceback."""
    if isinstance(exc, HostError):
        print(f"dbmatrix: {exc.host}: {exc.message}", file=sys.stderr)
        if exc.hint:
            print(f"  hint: {exc.hint}", file=sys.stderr)
        return
    name = host or getattr(exc, "host", None)
    print(f"dbmatrix: {name + ': ' if name else ''}{exc}", file=sys.stderr)


def check_hosts(inventory) -> None:
    """The checks that need no connection (key files, known_hosts entries) for every host; each problem
    is printed, and any raises :class:`HostProblems` before a connection is made."""
    problems = 0
    for h in inventory.hosts:
        try:
            h.check_access()
        except HostError as exc:
            print_host_error(exc)
            problems += 1
    if problems:
        raise HostProblems(f"{problems} host(s) cannot be used")


def _studies(args: argparse.Namespace, for_run: bool = True, access: bool = False) -> list:
    """The profile's studies (or the one --spec), with results for running or for reading; with
    `access`, the inventory's hosts are checked for what can be checked before connecting. For running,
    a data choice that names no directory (auto, reference, runs) means data/runs/<experiment>."""
    from dbmatrix.datachoice import is_keyword
    from dbmatrix.study import load_studies

    data = getattr(args, "data", None)
    if for_run and is_keyword(data):
        data = None
    studies = load_studies(args.profile, spec=args.spec, inventory=args.inventory, results_dir=args.results,
                           data=data, for_run=for_run)
    if access:
        checked: list[object] = []
        for st in studies:  # the studies of a profile share one inventory: check (and print) it once
            if st.inventory not in checked:
                checked.append(st.inventory)
                check_hosts(st.inventory)
    return studies


def _host_line(h) -> str:
    if h.is_local:
        return f"host {h.name}: this machine (workdir {h.workdir})"
    t = h.ssh_target()
    key = f"key {t.key_path}" if t.key_path else "agent/default keys"
    return (f"host {h.name}: {t.login}@{h.address} port {h.port}, {key}, host key in {t.known_hosts_path} "
            f"(workdir {h.workdir}; media {', '.join(sorted(h.media))})")


def _study(args: argparse.Namespace):
    return _studies(args)[0]


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
        print(f"calibration before each campaign: {cal.limit} of medium {cal.medium} from "
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
    if exp.comparisons:
        print("comparisons: " + "; ".join(f"{c.factor} {c.a} vs {c.b}" + (f" within {', '.join(c.within)}"
                                                                        if c.within else "")
                                        for c in exp.comparisons))
    if exp.noise.adaptive:
        print(f"adaptive: up to {exp.noise.max_repetitions} repetitions until the 95 % CI half-width is "
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
    parts = []
    for c in checks:
        if c.version:
            parts.append(f"{c.options_checked} server option setting(s) accepted by mariadbd {c.version} on "
                         f"{c.host}")
        parts += c.notes
    return "checked: " + "; ".join(parts) + "; datasets fit their media"


def cmd_plan(args: argparse.Namespace) -> int:
    from dbmatrix.run.matrix import campaign_lines, format_duration, summarize_study

    studies = _studies(args, access=True)
    checks = _preflight(studies, skip=args.no_host_check)
    for i, study in enumerate(studies):
        if i:
            print()
        _plan_one(study)
        if study.experiment.name in checks:
            print(_checked_line(checks[study.experiment.name]))
        for line in campaign_lines(study, plan_note=True):
            print(line)
    if len(studies) > 1:
        total = sum(summarize_study(s).estimated_wall_s for s in studies)
        print(f"\nprofile {args.profile}: {len(studies)} studies, estimated {format_duration(total)} in all")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from dbmatrix.analyse.claims.registration import current_registration
    from dbmatrix.decide import rounds_option
    from dbmatrix.run.matrix import lost_hosts_message, run_study

    rounds = rounds_option(args.until_decided, args.budget)  # a bad --budget fails before anything runs
    failed, lost = 0, False
    studies = _studies(args, access=True)
    _preflight(studies)
    for study in studies:
        kwargs: dict[str, Any] = {"host_name": args.host} if args.host else {}
        if rounds is not None:  # looks after every block: dbmatrix.decide
            kwargs["next_round"] = rounds(study)
        # one log line per run (dbmatrix.run.progress) instead of a tqdm bar, which the lines would break up
        counts = run_study(study, progress=False, max_runs=args.max_runs,
                           allow_lost_hosts=args.allow_lost_hosts, campaign=args.campaign,
                           registration=current_registration(), **kwargs)
        print(json.dumps({"experiment": study.experiment.name, **counts.as_dict()}))
        failed += counts.failed
        if (msg := lost_hosts_message(counts)) is not None:
            print(f"{study.experiment.name}: {msg}", file=sys.stderr)
            lost = lost or not args.allow_lost_hosts
    return 4 if lost else 0 if failed == 0 else 3


def cmd_status(args: argparse.Namespace) -> int:
    from dbmatrix.run.matrix import campaign_lines, format_duration, study_status, time_accounting
    from dbmatrix.study import data_source

    for study in _studies(args):
        src = data_source(study.experiment, args.data)
        print(f"{study.experiment.name}: figures and paper read {paths.display_path(src.path)} "
              f"({src.origin}; --data {src.choice}: {src.reason})")
        st = study_status(study)
        print(f"{st.experiment}: {st.ok}/{st.planned} runs done, {len(st.failed)} failed, "
              f"{st.pending} not started; ~{format_duration(st.estimated_remaining_s)} left "
              f"({st.results_dir}); "
              + (f"campaign {st.campaign} of {len(st.campaigns)}" if st.campaigns else "no campaign yet"))
        for run_id in st.failed:
            print(f"  failed: {run_id}")
        if len(st.per_host) > 1 or st.lost_hosts:
            for h, v in st.per_host.items():
                print(f"  host {h}: {v['ok']}/{v['planned']} done, {v['failed']} failed, {v['pending']} not "
                      f"started, busy {format_duration(v['busy_s'])}, ~{format_duration(v['estimated_remaining_s'])}"
                      " left" + (f"; LOST: {st.lost_hosts[h]}" if h in st.lost_hosts else ""))
            print(f"  busy time summed over hosts {format_duration(st.busy_s_total)} (machine time; the "
                  "time left above is wall-clock, hosts in parallel)")
        if st.host_check:
            print(f"  {st.host_check}")
        for line in campaign_lines(study):
            print(line)
        t = time_accounting(study.store)
        if t["total_s"]:
            steps = ", ".join(f"{k[:-2]} {format_duration(v)}" for k, v in t.items()
                              if k.endswith("_s") and k != "total_s" and v >= 1)
            print(f"time recorded {format_duration(t['total_s'])}, {t['measure_fraction']:.0%} of it measuring "
                  f"({steps})")
    return 0


def with_code_lists(rules: str, profile: str) -> str:
    """The make fragment with ANALYSIS_CODE and FIGURE_CODE (from the import graph) set before its first
    rule, whose prerequisites make expands as it reads them."""
    from dbmatrix.codedeps import make_variables

    head, sep, rest = rules.partition("\n\n")
    return head + "\n" + make_variables(paths.repo_root(), profile) + sep + rest


def cmd_sources(args: argparse.Namespace) -> int:
    """Where figures and the paper read each study's data (runs, else the committed reference)."""
    from dbmatrix.datachoice import is_keyword
    from dbmatrix.study import make_rules, sources

    studies = _studies(args, for_run=False)
    if args.make:
        # The fragment names a data root inside the repository relative to it (as `make DATA=…` gives it),
        # so it reads the same from any checkout and make's rules compare equal.
        data = args.data
        if data and not is_keyword(data) and Path(data).is_relative_to(paths.repo_root().resolve()):
            data = str(Path(data).relative_to(paths.repo_root().resolve()))
        sys.stdout.write(with_code_lists(make_rules(studies, args.profile, data), args.profile))
        return 0
    for _, r in sources(studies).iterrows():
        origin = "reference" if r["reference"] else "runs"
        state = "completed runs" if r["has_data"] else "no completed runs (not run)"
        print(f"{r['experiment']:<28} {r['kind']:<8} {r['results_dir']} ({origin}; {state}; --data {r['choice']}: "
              f"{r['reason']})")
    return 0


def cmd_analyse(args: argparse.Namespace) -> int:
    """Notebook 20 without the notebook: processed tables of every study that has data."""
    from dbmatrix import steps
    from dbmatrix.analyse.hosts import host_check_line

    for study in _studies(args, for_run=False):
        if not study.has_data():
            print(f"{study.experiment.name}: no completed runs in {study.store.root}; skipped")
            continue
        a = steps.analyse_study(study)
        n = len(a.runs) if a is not None else 0
        print(f"{study.experiment.name}: {n} runs analysed -> {study.store.processed}")
        if a is not None and (line := host_check_line(a.hosts)):
            print(f"  {line}")
    return 0


def cmd_figures(args: argparse.Namespace) -> int:
    """Notebook 30 without the notebook: figures and the paper's generated inputs."""
    from dbmatrix import steps

    studies = _studies(args, for_run=False)
    have = [s for s in studies if s.has_data()]
    if not have:
        raise SpecError("figures: no study has completed runs: " + ", ".join(
            f"{s.experiment.name} ({s.store.root})" for s in studies) + "; run them first (dbmatrix run), or "
            "name their results with --results/--data")
    out = steps.make_figures(studies, data=args.data, out=args.out,
                             timeline_cells=args.timeline_cells.split(",") if args.timeline_cells else None)
    for stem, exp in out.figures.items():
        print(f"figure {stem} <- {exp}")
    for note in out.skipped:
        print(f"skipped: {note}")
    print(f"figures in {paths.figures_dir(args.out)}, paper inputs in {paths.generated_dir(args.out)}")
    return 0


def cmd_verdicts(args: argparse.Namespace) -> int:
    """Per claim: each campaign's verdict and the pooled one, and how many claims flip between campaigns."""
    from dbmatrix import steps

    studies = _studies(args, for_run=False)
    if not any(s.has_data() for s in studies):
        raise SpecError("verdicts: no study has completed runs: " + ", ".join(
            f"{s.experiment.name} ({s.store.root})" for s in studies))
    result, flips = steps.verdicts(studies)
    table = result.claims
    ks = result.campaign_numbers()
    camps = table.set_index("id")["campaigns"]
    width = max(len(i) for i in flips["id"])
    print(f"{'claim':<{width}}  seed  campaigns  " + "".join(f"{'C' + str(k):<17}" for k in ks) + "pooled")
    for _, r in flips.iterrows():
        per = "".join(f"{result.campaign_verdict(r['id'], k) or '-':<17}" for k in ks)
        flag = "  <- flips" if r["flip"] else ""
        registration = table.set_index("id")["registration"].get(r["id"], "")
        flag += f"  ({registration})" if registration in ("revised after data", "added after data") else ""
        print(f"{r['id']:<{width}}  {r['seed']:<4}  {int(camps[r['id']]):<9}  {per}{r['pooled']}{flag}")
    tested = int((table["campaigns"] > 1).sum())
    print(f"claims judged on two or more campaigns: {tested}; flipping between campaigns: {int(flips['flip'].sum())}")
    opposite = flips.loc[flips["contradicted"], "id"].tolist()
    print("pooled agree/disagree contradicted by a campaign: " + (", ".join(opposite) if opposite else "none"))
    for line in steps.campaign_lines(table, studies):
        print(line)
    if args.csv:
        table.to_csv(args.csv, index=False)
        per_campaign = Path(args.csv).with_name(Path(args.csv).stem + "-campaigns.csv")
        result.campaigns.to_csv(per_campaign, index=False)
        print(f"claims table: {args.csv}; per campaign: {per_campaign}")
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    """B against A (:mod:`dbmatrix.analyse.compare`); exits 1 when --fail-above finds a regression."""
    from dbmatrix.analyse import compare
    from dbmatrix.resultsets import claims_table, load_set, spec_for
    from dbmatrix.spec.experiment import load_spec
    from dbmatrix.study import data_source

    if args.campaigns:
        if not args.study or args.b:
            raise SpecError("compare --campaigns KA KB: give --study EXPERIMENT and at most one result set "
                            "(default: the study's data as --data auto chooses it)")
        spec = spec_for(args.study, args.profile)
        root = args.a or str(data_source(load_spec(spec), "auto").path.parent if spec is not None
                             else paths.reference_dir(args.study).parent)
        sides = [load_set(root, args.profile, args.study, k) for k in args.campaigns]
    else:
        sides = [load_set(args.a or "reference", args.profile, args.study),
                 load_set(args.b or "runs", args.profile, args.study)]
    a, b = sides
    claims = [None, None] if args.no_claims else [claims_table(s.studies, s.campaign) for s in sides]
    result = compare.compare_sets(a.label, a.runs, b.label, b.runs, *claims)
    text = {"markdown": compare.markdown, "json": compare.to_json}.get(args.format)
    body = text(result, args.fail_above) if text else compare.to_csv(result)
    if args.out:
        Path(args.out).write_text(body)
        if args.format == "csv" and result.claims is not None:
            result.claims.to_csv(Path(args.out).with_name(Path(args.out).stem + "-claims.csv"), index=False)
        print(f"comparison written to {args.out}")
    else:
        sys.stdout.write(body)
    if args.fail_above is not None:
        reg = result.regressions(args.fail_above)
        if not reg.empty:
            print(f"dbmatrix: {len(reg)} decided regression(s) beyond {args.fail_above:g} %: "
                  + ", ".join(f"{r.cell_id} {r.metric} x{r.ratio:.3f}" for r in reg.itertuples()), file=sys.stderr)
            return 1
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    """One self-contained HTML file of the build `dbmatrix figures` wrote (:mod:`dbmatrix.publish.report`)."""
    from dbmatrix.publish.report import write_report

    target = args.html or str(paths.output_root() / "data" / "report.html")
    try:
        path = write_report(target, args.out)
    except FileNotFoundError as exc:
        raise SpecError(str(exc)) from None
    print(f"report: {path} ({path.stat().st_size // 1024} KiB; open file://{path.resolve()})")
    return 0


def cmd_setup(args: argparse.Namespace) -> int:
    from dbmatrix.hosts.inventory import load_inventory
    from dbmatrix.hosts.remote import LocalHost
    from dbmatrix.hosts.setup import SetupError, setup_packages

    roles = tuple(r for r in args.roles.split(",") if r)
    inventory = load_inventory(args.inventory) if args.inventory else None
    if inventory is not None:
        check_hosts(inventory)  # before any connection
    connects = [(h.name, h.connect) for h in inventory.hosts] if inventory else [("localhost", LocalHost)]
    failed = 0
    for name, connect in connects:
        try:
            with connect() as host:
                rep = setup_packages(host, roles, dry_run=args.dry_run)
        except (HostError, SetupError, CommandError) as exc:  # the other hosts are still set up
            print_host_error(exc, name)
            failed += 1
            continue
        state = ("would install " if args.dry_run else "installed ") + " ".join(rep.missing_before) \
            if rep.changed else "all packages present"
        print(f"{rep.host} ({rep.family}): {state}")
        for c in rep.commands if args.dry_run else ():
            print(f"  {c}")
        # the versions read back from the package manager after installing (dry run: as found)
        for line in rep.lines():
            print(f"  {line}")
    if failed:
        print(f"dbmatrix: setup failed on {failed} of {len(connects)} host(s)", file=sys.stderr)
        return 2
    return 0


def notebook_parameters(profile: str, results: str | None = None, spec: str | None = None,
                        inventory: str | None = None, data: str | None = None,
                        campaign: str | None = None) -> dict[str, object]:
    """What papermill injects: the profile, the data choice (auto unless given: the notebooks' own default
    is the committed reference), and the overrides given. Paths given are made absolute here, relative to
    the current directory (the notebooks run in notebooks/); the profile's own inventory stays as its
    params file says (relative to the repository). Running the notebooks from the command line is the
    explicit request that notebooks 00 and 10 act (their `confirm_install`, `run`), which
    :func:`run_notebooks` adds to those two."""
    from dbmatrix.datachoice import is_keyword, parse_choice
    from dbmatrix.study import profile_params

    injected: dict[str, object] = {"profile": profile, "inventory": profile_params(profile).get("inventory"),
                                   "data": parse_choice(data)}
    for k, v in (("results_dir", results), ("data", data), ("spec", spec), ("inventory", inventory)):
        if v and not (k == "data" and is_keyword(v)):
            injected[k] = str(Path(v).resolve())
    if campaign:  # notebook 10's campaign choice (its own default: last)
        injected["campaign"] = str(campaign)
    return injected


def kernel_logging_arguments(mode: str) -> list[str]:
    """The kernel's command line options that configure its logging as this command's (`mode`): its
    progress lines then go to the cells' stderr, which :func:`run_notebooks` forwards to the terminal. A
    kernel JupyterLab starts has no such option: the notebook shows its progress widget only."""
    return [f"--IPKernelApp.exec_lines=import dbmatrix.cli; dbmatrix.cli.configure_logging({mode!r})"]


def run_notebooks(profile: str, names: Sequence[str], results: str | None = None,
                  spec: str | None = None, inventory: str | None = None,
                  data: str | None = None, campaign: str | None = None, log: str = "text") -> list[Path]:
    """Execute notebooks in order with papermill. The executed copies (with papermill's provenance)
    go to data/notebooks/<profile>/ (or <results>/notebooks/ for a single study's directory).

    Unless `log` is ``quiet``, what the cells print goes to this terminal as it comes (stdout to stdout,
    stderr to stderr: papermill's ``stdout_file``/``stderr_file``; its ``log_output`` would also log every
    displayed table), and the kernel logs as this command does (:func:`kernel_logging_arguments`), so the
    run notebook prints a line per run."""
    import papermill as pm

    injected = notebook_parameters(profile, results, spec, inventory, data, campaign)
    out_dir = Path(results) / "notebooks" if results else paths.notebooks_dir(profile)
    out_dir.mkdir(parents=True, exist_ok=True)
    nb_dir = paths.repo_root() / "notebooks"
    done = []
    for name in names:
        src = nb_dir / f"{name}.ipynb"
        dst = out_dir / f"{name}.ipynb"
        print(f"papermill {src.relative_to(paths.repo_root())} -> {dst}", flush=True)
        params = {k: v for k, v in injected.items() if k != "campaign" or name.startswith("10-")}
        params.update(ACTS.get(name, {}))
        streams = {} if log == "quiet" else {"stdout_file": sys.stdout, "stderr_file": sys.stderr,
                                             "extra_arguments": kernel_logging_arguments(log)}
        pm.execute_notebook(str(src), str(dst), parameters=params, cwd=str(nb_dir), kernel_name="python3",
                            progress_bar=False, log_output=False, **streams)
        done.append(dst)
    return done


def cmd_notebooks(args: argparse.Namespace) -> int:
    names = NOTEBOOKS if not args.only else tuple(n for n in NOTEBOOKS if n.split("-")[0] in args.only.split(","))
    run_notebooks(args.profile, names, args.results, args.spec, args.inventory, args.data,
                  None if args.campaign is None else str(args.campaign), log=log_mode(args))
    return 0


def cmd_paper(args: argparse.Namespace) -> int:
    from dbmatrix.publish.paper import build_paper

    print(build_paper(paths.paper_dir(args.out) if args.out else None))
    return 0


def cmd_readme(args: argparse.Namespace) -> int:
    """The README's generated blocks (claims, counts, times, requirements) from the committed data."""
    from dbmatrix.readme import update_files

    changed = update_files(paths.repo_root(), paths.reference_root(), check=args.check)
    verb = "differ from the committed data" if args.check else "rewritten"
    print(f"generated blocks {verb}: {', '.join(changed)}" if changed else "generated blocks up to date")
    return 1 if changed and args.check else 0


def cmd_media(args: argparse.Namespace) -> int:
    """Show the plan, verify, apply or tear down the inventory's media (all, or those named)."""
    from dbmatrix.hosts import media
    from dbmatrix.hosts.inventory import load_inventory

    inv = load_inventory(args.inventory)
    if args.action != "plan":
        check_hosts(inv)
    failed = 0
    for hs in inv.hosts:
        names = args.names or sorted(hs.media)
        unknown = sorted(set(names) - set(hs.media))
        if unknown:
            raise SpecError(f"media: {', '.join(unknown)} not defined on host {hs.name!r}; its media are: "
                            f"{', '.join(sorted(hs.media))}")
        if args.action == "plan":
            for n in names:
                print(f"# {hs.name} {n} ({hs.media[n].kind})")
                print("\n".join(media.plan(hs.media[n])))
            continue
        with hs.connect() as host:
            for n in names:
                m = hs.media[n]
                try:
                    if args.action == "teardown":
                        media.teardown(host, m)
                        print(f"{hs.name} {n}: torn down")
                        continue
                    st = media.ensure(host, m) if args.action == "ensure" else media.verify(host, m)
                    print(f"{hs.name} {n}: ok {json.dumps(st.to_dict(), sort_keys=True)}")
                except media.MediaError as exc:
                    failed += 1
                    print(f"{hs.name} {n}: {exc}")
    return 1 if failed else 0


CAMPAIGN_HELP = ("which campaign (one run of the whole matrix on one boot) to run: auto = continue the latest "
                 "if incomplete, else start a new one; new = start a new one; last = continue the latest "
                 "(nothing to run if complete); K = continue campaign K.")


def _campaign_arg(value: str) -> str | int:
    from dbmatrix.run.campaigns import parse_option

    try:
        return parse_option(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="dbmatrix", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)

    def study_args(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--profile", default="quick", help="smoke, quick or full (notebooks/params/*.yaml)")
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
    sp.add_argument("--budget", metavar="DURATION", help="with --until-decided: no block "
                    "that would end after this long (7200s, 90m, 2h, 1h30m)")
    sp.set_defaults(func=cmd_run)
    sp = sub.add_parser("status", help="done, failed and pending runs")
    study_args(sp)
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
    sp = sub.add_parser("verdicts", help="per claim: each campaign's verdict and the pooled one; flips")
    study_args(sp)
    sp.add_argument("--csv", help="also write the claims table to this CSV file (and each campaign's "
                    "estimates and verdicts beside it, <name>-campaigns.csv)")
    sp.set_defaults(func=cmd_verdicts)
    sp = sub.add_parser("compare", help="B against A: per cell the ratio B/A with its 95 %% CI, per claim "
                                        "both verdicts; --fail-above for CI")
    sp.add_argument("a", nargs="?", help="result set A: a study's results directory (with processed/), a "
                                         "data root holding several, or the words reference / runs "
                                         "(default: reference)")
    sp.add_argument("b", nargs="?", help="result set B (default: runs, i.e. data/runs)")
    sp.add_argument("--study", help="compare this experiment only (needed with --campaigns)")
    sp.add_argument("--campaigns", nargs=2, type=int, metavar=("KA", "KB"),
                    help="two campaigns of --study, in the result set A names (default: the study's data)")
    sp.add_argument("--profile", default="quick", help="where to look for the experiments' specs first (claims)")
    sp.add_argument("--format", choices=("markdown", "csv", "json"), default="markdown")
    sp.add_argument("--out", help="write to this file (csv: the claims beside it, <name>-claims.csv)")
    sp.add_argument("--fail-above", type=float, metavar="PCT",
                    help="exit 1 when a decided regression (throughput down, p95 latency up: the interval "
                         "excludes 1) is worse than PCT %% by its point estimate")
    sp.add_argument("--no-claims", action="store_true", help="cells only (the claims take a few seconds)")
    sp.set_defaults(func=cmd_compare)
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
