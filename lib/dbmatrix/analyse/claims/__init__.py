"""The seeds' claims beside what our runs measured: one registry, one verdict rule for the whole paper.

Each :class:`Claim` names a seed, a short paraphrase of what it says, and what to compare: a metric, a
factor's two levels (``a`` against ``b``, in the direction the seed states its result), the levels of other
factors the seed held (``at``), the band of values the claim asserts for the estimate (a ratio a/b, a
difference a - b in points, or a share), and its **premises**: the conditions the seed's result depended on,
checked from our data (:class:`Premise`). The estimate and its 95 % CI come from the data (:func:`estimate`):

1. runs restricted to the claim's conditions, if only the compared factor still varies there: the two
   cells' repetitions, Welch's t on log values (ratio of geometric means);
2. otherwise the factorial model of log(metric) (main effects + two-way interactions; :mod:`contrasts`):
   the contrast at the claim's conditions. A factor the claim leaves free is averaged over only when its
   interaction with the compared factor is not significant; otherwise the claim is judged per level of that
   factor (:class:`dbmatrix.analyse.contrasts.DependsOn`). The basis says what a fractional design aliases;
3. dataset sizes (one dataset per engine x page x compression): the geometric mean of the matched pairs'
   ratios, the "interval" being their range; shares (tested runs shown stable by the steady-state test,
   :func:`dbmatrix.analyse.contrasts.steady_share`): a Wilson interval widened to bound the undetermined runs;
   the replication study (Galera) and the scale-out study: their own estimators.

**Campaigns** (one run of a study's matrix on one boot): every claim is estimated within each campaign and,
with two or more, pooled so that the interval contains the variation between campaigns (campaign-level cell
means for the model contrasts, a two-stage t interval with K-1 df otherwise; :mod:`dbmatrix.analyse.pooling`).
With one campaign the basis says "within one campaign": such an interval leaves out the variation between
runs of the matrix.

**Verdict rule** (:func:`verdict`, :func:`judge`), with [L, U] the 95 % CI, e the estimate, [lo, hi] the
claimed band and the null value 1 for ratios, 0 for differences:

- **premise not met**: a premise of the claim fails on our data (the measured value is given); the estimate
  is still shown, but it does not test the seed's result.
- ``direction`` claims (an effect in a direction, "up to" / "about" a size): **agree** when [L, U] excludes
  the null on the claimed side *and* e lies inside the band; **disagree** when [L, U] misses the band
  entirely; **inconclusive** otherwise.
- ``within`` claims (no or a bounded effect): **agree** when [L, U] lies inside the band; **disagree** when it
  misses the band entirely; **inconclusive** otherwise.
- with two or more campaigns, **agree** also needs every campaign's own estimate inside the band, and
  **disagree** every campaign's own estimate outside it; else **inconclusive** ("campaigns differ").
- **not tested**: no study of the build varies the factor at the needed levels, or the hardware the claim
  is about does not exist here (the reason is given).

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
    verdict_counts,
)
from dbmatrix.analyse.claims.verdicts import VERDICTS, in_band, judge, verdict

__all__ = ["CACHE_BELOW", "CAMPAIGN_COLUMNS", "CLAIMS", "COMPRESSES", "FC_PAUSED", "SATURATED", "VERDICTS",
           "VERDICT_COLUMNS", "Claim", "ClaimVerdicts", "Evidence", "Premise", "PremiseCheck", "check_premise",
           "claims_evidence", "estimate", "estimate_all", "evaluate", "flips", "in_band", "judge", "verdict",
           "verdict_counts"]
