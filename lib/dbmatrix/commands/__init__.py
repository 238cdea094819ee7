"""The `dbmatrix` subcommands other than `plan` and `run` (which, with the argument parser and the entry
point, stay in :mod:`dbmatrix.cli`), one module per group."""
