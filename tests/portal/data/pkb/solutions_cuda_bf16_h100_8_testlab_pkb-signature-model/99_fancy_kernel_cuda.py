import torch


def solution(x):
    return x
