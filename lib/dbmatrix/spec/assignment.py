"""Which host measures which run: hosts as blocks of the design.

**Whole replicate blocks per host.** A replicate block (``PlannedRun.block``) holds every cell once in a
seeded random order; each block goes to one host, so every host measures complete sets of cells. Why
blocks rather than balancing each cell's repetitions over the hosts:

- every host measures every cell equally often (k_h times each), so the host is orthogonal to every
  factor: a host main effect in the model (:func:`dbmatrix.analyse.effects.factorial_model` with
  ``blocks=("host",)``) removes a host difference without touching the factor effects, and the same cells
  can be compared across hosts (the host check, :mod:`dbmatrix.analyse.hosts`);
- the order within a host stays the plan's seeded shuffle, block after block, as on one host;
- a host that is lost before starting a block hands over the whole block, and the balance survives
  (a half-done block cannot move without breaking it: its remaining runs are reported as not run).

Balancing each cell's repetitions over the hosts gives the same balance only when the repetitions are a
multiple of the hosts, and a lost host would leave cells with unequal host mixes. The price of blocks:
with fewer repetitions than hosts some hosts take no run (said by :func:`assignment_notes`).

The blocks are dealt to the hosts in a seeded random order, round robin, so each host gets
floor(R/H) or ceil(R/H) blocks and the one-block surplus falls on seeded hosts. With one host every run
goes to it (the plan is as without hosts). Pure functions: no I/O.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence

from dbmatrix.spec.experiment import PlannedRun


def assign_blocks(blocks: Iterable[int], hosts: Sequence[str], seed: int) -> dict[int, str]:
    """Block number -> host: the blocks in a seeded random order dealt round robin over `hosts`."""
    if not hosts:
        raise ValueError("assign_blocks: no hosts")
    order = sorted(set(blocks))
    if len(hosts) == 1:
        return {b: hosts[0] for b in order}
    random.Random(f"{seed}:hosts:{','.join(hosts)}").shuffle(order)
    return {b: hosts[i % len(hosts)] for i, b in enumerate(order)}


def host_of(run: PlannedRun, block_hosts: Mapping[int, str], hosts: Sequence[str]) -> str:
    """The host of a run: its block's; a block beyond the plan (an adaptive repetition) round robin."""
    if run.block in block_hosts:
        return block_hosts[run.block]
    return hosts[(run.block - 1) % len(hosts)]


def assign_runs(runs: Sequence[PlannedRun], block_hosts: Mapping[int, str],
                hosts: Sequence[str]) -> dict[str, str]:
    """run_id -> host."""
    return {r.run_id: host_of(r, block_hosts, hosts) for r in runs}


def per_host_counts(block_hosts: Mapping[int, str], hosts: Sequence[str]) -> dict[str, int]:
    """Blocks per host, every host named (0 for an idle one)."""
    return {h: sum(1 for v in block_hosts.values() if v == h) for h in hosts}


def assignment_notes(block_hosts: Mapping[int, str], hosts: Sequence[str]) -> list[str]:
    """What a reader of the plan should know: idle hosts, unequal numbers of blocks."""
    counts = per_host_counts(block_hosts, hosts)
    notes = []
    idle = [h for h, n in counts.items() if n == 0]
    if idle:
        notes.append(f"{len(block_hosts)} replicate block(s) for {len(hosts)} hosts: "
                     f"{', '.join(idle)} take(s) no run (each host measures whole blocks; "
                     "raise repetitions to a multiple of the hosts to use them all)")
    elif len(set(counts.values())) > 1:
        notes.append("hosts measure " + ", ".join(f"{h} {n}" for h, n in counts.items())
                     + " block(s): the host effect is still estimable (every block holds every cell)")
    return notes


def reassign_blocks(block_hosts: Mapping[int, str], lost: Iterable[str], started: Iterable[int],
                    live: Sequence[str], pending_blocks: Iterable[int] | None = None
                    ) -> tuple[dict[int, str], dict[int, str], list[int]]:
    """After hosts are lost: the new block -> host map, the moves {block: new host}, and the lost hosts'
    blocks that cannot move (started: some of their runs exist, so moving the rest would split a block
    over hosts). Whole blocks not started move to the live host with the fewest blocks (ties: the order
    of `live`), one at a time in block order; with no live host nothing moves. `pending_blocks` limits
    the moves to blocks that still have runs to do (default: all)."""
    lost, started = set(lost), set(started)
    pending = set(block_hosts) if pending_blocks is None else set(pending_blocks)
    new = dict(block_hosts)
    moves: dict[int, str] = {}
    stuck: list[int] = []
    for b in sorted(block_hosts):
        if block_hosts[b] not in lost or b not in pending:
            continue
        if b in started or not live:
            stuck.append(b)
            continue
        load = {h: sum(1 for v in new.values() if v == h) for h in live}
        to = min(live, key=lambda h: (load[h], list(live).index(h)))
        new[b] = to
        moves[b] = to
    return new, moves, stuck
