"""The seeds' claims beside what our runs measured: one registry, one verdict rule for the whole paper.

Each :class:`Claim` names a seed, a short paraphrase of what it says, and what to compare: a metric, a
factor's two levels (``a`` against ``b``, in the direction the seed states its result), the levels of other
factors the seed held (``at``), the band of values the claim asserts for the estimate (a ratio a/b, a
difference a - b in points, or a share), and its **premises**: the conditions the seed's result depended on,
checked from our data (:class:`Premise`). The estimate and its 95 % CI come from the data (:func:`estimate`):

1. every estimate comes from one campaign-level model of log(metric) (:func:`dbmatrix.analyse.contrasts.
   ratio_estimate`, :mod:`dbmatrix.analyse.campaign_model`): matched cells (the additive cell + campaign
   model over the study's cells) or the two-way model's contrast at the claim's levels; the cell means'
   variance is floored by the repetitions' (replicate block as a term) and with two campaigns the t takes
   the runs' residual df. Galera and scale-out claims use the same model on their runs (no t on 1 df).
   With one campaign the basis says "within one campaign": such an interval leaves out the variation
   between runs of the matrix;
2. a claim is judged at the levels it names (``at``) and, where the seed says so, at every level of the
   factors in ``per`` (fixed in the registry, never split by a p-value); other free factors are averaged
   over only when the design identifies that: a condition or an averaged interaction that is aliased gives
   **not identified** and names the alias (:class:`dbmatrix.analyse.contrasts.NotIdentified`);
3. intervals respect their metric: ratios on the log scale; shares on the logit scale, a difference of
   shares by MOVER (:mod:`dbmatrix.analyse.shares`); dataset sizes (measured once per dataset) are judged per
   pair and never given a CI (``Estimate.values``); an infinite interval is "unbounded".

**Verdict rule** (:func:`verdict`, :func:`judge`), with [L, U] the 95 % CI, e the estimate, [lo, hi] the
claimed band, the null value 1 for ratios, 0 for differences, and m the equivalence margin of no effect
declared per metric (:data:`dbmatrix.analyse.claims.model.MARGINS`):

- **premise not met**: a premise's interval lies on the wrong side of its threshold (the measured value is
  given); the estimate is still shown. A premise whose interval straddles the threshold is *uncertain*: the
  verdict stands and its reason says "premise uncertain".
- ``direction`` ("up to X", "grows"): **agree** when [L, U] excludes the null on the claimed side and e lies
  in the band; **disagree** when [L, U] misses the band or lies inside the no-effect zone (1/(1+m) .. 1+m,
  or -m .. m): a precise null; **inconclusive** otherwise.
- ``about`` (X plus or minus a declared tolerance) and ``within`` (no or a bounded effect; "no effect" is
  the zone of the metric's margin): **agree** when [L, U] lies inside the band, **disagree** when it misses
  it, **inconclusive** otherwise.
- with two or more campaigns, **agree** also needs every campaign's own estimate inside the band, and
  **disagree** every campaign's own estimate outside it (a precise null excepted); else **inconclusive**.
- **not identified**: no study's design identifies the comparison (the alias is named).
- **not tested**: no study of the build varies the factor at the needed levels, or the hardware the claim
  is about does not exist here (the reason is given).

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
from dbmatrix.analyse.claims.verdicts import VERDICTS, in_band, judge, verdict

__all__ = ["CACHE_BELOW", "CAMPAIGN_COLUMNS", "CLAIMS", "COMPRESSES", "FC_PAUSED", "SATURATED", "VERDICTS",
           "VERDICT_COLUMNS", "Claim", "ClaimVerdicts", "Evidence", "Premise", "PremiseCheck", "check_premise",
           "claims_evidence", "estimate", "estimate_all", "evaluate", "flips", "in_band", "judge", "level_claims",
           "verdict", "verdict_counts"]
