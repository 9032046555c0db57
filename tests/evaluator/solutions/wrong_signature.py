"""Takes its input under another name than the reference's `x`."""


def solution(tensor, *, group):
    return tensor.clone()
