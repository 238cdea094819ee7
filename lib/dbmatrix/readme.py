"""The README's generated blocks (a top-level module: it reads the raw reference, which publish/ never does):
the answer, the claims with their verdicts, the commands with measured
times, and the requirements and side effects, every number from a committed source.

Sources: the judgement the paper prints (``paper/generated/claims.csv`` and beside it, shown through the one
claims formatter, :mod:`dbmatrix.analyse.claims_view`), the committed reference data
(runs, campaigns and their records, datasets, through :class:`dbmatrix.store.ResultStore`), the measured
times and sizes of ``docs/measured.json`` (each with where it was measured), the package roles of
:mod:`dbmatrix.hosts.setup` and the media of this machine's default inventory. Each block sits between
``<!-- dbmatrix:NAME begin -->`` and ``<!-- dbmatrix:NAME end -->`` in README.md; ``dbmatrix readme``
(``make readme``) rewrites them, and ``tests/unit/test_readme.py`` fails when the committed README differs
from what :func:`blocks` makes of the committed data.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pandas as pd

from dbmatrix.analyse import claims_view
from dbmatrix.analyse.campaign_records import independence, run_platforms, summaries
from dbmatrix.analyse.claims.registry_doc import render_registry
from dbmatrix.analyse.judgement import ClaimVerdicts, read_verdicts
from dbmatrix.analyse.verdict_text import counts_text, is_decided
from dbmatrix.hosts.inventory import localhost_inventory
from dbmatrix.hosts.media.nbd import nbd_names
from dbmatrix.hosts.setup import PACKAGES
from dbmatrix.publish.claims_tex import DECIDING, opposed_claims, profile_of, standing
from dbmatrix.run.ports import BASE_PORT
from dbmatrix.store import ResultStore

BLOCK = re.compile(r"(<!-- dbmatrix:(?P<name>[a-z-]+) begin -->\n)(?P<body>.*?)(<!-- dbmatrix:(?P=name) end -->)",
                   re.DOTALL)
FIGURES = ("factor-effects", "medium-cache", "compression")  # the README's pictures: what matters, PMEM x cache, lz4


# ------------------------------------------------------------------------------------------ the facts

# Campaign records further apart than this (or on another boot) belong to different sittings: within one
# `dbmatrix run --campaign auto` the studies' campaigns follow one another within seconds.
SITTING_GAP_S = 30 * 60


@dataclass(frozen=True)
class Sitting:
    """One invocation's worth of campaigns: the studies' next campaigns run one after another on one boot."""

    started_utc: str
    seconds: float  # the first campaign's start to the last one's finish
    runs: int  # ok runs
    boots: tuple[str, ...]
    campaigns: tuple[tuple[str, int], ...]  # (experiment, campaign number)


@dataclass(frozen=True)
class ReferenceFacts:
    """What the committed reference holds: studies, campaigns per study, ok runs, distinct datasets, and the
    sittings that measured them (from the campaign records). A campaign number is per study: a study
    registered later runs its campaign 1 beside the older studies' campaign 3, so the sittings, not the
    numbers, say how long one took."""

    studies: int
    cpus: int  # the reference host's online CPUs
    campaigns: tuple[int, int]  # the fewest and most campaigns of a study
    runs: int
    sittings: tuple[Sitting, ...]
    campaign_seconds: dict[int, float]  # per campaign number: its studies' own spans added
    datasets: int
    snapshot_bytes: int
    campaign_level: str = ""  # what the campaigns shared (dbmatrix.analyse.campaign_records), one label per study

    @property
    def boots(self) -> int:
        return len({b for s in self.sittings for b in s.boots})


def _utc(text: str) -> datetime:
    return datetime.fromisoformat(text)


def built_experiments(root: Path) -> list[str] | None:
    """The experiments the committed paper was built from (``paper/generated/provenance.json``), None
    without it: the README's facts describe those studies, not every profile's reference beside them."""
    prov = root / "paper" / "generated" / "provenance.json"
    if not prov.is_file():
        return None
    return sorted(str(s["experiment"]) for s in json.loads(prov.read_text()).get("studies", []))


def profile_experiments(reference: Path, profile: str) -> list[str]:
    """The experiments of one profile in the reference, by their names' suffix (``tpcc-quick``: quick)."""
    return sorted(d.name for d in reference.iterdir() if (d / "raw").is_dir() and profile_of(d.name) == profile)


def sittings(spans: Sequence[tuple[str, int, datetime, datetime, tuple[str, ...]]],
             runs: Mapping[tuple[str, int], int], alone: frozenset[str] = frozenset()) -> tuple[Sitting, ...]:
    """Campaign records (experiment, campaign, start, finish, boots) grouped into sittings: in order of start,
    a record opens a new sitting when it starts more than SITTING_GAP_S after the sitting's last finish, on
    other boots, or for a study the sitting already measured (one invocation runs one campaign per study); the
    studies in `alone` (a soak: StudyKind.own_sitting) run in sittings of their own, never grouped."""
    groups: list[list[tuple[str, int, datetime, datetime, tuple[str, ...]]]] = []
    for span in sorted(spans, key=lambda s: (s[2], s[0])):
        last = groups[-1] if groups else None
        if (last is None or (span[2] - max(s[3] for s in last)).total_seconds() > SITTING_GAP_S
                or set(span[4]) != set(last[0][4]) or span[0] in {s[0] for s in last}
                or span[0] in alone or last[0][0] in alone):
            groups.append([span])
        else:
            last.append(span)
    return tuple(Sitting(min(s[2] for s in g).isoformat(),
                         (max(s[3] for s in g) - min(s[2] for s in g)).total_seconds(),
                         sum(runs.get((s[0], s[1]), 0) for s in g), tuple(sorted({b for s in g for b in s[4]})),
                         tuple((s[0], s[1]) for s in g)) for g in groups)


def reference_facts(reference: Path, experiments: Sequence[str] | None = None) -> ReferenceFacts:
    """What the README says of the reference: of the studies named (default: every one under `reference`)."""
    studies = sorted(d for d in reference.iterdir() if (d / "raw").is_dir()
                     and (experiments is None or d.name in experiments))
    runs: dict[tuple[str, int], int] = {}
    spans: list[tuple[str, int, datetime, datetime, tuple[str, ...]]] = []
    per_study: list[int] = []
    seconds: dict[int, float] = {}  # per campaign number: its studies' own spans added (they run one after
    # another; a study measured again on another day must not stretch the campaign over the days between)
    datasets: dict[str, int] = {}
    cpus: set[int] = set()
    levels: set[str] = set()
    alone = frozenset(d.name for d in studies if _own_sitting(d))
    for d in studies:
        store = ResultStore(d)
        levels.add(independence(summaries(store.campaigns(), run_platforms(store))).label)
        ks = set()
        for m in store.records():
            if m.ok:
                runs[(d.name, m.campaign)] = runs.get((d.name, m.campaign), 0) + 1
                ks.add(m.campaign)
        per_study.append(len(ks))
        for rec in store.campaigns():
            if rec.get("started_utc") and rec.get("finished_utc"):
                k, start, end = int(rec["campaign"]), _utc(rec["started_utc"]), _utc(rec["finished_utc"])
                spans.append((d.name, k, start, end, tuple(sorted(str(b) for b in rec.get("boot_ids") or ()))))
                seconds[k] = seconds.get(k, 0.0) + (end - start).total_seconds()
        for f in sorted((d / "hosts").glob("*.json")):
            if not f.name.endswith(".media.json"):
                cpus.add(int(json.loads(f.read_text()).get("online_cpus") or 0))
        for f in sorted((d / "datasets").glob("*/*.json")):
            info = json.loads(f.read_text())
            datasets[str(info["key"])] = int(info.get("datadir_physical_bytes") or 0)
    if len(cpus) != 1:
        raise ValueError(f"{reference}: the reference's hosts have {sorted(cpus)} CPUs; the README names one")
    return ReferenceFacts(len(studies), cpus.pop(), (min(per_study, default=0), max(per_study, default=0)),
                          sum(runs.values()), sittings(spans, runs, alone), dict(sorted(seconds.items())),
                          len(datasets), sum(datasets.values()), "; ".join(sorted(levels)))


def sittings_table(facts: ReferenceFacts | None, where: str = "data/reference/*-paper") -> str:
    """docs/usage.md's account of how the committed paper reference was measured: the sittings (from the
    campaign records, :func:`sittings`), each with its window, boot, the campaigns by number and its ok runs."""
    if facts is None or not facts.sittings:
        return f"No paper reference is committed (`{where}`): no sitting to list.\n"
    first, last = facts.sittings[0], facts.sittings[-1]
    days = sorted({_utc(first.started_utc).date().isoformat(), _utc(last.started_utc).date().isoformat()})
    head = (f"The committed reference (`{where}`) was measured in {_count(len(facts.sittings), 'sitting')} on "
            f"{_count(facts.boots, 'boot')}, {' to '.join(days)}, {facts.runs} runs in all (from the campaign "
            "records: a sitting is one invocation's campaigns, one study after another on one boot; a study "
            "registered later numbers its campaigns from 1 in the older studies' later sittings):\n\n"
            "| sitting (UTC) | boot | campaigns | runs |\n|---|---|---|---|\n")
    return head + "".join(sitting_row(s) + "\n" for s in facts.sittings)


def sitting_row(s: Sitting) -> str:
    """``| 2026-11-29 09:41-10:57 | 2d9bd31a | 1 of groupcommit; 3 of tpcc, galera | 80 |``: the studies by
    their names without the profile, grouped by campaign number."""
    start = _utc(s.started_utc)
    end = start + timedelta(seconds=s.seconds)
    when = f"{start:%Y-%m-%d %H:%M}-{end:%H:%M}" + ("" if end.date() == start.date() else f" (to {end:%m-%d})")
    by_number: dict[int, list[str]] = {}
    for experiment, k in s.campaigns:
        profile = profile_of(experiment)
        name = experiment.removesuffix(f"-{profile}") if profile else experiment
        by_number.setdefault(k, []).append(name)
    campaigns = "; ".join(f"{k} of {', '.join(names)}" for k, names in sorted(by_number.items()))
    return f"| {when} | {', '.join(b[:8] for b in s.boots)} | {campaigns} | {s.runs} |"


def _own_sitting(study_dir: Path) -> bool:
    """Whether a results directory's study runs in sittings of its own (its kind, from the spec in plan.json,
    which names the experiment ``name``); a plan written by an older spec schema is an ordinary study."""
    from dbmatrix.analyse.kinds import kind_of
    from dbmatrix.spec.experiment import SpecError, parse_experiment

    plan = study_dir / "plan.json"
    if not plan.is_file():
        return False
    raw = dict(json.loads(plan.read_text())["spec"])
    raw["experiment"] = raw.pop("name", study_dir.name)
    try:
        return kind_of(parse_experiment(raw)).own_sitting
    except SpecError:
        return False


def claims_rows(claims_csv: Path) -> list[dict[str, str]]:
    with claims_csv.open(newline="") as f:
        return list(csv.DictReader(f))


def load_measured(path: Path) -> dict[str, dict[str, dict[str, Any]]]:
    """``docs/measured.json``: ``times`` (per command its measured seconds) and ``sizes`` (bytes), each with
    its ``source``: where, when and how it was measured."""
    data = json.loads(path.read_text())
    for section, key in (("times", "seconds"), ("sizes", "bytes")):
        for name, t in data[section].items():
            if not isinstance(t.get(key), (int, float)) or t[key] <= 0 or not t.get("source"):
                raise ValueError(f"{path}: {section}.{name}: needs {key} (a positive number) and source (where "
                                 "and how it was measured)")
    return data


# ------------------------------------------------------------------------------------------ formatting

def plain(text: str) -> str:
    """The claims' LaTeX wording as markdown text."""
    return claims_view.markdown(claims_view.plain(text))


def duration(seconds: float) -> str:
    m, s = divmod(round(seconds), 60)
    h, m = divmod(m, 60)
    if h:
        return f"{h} h {m:02d} min {s:02d} s"
    return f"{m} min {s:02d} s" if m else f"{s} s"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def opposing_campaigns(verdicts: ClaimVerdicts) -> dict[str, str]:
    """Per decided claim among the paper's opposed ones (``claims_tex.opposed_claims``: agree in one campaign,
    disagree in another), the campaigns that judged it against the pooled verdict (``campaign 1: disagree``):
    the README names them where the paper says why the pooled verdict stands (``claims_tex.opposed_text``)."""
    if verdicts.campaigns.empty:
        return {}
    pooled = dict(zip(verdicts.claims["id"], verdicts.claims["verdict"]))
    other = {"agree": "disagree", "disagree": "agree"}
    return {i: ", ".join(f"campaign {k}: {other[pooled[i]]}" for k in verdicts.campaign_numbers()
                         if verdicts.campaign_verdict(i, k) == other[pooled[i]])
            for i in opposed_claims(verdicts) if pooled[i] in other}


def _why(r: claims_view.ClaimRow) -> str:
    premise = f"premise: {r.premise_value}" if r.premise_value else ""
    return "; ".join(x for x in (r.reason or premise, r.heterogeneity) if x)


def claims_table(verdicts: ClaimVerdicts, rows: pd.DataFrame | None = None, details: bool = False,
                 opposing: Mapping[str, str] | None = None) -> str:
    """One row per claim (`rows`: those of the claims table; all by default) through the claims formatter's
    markdown view; `details` adds what is compared and the reason (or the premise as measured, and the
    campaigns' consistency test); `opposing` (claim id: text) notes beside a pooled verdict the campaigns that
    judged the other way. The estimate column names the intervals' level (each row its own when they
    differ); a claim judged at several conditions shows each condition's verdict and how they combine."""
    return claims_view.render("md", claims_view.claim_rows(verdicts, rows), heading=claims_view.heading(verdicts, rows),
                              details=details, opposing=dict(opposing or {}), why=_why)


def verdict_summary(rows: list[dict[str, Any]]) -> str:
    """"5 agree, 8 disagree, 2 depend on a condition, ..." (classes: "depends on <factor>" counts once)."""
    return counts_text(str(r.get("verdict", "")) for r in rows)


def _gib(n: float) -> str:
    return f"{n / 2**30:.1f} GiB"


# ------------------------------------------------------------------------------------------ the blocks

def blocks(root: Path, reference: Path) -> dict[str, str]:
    """Every generated block of the README, by name, from the committed sources under `root` (the
    repository) and the reference data in `reference`."""
    verdicts = read_verdicts(root / "paper" / "generated")  # the judgement the paper prints
    rows = verdicts.claims.to_dict("records")
    opposing = opposing_campaigns(verdicts)
    built = built_experiments(root)
    facts = reference_facts(reference, built)  # the studies the committed paper was built from
    quick = reference_facts(reference, profile_experiments(reference, "quick"))  # what `make reproduce` runs
    paper_studies = profile_experiments(reference, "paper")
    paper = reference_facts(reference, paper_studies) if paper_studies else None
    measured = load_measured(root / "docs" / "measured.json")
    timings, sizes = measured["times"], measured["sizes"]
    decided = [r for r in rows if is_decided(r["verdict"])]
    lo, hi = facts.campaigns
    camps = f"{lo} campaigns per study" if lo == hi else f"{lo}-{hi} campaigns per study"
    listed = " ([listed](docs/usage.md#the-paper-profile))" if built and set(built) <= set(paper_studies) else ""
    held = (f"{facts.runs} runs measured in {_count(len(facts.sittings), 'sitting')}{listed} on "
            f"{_count(facts.boots, 'boot')}")
    profiles = sorted({p for r in rows for s in (r.get("study") or "").split("+") if (p := profile_of(s))})
    indicative = any(p not in DECIDING for p in profiles) or not profiles
    provisional = not indicative and standing(pd.DataFrame(rows))[0]  # the paper's rule: one campaign only
    built_profiles = sorted({profile_of(e) or "unknown" for e in built or []})
    of_profile = f" of the {' and '.join(built_profiles)} profile" if built_profiles else ""
    answer = (
        "dbmatrix re-measures the published claims about MySQL-family storage (block size, lz4, PMEM vs NVMe, "
        "Galera appliers, scale-out; the seeds' own words and conditions: [docs/registry.md](docs/registry.md)) "
        "with real `mariadbd` and sysbench, and judges each by one "
        f"rule. **On the committed reference{of_profile} ({facts.studies} studies, {camps}, {held} of a "
        f"{facts.cpus}-vCPU VM, {facts.datasets} datasets; campaigns: {facts.campaign_level}) "
        f"the {len(rows)} claims come out: {verdict_summary(rows)}.** "
        + (f"These verdicts are indicative: the {' and '.join(profiles) or 'unknown'} profile demonstrates, the "
           "paper profile decides. " if indicative else
           "These verdicts are provisional: one campaign, no second one to show they replicate. "
           if provisional else "")
        + "The media are stand-ins, labelled so everywhere: PMEM is emulated in RAM (tmpfs for fsdax mode, XFS "
        "on a RAM-backed loop device for sector mode; judged as upper bounds) and \"NVMe\" is this VM's virtio "
        "root disk. The decided ones:\n")
    others = len(rows) - len(decided)
    decided_rows = verdicts.claims[[is_decided(str(v)) for v in verdicts.claims["verdict"]]]
    claims = claims_table(verdicts, decided_rows, opposing=opposing) + (
        ("\nA campaign named beside a verdict judged that claim the other way on its own data: a consistency check, "
         "not a decision; the pooled interval, which includes the variation between campaigns, decides (the "
         "paper's comparison with the seeds says why). " if opposing else "\n")
        + f"The other {others} claims, with estimates and reasons: [every claim](#every-claim); the method and the "
        "verdict rule: [docs/method.md](docs/method.md) and the paper (`make paper`).\n")
    figures = " ".join(f'<img src="figures/{f}.png" alt="{f}" height="260">' for f in FIGURES) + "\n"

    smoke, test = timings["make smoke"], timings["make test"]
    sm = smoke_plan()
    after = timings["make reproduce, after the runs"]
    measuring = " and ".join(duration(s) for s in quick.campaign_seconds.values())
    paper_row = []
    if paper is not None:
        spent = ", ".join(duration(s.seconds) for s in paper.sittings)
        paper_after = timings.get("make reproduce PROFILE=paper, after the runs")
        paper_row = [
            "| `make reproduce PROFILE=paper` | the paper profile (the committed paper's data): its next campaign "
            "(the pilot's repetitions first, then the Kalibera-Jones allocation; the claims are judged after "
            "every campaign) | "
            f"{spent} of measuring (the reference's {_count(len(paper.sittings), 'sitting')}, from their campaign "
            "records: a sitting runs each study's next campaign)"
            + (f" + {duration(paper_after['seconds'])} ({paper_after['source']})" if paper_after else "") + " |"]
    commands = "\n".join([
        "| command | what it does | measured time |",
        "|---|---|---|",
        f"| `make smoke` | the smallest real run ({sm}): setup, runs, analysis, figures into `data/smoke/` | "
        f"{duration(smoke['seconds'])} ({smoke['source']}) |",
        "| `make reproduce` | every study of the `quick` profile, new runs in `data/runs/`, figures and the paper in "
        "`build/quick/` | "
        f"{measuring} of measuring (the reference's {_count(len(quick.campaign_seconds), 'campaign')} of every "
        "study, their records) "
        f"+ {duration(after['seconds'])} ({after['source']}) |",
        *paper_row,
        f"| `make test` | lint, unit, integration (real servers), browser and notebook tests | "
        f"{duration(test['seconds'])} ({test['source']}) |",
    ]) + "\n"

    pk = PACKAGES["debian"]
    media = {m.name: m for m in localhost_inventory("/var/tmp/dbmatrix").hosts[0].media.values()}
    ram = sum(_size(m) for m in media.values() if m.kind not in ("dir", "nbd"))
    nbd = [m for m in media.values() if m.kind == "nbd"]
    builds = [b for b in localhost_inventory("/var/tmp/dbmatrix").hosts[0].builds.values() if b.packages]
    box = "\n".join([
        "> **Requirements and side effects.** `make figures`, `make paper` and `make lab` need only `.venv` "
        "(and LaTeX for the paper): no root, no MariaDB. `make smoke`, `make reproduce` and `make test` "
        f"need Debian/Ubuntu (apt) or a RHEL-like (dnf), Python {python_version(root)} and root (or `sudo -n`), "
        "and they:",
        f"> - install OS packages by role: *server* ({len(pk['server'])}: {', '.join(pk['server'][:4])}, …) for "
        f"smoke, run, reproduce and test; *paper* ({len(pk['paper'])}: LaTeX) for reproduce and test; *test* "
        f"({', '.join(pk['test'])}) for test only;",
        "> - start `mariadbd` as root (never the system service; own datadirs, sockets, no TCP) and, for "
        f"Galera, as `mysql` on 127.0.0.1 ports from {BASE_PORT} (leases in `/tmp/dbmatrix-ports`)"
        + "".join(f"; for the server-build study also {b.name}'s own, its packages ({', '.join(b.packages)}) "
                  f"downloaded (`apt-get download`) and unpacked under `{b.root}`" for b in builds) + ";",
        f"> - mount under `/var/tmp/dbmatrix/media`: tmpfs ({_gib(_size(media['tmpfs']))}) and XFS on loop "
        f"devices over tmpfs files ({_gib(_size(media['ramblock']))} + {_gib(_size(media['slow']))}): up to "
        f"{_gib(ram)} of RAM while mounted; a cgroup `/sys/fs/cgroup/dbmatrix` (write-IOPS limit); for the "
        f"network block devices ({', '.join(m.name for m in nbd)}): {' + '.join(_gib(_size(m)) for m in nbd)} of "
        f"files in `/var/tmp/dbmatrix/media-backing`, `nbdkit` ({_nbd_links(nbd)}) and `nbdfuse`, stopped when "
        "their study ends;",
        "> - drop the page cache before every run (`echo 3 > /proc/sys/vm/drop_caches`: every process on the "
        "machine feels it; `DBMATRIX_OS_CACHE=keep` keeps it, and every record says so);",
        f"> - keep dataset snapshots in `/var/tmp/dbmatrix/snapshots` ({_gib(quick.snapshot_bytes)} for the "
        f"quick profile's {quick.datasets} datasets) and the `.venv` ({_gib(sizes['.venv']['bytes'])}, "
        f"{sizes['.venv']['source']}).",
        "> **Undo:** `make clean-host` (unmount, detach loop devices, remove the cgroup, "
        "`rm -rf /var/tmp/dbmatrix /tmp/dbmatrix-ports`); `make distclean` (`.venv`); packages stay: "
        "[docs/usage.md](docs/usage.md#the-commands) lists them by role.",
    ]) + "\n"
    every = claims_table(verdicts, details=True, opposing=opposing)
    packages = "\n".join(f"- `{role}`: {' '.join(pk[role])}" for role in pk) + "\n"
    return {"answer": answer, "claims": claims, "figures": figures, "commands": commands, "box": box,
            "every-claim": every, "packages": packages, "registry": render_registry(),
            "sittings": sittings_table(paper)}


def smoke_plan() -> str:
    """The smoke profile in words: runs, engine(s), the varied factor's levels, seconds per run."""
    from dbmatrix.study import load_study  # the profile's spec, as make smoke runs it

    exp = load_study("smoke", for_run=False).experiment
    varied = ", ".join(f"{f} {'/'.join(map(str, exp.factors[f]))}" for f in exp.varied_factors())
    return (f"{len(exp.plan(1))} runs of {'/'.join(exp.factors['engine'])}, {varied}, "
            f"{exp.warmup_s} s warm-up + {exp.measure_s} s each")


def python_version(root: Path) -> str:
    """The Python the project requires (pyproject.toml's requires-python, e.g. ``>=3.11`` -> ``3.11+``)."""
    import tomllib

    req = tomllib.loads((root / "pyproject.toml").read_text())["project"]["requires-python"]
    return req.replace(">=", "").strip() + "+"


def _nbd_links(nbd: list[Any]) -> str:
    """Where the nbd media's servers listen: a network namespace and veth pair per tcp medium, a socket otherwise."""
    tcp = [nbd_names(m) for m in nbd if m.options["transport"] == "tcp"]
    words = [f"network namespace `{n.netns}` behind a veth pair {n.host_addr}-{n.server_addr}" for n in tcp]
    return "; ".join(words + ["a unix socket"] * (len(nbd) > len(tcp)))


def _size(m: Any) -> int:
    """The RAM a medium takes (its size, or its base's for a throttled one), 0 for a directory."""
    opts = m.options
    if m.kind == "throttled":
        opts = opts["base"]
    return int(opts.get("size") or 0)


FILES = {"README.md": ("answer", "claims", "figures", "commands", "box", "every-claim"),
         "docs/usage.md": ("packages", "sittings"), "docs/registry.md": ("registry",)}  # which file holds which blocks


def render(text: str, generated: Mapping[str, str]) -> str:
    """`text` with every generated block it holds replaced; a block without a generator is an error
    naming it."""
    names = [m.group("name") for m in BLOCK.finditer(text)]
    missing = sorted(set(names) - set(generated))
    if missing:
        raise ValueError(f"README blocks without a generator: {', '.join(missing)}; known: {', '.join(generated)}")
    return BLOCK.sub(lambda m: m.group(1) + generated[m.group("name")] + m.group(4), text)


def block_names(text: str) -> list[str]:
    return [m.group("name") for m in BLOCK.finditer(text)]


def update_files(root: Path, reference: Path, check: bool = False) -> list[str]:
    """Rewrite the generated blocks of README.md and docs/usage.md (with `check`, only compare); the files
    whose blocks were (or would be) changed. Every block of :data:`FILES` must be in its file."""
    generated = blocks(root, reference)
    changed = []
    for name, wanted in FILES.items():
        path = root / name
        text = path.read_text()
        absent = sorted(set(wanted) - set(block_names(text)))
        if absent:
            raise ValueError(f"{name}: generated block(s) {', '.join(absent)} missing (markers "
                             f"<!-- dbmatrix:NAME begin --> ... <!-- dbmatrix:NAME end -->)")
        new = render(text, generated)
        if new != text:
            changed.append(name)
            if not check:
                path.write_text(new)
    return changed
