"""Does not parse."""


def solution(x, *, group)
    return x
