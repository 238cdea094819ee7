"""dbmatrix: how storage configuration shapes MySQL-family OLTP performance, measured for real."""

__version__ = "0.1.0"
