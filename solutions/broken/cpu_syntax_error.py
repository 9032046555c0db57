"""BROKEN on purpose (all-reduce): not valid Python. The harness must report SYNTAX_ERROR."""

import torch


def solution(x, *, group)
    return x.clone(
