"""All-reduce, PKB style: torch's load_inline inside the first call, with C++ that does not
compile. Judged compile_error with the compiler's output, not a runtime error."""

from torch.utils.cpp_extension import load_inline

_module = None


def solution(x, *, group):
    global _module
    if _module is None:
        _module = load_inline(name="pkb_broken_ext", cpp_sources=["int broken( { return 0; }"],
                              functions=["broken"])
    return _module.broken(x)
