# A broken file: it does not parse.
import torch

def solution(grad_output, x, weight:
    return grad_output
