"""Defines the wrong name."""


def solve(x, *, group):
    return x
