"""The error every spec and inventory check raises (its own module so that :mod:`dbmatrix.spec.factors` and
:mod:`dbmatrix.spec.experiment` can both raise it; import it from either)."""


class SpecError(ValueError):
    """A spec or inventory is invalid; the message names the field and what is allowed."""
