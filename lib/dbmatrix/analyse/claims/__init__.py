"""The seeds' claims beside what our runs measured: one registry, one verdict rule for the whole paper.

Each :class:`Claim` names a seed, a short paraphrase of what it says, and what to compare: a metric, a
factor's two levels (``a`` against ``b``, in the direction the seed states its result), the levels of other
factors the seed held (``at``), the band of values the claim asserts for the estimate (a ratio a/b, a
difference a - b in points, or a share), and its **premises**: the conditions the seed's result depended on,
checked from our data (:class:`Premise`). The estimate and its interval come from the data (:func:`estimate`;
the estimators' own modules say how):

1. every estimate follows the design (:func:`dbmatrix.analyse.contrasts.ratio_estimate`,
   :mod:`dbmatrix.analyse.campaign_model`): a contrast of the cell means of the claim's cells, with variance
   components at every level that varies (dataset load x campaign, campaign x cell, runs) and Satterthwaite
   df; a reduced model only after a lack-of-fit test. Galera and scale-out claims use the same model on
   their runs. With one campaign the basis says "within one campaign": such an interval leaves out the
   variation between campaigns;
2. a claim is judged at the levels it names (``at``) and, where the seed says so, at every level of the
   factors in ``per`` (fixed in the registry, never split by a p-value); other free factors are averaged
   over only when the design identifies that: a condition or an averaged interaction that is aliased gives
   **not identified** and names the alias (:class:`dbmatrix.analyse.contrasts.NotIdentified`);
3. intervals respect their metric: ratios on the log scale; shares on the logit scale, a difference of
   shares by MOVER (:mod:`dbmatrix.analyse.shares`); dataset sizes (measured once per dataset) are judged per
   pair, combined by the claim's rule, and never given a CI (``Estimate.values``); an infinite interval is
   "unbounded".

**Verdict rule** (:func:`verdict`, :func:`judge`; registered as :data:`~.verdicts.RULE`, "three-way regions"),
with [L, U] the interval at its level (95 %, or a sequential look's; ``confidence`` in the table), [lo, hi]
the claimed band, the null value 1 for ratios, 0 for differences, m the equivalence margin of no effect
(declared per metric, :data:`dbmatrix.analyse.claims.model.MARGINS`, or per claim), Z the closed no-effect
zone (1/(1+m) .. 1+m, or -m .. m) and A the **claimed region**:

- ``direction`` ("up to X", "grows") and ``about`` (X plus or minus a declared tolerance): A is the band
  beyond Z on the claimed side, (z_hi, hi] within [lo, hi] for an increase, [lo, z_lo) for a decrease;
  ``within`` (no or a bounded effect; "no effect" is the zone of the metric's margin): A is the band, closed.
- **agree** iff [L, U] lies inside A; **disagree** iff [L, U] does not meet A; **inconclusive** otherwise.
  An infinite bound never agrees; it disagrees when its finite side proves [L, U] misses A. Since A and
  its complement are disjoint, an agree and a disagree (two campaigns, two looks) need disjoint intervals.
  There is no test of the point estimate: the same estimate is never agree when imprecise and disagree
  when precise. Every registered claim's A is non-empty.
- **one-sided stand-ins** (``Claim.bound``): a stand-in that bounds the real thing. "upper" (its ratio is
  at least the real one: RAM for persistent memory): disagree iff [L, U] lies below A, agree iff inside A
  (the real effect is at most U), and an interval reaching above A is inconclusive and not decidable by
  runs (a faster stand-in cannot contradict the claim there; :data:`~.verdicts.STAND_IN_BOUND`); "lower"
  the mirror.
- **premises**: a premise not met (its interval on the wrong side of its threshold) or uncertain (its
  interval straddles it) gives **not tested**, the reason "premise not met: <value>" or "premise
  uncertain: <value>"; the estimate is still shown.
- **conditions** (the levels of ``per``; a measured quantity's pairs) combine by the claim's registered
  ``combine``: "all" (all agree: agree; all disagree: disagree; some agree and some disagree: **depends
  on <factor>**; else inconclusive, its reason naming the outcome its decided conditions already rule out:
  "cannot agree: disagree at <level>; <levels> open, between disagree and depends on <factor>"), "any"
  (agree iff one agrees, disagree iff all disagree), "largest" (the seed's "up to X" over its conditions:
  [max L_c, max U_c], min/min for a decrease, which holds the largest effect when each interval holds its
  own; the largest value of a measured quantity), "primary"
  (``Claim.primary``'s verdict, the others reported as "sensitivity: <level> <verdict>").
- **one decision per claim**: the pooled interval decides; with two or more campaigns each campaign's
  own estimate, interval and verdict (same rule) and a heterogeneity F test of the campaigns' contrasts
  (``heterogeneity``: "campaigns consistent" or "campaigns differ", p < 0.05) are consistency checks, never
  a veto.
- **not identified**: no study's design identifies the comparison (the alias is named).
- **not tested**: no study of the build varies the factor at the needed levels, the hardware the claim is
  about does not exist here, or a premise is not met or uncertain (the reason is given).

Throughput claims use the MSER-trimmed steady window of each run (``tps_steady``); counter and histogram
metrics the whole window. The rule, the margins, each claim's combination, bound and premises enter the
registration digest (:mod:`.registration`): a claim judged on data registered under another rule is
"revised after data".

The paper's method text is generated from this registry: :mod:`dbmatrix.publish.claims_method`.

Multiplicity: each claim is a separate question fixed in advance by a seed; each is judged by its own 95 %
interval, without a correction across claims (a reader should expect about one in twenty intervals to miss
its true value).
"""

from dbmatrix.analyse.claims.catalogue import CACHE_BELOW, CLAIMS, COMPRESSES, FC_PAUSED, SATURATED
from dbmatrix.analyse.claims.estimators import estimate, estimate_all
from dbmatrix.analyse.claims.evidence import claims_evidence
from dbmatrix.analyse.claims.model import Claim, Evidence, Premise, PremiseCheck
from dbmatrix.analyse.claims.premises import check_premise
from dbmatrix.analyse.claims.table import (
    CAMPAIGN_COLUMNS,
    VERDICT_COLUMNS,
    ClaimVerdicts,
    evaluate,
    flips,
    level_claims,
    verdict_counts,
)
from dbmatrix.analyse.claims.verdicts import RULE, VERDICTS, judge, verdict, verdict_class

__all__ = ["CACHE_BELOW", "CAMPAIGN_COLUMNS", "CLAIMS", "COMPRESSES", "FC_PAUSED", "RULE", "SATURATED", "VERDICTS",
           "VERDICT_COLUMNS", "Claim", "ClaimVerdicts", "Evidence", "Premise", "PremiseCheck", "check_premise",
           "claims_evidence", "estimate", "estimate_all", "evaluate", "flips", "judge", "level_claims",
           "verdict", "verdict_class", "verdict_counts"]
