"""A ParallelKernelBench run directory as file plans: each file's PKB id, our problem (from the
problems' ``pkb_ids`` metadata), its adapter, and, where it cannot be evaluated here, why."""

from __future__ import annotations

import re
from collections import defaultdict

from portal.runs.archives import Entry, is_noise
from portal.runs.services import FilePlan

from . import names
from .adapters import adapter_for
from .variants import VARIANTS
from .wrapper import wrap

# NVLink multicast (multimem instructions, a multicast pointer, ThunderKittens' parallel
# tensors): the evaluation hosts run with it off, so such a file cannot run as written.
MULTICAST = re.compile(r"multimem\.|multicast_ptr|mc_ptr|TKParallelTensor|parallelkittens_runtime"
                       r"|multicast\s*=\s*True")
MULTICAST_NOTE = ("uses NVLink multicast (multimem or a multicast pointer); the evaluation hosts run "
                  "with it off (NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1), so it "
                  "passes only if it falls back without it")


def pkb_index() -> dict[int, list[str]]:
    """PKB id -> our problems that declare it in ``pkb_ids`` (problems/spec.py)."""
    import problems

    found: dict[int, list[str]] = defaultdict(list)
    for problem in problems.all_problems():
        for pkb_id in getattr(problem, "pkb_ids", ()):
            found[int(pkb_id)].append(problem.slug)
    return dict(found)


def unmapped_message(label: str, pkb_id: int) -> str:
    """Why a PKB file with no equivalent here is refused, naming the related variant where
    docs/pkb-mapping.md lists one, so its author knows which problem to write for instead."""
    if pkb_id in VARIANTS:
        slug, difference = VARIANTS[pkb_id]
        return (f"{label} has no equivalent problem here; the related variant is {slug}, which "
                f"differs in substance ({difference}), so the file cannot be judged against it "
                f"(docs/pkb-mapping.md). Write a solution for {slug} to be ranked there.")
    return f"{label} has no equivalent problem here yet (no problem lists it in pkb_ids)"


def plans_from_pkb(entries: list[Entry]) -> list[FilePlan]:
    index = pkb_index()
    refs = names.references()
    return [_plan(entry, index, refs) for entry in entries if not is_noise(entry.path)]


def _model_fault(plan: FilePlan, problem: str | None, code: str, message: str) -> FilePlan:
    plan.problem = problem
    return plan.refuse(code, message)


def _plan(entry: Entry, index: dict[int, list[str]], refs: dict[int, str]) -> FilePlan:
    base = entry.path.rsplit("/", 1)[-1]
    plan = FilePlan(name=base, problem=None, source=entry.data)
    if entry.data is None:
        return plan.refuse(entry.code, entry.message)
    parsed = names.parse_file(base)
    if parsed is None:
        return plan.refuse("not_a_pkb_file", "not named <id>_<name>_<cuda|triton|parallelkittens>.py")
    if parsed.pkb_id is None:
        return plan.refuse("unknown_pkb_problem", f"no ParallelKernelBench reference is named "
                           f"{parsed.name!r} (as number {parsed.number} or {parsed.number - 1})")
    plan.pkb_id = parsed.pkb_id
    label = f"PKB {parsed.pkb_id} ({refs[parsed.pkb_id]})"
    slugs = index.get(parsed.pkb_id, [])
    # A file refused for what the model wrote is a failed sample of the problem it answers, where
    # the run could have evaluated one (runs/scoring.py MODEL_FAULTS), so it names that problem.
    answers = None if parsed.backend == "parallelkittens" else next(
        (a.slug for slug in slugs if (a := adapter_for(parsed.pkb_id, slug))), None)
    try:
        text = entry.data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return _model_fault(plan, answers, "not_utf8", f"not UTF-8 text (byte {exc.start})")
    if not text.strip():
        return _model_fault(plan, answers, "empty_source", "the file is empty")
    try:
        compile(text, base, "exec", dont_inherit=True)
    except SyntaxError as exc:
        return _model_fault(plan, answers, "syntax_error", f"Python syntax error at line {exc.lineno}: {exc.msg}")
    except (MemoryError, RecursionError) as exc:  # deep nesting, which the parser gives up on
        return _model_fault(plan, answers, "syntax_error", f"the file nests too deeply for Python to parse "
                            f"({type(exc).__name__})")
    if not re.search(r"^(def|async def)\s+solution\s*\(|^solution\s*=", text, re.M):
        return _model_fault(plan, answers, "missing_solution", "the file defines no top-level `solution`")
    if not slugs:
        return plan.refuse("unmapped", unmapped_message(label, parsed.pkb_id))
    plan.problem = slugs[0]
    if parsed.backend == "parallelkittens":
        return plan.refuse("needs_thunderkittens", "a ParallelKittens file: it builds against "
                           "ThunderKittens' headers and runtime (utils.parallelkittens_runtime) and "
                           "its parallel tensors use NVLink multicast; the evaluation hosts have "
                           "neither: not evaluated")
    if MULTICAST.search(text):
        # Evaluated anyway: some files fall back when the multicast pointer is 0. One that does
        # not fails, and the run page names the reason (presenters.verdict_class).
        plan.message = MULTICAST_NOTE
    adapter = next((a for slug in slugs if (a := adapter_for(parsed.pkb_id, slug))), None)
    if adapter is None:
        return plan.refuse("no_adapter", f"{label} maps to {', '.join(slugs)}, but no adapter "
                           "converts its calling convention yet (portal/runs/pkb/adapters.py)")
    plan.problem, plan.adapter = adapter.slug, adapter.name
    plan.source = wrap(text, file=base, pkb_id=parsed.pkb_id, pkb_name=refs[parsed.pkb_id],
                       adapter=adapter).encode()
    return plan
