"""The ``pkb`` command line: eval, sweep, problems, check-references, probe (local, this module),
and login, submit, run, prompt, agent (remote: a PKB Portal, ``pkb_client``, which needs neither
torch nor Django; they are dispatched before anything here imports torch)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from contract import progress

from .config import MIN_INTERVAL_ROUNDS, EvalConfig, Limits


def _add_candidate_run(p: Any, problem_help: str, what: str) -> None:
    """The arguments `pkb eval` and `pkb sweep` share: which candidate, where, how judged."""
    p.add_argument("--problem", required=True, help=problem_help)
    p.add_argument("--solution", required=True, type=Path, help="Python file defining solution(...)")
    p.add_argument("--world-size", type=int, required=True, help="ranks: GPUs, or gloo processes on CPU")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="default: cpu (gloo)")
    p.add_argument("--dtype", default=None, help="bfloat16, float32 or float16 (default: the problem's)")
    p.add_argument("--trials", type=int, default=5, help="correctness trials (of each evaluation)")
    p.add_argument("--seed", type=int, default=None, help="base seed (default: fresh secret ones)")
    p.add_argument("--hardware", default=None,
                   help="hardware profile id for the roofline, e.g. h200-x4-nvlink (hardware/<id>.json)")
    p.add_argument("--startup-timeout", type=float, default=Limits.startup_s,
                   help="seconds a rank may take to start, import the candidate and build it "
                        "(default: %(default)s)")
    p.add_argument("--step-timeout", type=float, default=Limits.step_s,
                   help="seconds one trial or timed phase may go without progress before every "
                        "rank is killed (default: %(default)s)")
    p.add_argument("--report-fd", type=int, default=None,
                   help=f"also write the {what} to this inherited descriptor, then close it (for workers)")
    p.add_argument("--no-sandbox", action="store_true",
                   help="run candidate code unconfined, with your rights (the report says sandbox: off)")
    p.add_argument("--gpu-judge", choices=("ranks", "outside"), default="ranks",
                   help="GPUs: judge inside the ranks (default) or outside them as on CPU (docs/judge.md)")
    p.add_argument("--cpu-judge", choices=("outside", "ranks"), default="outside",
                   help="CPU: judge outside the ranks (default) or inside them, as GPUs do by default: "
                        "reproduces the GPU path on a machine without one (docs/judge.md)")
    p.add_argument("--judge-release", choices=("call", "block"), default="call",
                   help="the judge outside: release a block's inputs call by call (default: nothing can be "
                        "batched) or all at once (no round trip per call; docs/judge.md)")
    p.add_argument("--gpu-align", choices=("host", "device"), default="host",
                   help="GPUs judged in the ranks: meet before each timed call at a host barrier (default) "
                        "or also on the GPU, so that every rank's window opens at once (docs/timing.md)")
    p.add_argument("--share-gpu", action="store_true",
                   help="GPUs: every rank on GPU 0, collectives over gloo: tests the GPU path's mechanisms on "
                        "a host with one GPU; its times measure nothing (docs/judge.md)")


def _add_eval(sub: Any) -> None:
    p = sub.add_parser("eval", help="evaluate a candidate solution file against a problem")
    _add_candidate_run(p, "problem slug (see `pkb problems`)", "report")
    p.add_argument("--size", default="default", help="size preset: small or default")
    p.add_argument("--no-timing", action="store_true", help="check correctness only")
    p.add_argument("--deadline", type=float, default=None,
                   help="seconds the whole evaluation may take; each side's limit is cut to fit")
    p.add_argument("--json", type=Path, default=None, help="write the report here")
    p.add_argument("--progress", action="store_true",
                   help="print one 'PKB-PROGRESS {json}' line to stderr per step (for workers)")


def _add_sweep(sub: Any) -> None:
    p = sub.add_parser("sweep", help="evaluate a candidate over a range of message sizes (docs/sweeps.md)")
    _add_candidate_run(p, "a problem that declares a sweep axis", "sweep report")
    p.add_argument("--sizes", nargs="+", default=None, metavar="BYTES",
                   help="message sizes, e.g. 4K 64K 1M 16MiB (default: the problem's, 4 KiB-256 MiB "
                        "for the plain collectives)")
    p.add_argument("--base", default=None,
                   help="size preset whose other shape parameters stay fixed (default: the axis's)")
    p.add_argument("--deadline", type=float, default=None,
                   help="seconds the whole sweep may take; sizes that cannot finish in time are skipped")
    p.add_argument("--out", "--json", dest="out", type=Path, default=None, help="write the sweep report here")
    p.add_argument("--reports", type=Path, default=None, metavar="DIR",
                   help="also write each size's whole evaluation report here (sweep-<bytes>.json); the "
                        "sweep report abridges them where it must to stay small enough for the portal")


def _add_problems(sub: Any) -> None:
    p = sub.add_parser("problems", help="list the problem suite")
    p.add_argument("--summary", action="store_true", help="counts per category and per collective")
    p.add_argument("--json", action="store_true")


def _add_check(sub: Any) -> None:
    p = sub.add_parser("check-references",
                       help="run many problems' references on one rank group per world size")
    p.add_argument("slugs", nargs="*", help="problems to run (default: all)")
    p.add_argument("--world-size", type=int, nargs="+", default=[2, 4],
                   help="one rank group per world size (default: 2 4)")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="default: cpu (gloo)")
    p.add_argument("--size", default="small", help="size preset: small (default) or default")
    p.add_argument("--time", action="store_true", help="also time each reference (GPU)")
    p.add_argument("--dtype", default=None, help="run each reference in this dtype (default: its own)")
    p.add_argument("--hardware", default=None,
                   help="hardware profile id for the roofline with --time, e.g. h200-x4-nvlink")
    p.add_argument("--chunk", type=int, default=1000,
                   help="problems per rank group (smaller prints results sooner)")
    p.add_argument("--json", type=Path, default=None, help="write the results here")


def _add_probe(sub: Any) -> None:
    p = sub.add_parser("probe", help="measure this host and write a hardware profile")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cuda",
                   help="default: cuda (this host's GPUs); cpu measures gloo ranks")
    p.add_argument("--out", type=Path, default=None, help="default: hardware/<id>.json")
    p.add_argument("--id", default=None, help="profile id (default: derived from the hardware)")
    p.add_argument("--world-size", type=int, default=None,
                   help="GPUs to measure (default: all) or gloo ranks on CPU (default: 2)")


def _config(args: argparse.Namespace, **extra: Any) -> EvalConfig:
    """The evaluation the shared arguments describe (``_add_candidate_run``)."""
    if args.no_sandbox:
        print(f"pkb {args.command}: warning: --no-sandbox: the candidate runs with your rights, network and files",
              file=sys.stderr)
    return EvalConfig(problem=args.problem, solution_path=args.solution, world_size=args.world_size,
                      device=args.device, dtype=args.dtype, trials=args.trials, seed=args.seed,
                      hardware_profile=args.hardware,
                      limits=Limits(startup_s=args.startup_timeout, step_s=args.step_timeout),
                      sandbox=not args.no_sandbox, gpu_judge=args.gpu_judge, cpu_judge=args.cpu_judge,
                      judge_release=args.judge_release, gpu_align=args.gpu_align, share_gpu=args.share_gpu,
                      deadline_s=args.deadline,
                      **extra)


def cmd_eval(args: argparse.Namespace) -> int:
    from .api import evaluate

    config = _config(args, size=args.size, timing=not args.no_timing)
    report = evaluate(config, _print_progress if args.progress else None)
    _hand_over(report, args.json, args.report_fd)
    print(writable(progress.quoted(render_summary(report)), sys.stdout))
    return 0


def writable(text: str, stream: Any) -> str:
    """``text`` as ``stream`` can write it, what its encoding cannot escaped. The summary quotes
    the candidate's own text (its exception), which may hold what no encoding writes (a lone
    surrogate): printing it made `pkb eval` end in "error", exit code 2, after writing a report
    that said fail (red team, 2026-11-28). Not the stream's own error handler: reconfiguring a
    warm worker's child's stdout raised "Illegal seek"."""
    encoding = getattr(stream, "encoding", None) or "utf-8"
    return text.encode(encoding, "backslashreplace").decode(encoding)


def cmd_sweep(args: argparse.Namespace) -> int:
    from .sweep import parse_bytes, render_table, run_sweep, sweep_points, sweep_problem

    targets = [parse_bytes(text) for text in args.sizes] if args.sizes else None
    problem = sweep_problem(args.problem)
    # Checked before anything runs: world size, dtype, base preset.
    points = sweep_points(problem, args.world_size, args.dtype, targets, args.base)
    config = _config(args)

    def said(i: int, n: int, point: dict[str, Any]) -> None:
        what = point["skipped"] or point["verdict"]
        print(f"pkb sweep: size {i + 1} of {n} ({point['size']}): {what}", file=sys.stderr, flush=True)
        if args.reports is not None and point["report"] is not None:
            args.reports.mkdir(parents=True, exist_ok=True)
            (args.reports / f"sweep-{point['target_bytes']}.json").write_text(json.dumps(point["report"], indent=1))

    print(f"pkb sweep: {len(points)} sizes of {problem.slug}, one evaluation each", file=sys.stderr)
    sweep = run_sweep(config, targets=targets, base=args.base, on_point=said,
                      command="pkb " + " ".join(sys.argv[1:]) if sys.argv[1:2] == ["sweep"] else None)
    _hand_over(sweep, args.out, args.report_fd)
    print(writable(progress.quoted(render_table(sweep)), sys.stdout))
    # 0: a verdict over every size, pass or fail (the report says which); 3: the report is written,
    # but sizes were not run and none failed, so there is no verdict to read as a pass.
    return 3 if sweep["verdict"] == "incomplete" else 0


def _hand_over(document: Mapping[str, Any], path: Optional[Path], fd: Optional[int]) -> None:
    """Write a report to ``path`` and to the inherited descriptor ``fd`` (then closed), where given."""
    if path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(document, indent=1))
    if fd is not None:
        with os.fdopen(fd, "wb") as pipe:
            pipe.write(json.dumps(document).encode())


def _print_progress(side: str, event: dict[str, Any]) -> None:
    print(writable(progress.format_line(side, event), sys.stderr), file=sys.stderr, flush=True)


def _interval_line(timing: Mapping[str, Any]) -> str:
    """The speedup's 95% interval and why timing stopped; from fewer rounds than an interval
    needs (config.MIN_INTERVAL_ROUNDS), no bracket: the spread of 1 or 2 rounds is not one."""
    iv, stop = timing["interval"], timing["stop"]
    rounds = stop["rounds"]
    calls = f"of {timing['block_calls']['candidate']} calls; stopped: {stop['reason']}"
    if rounds < MIN_INTERVAL_ROUNDS:
        plural = "round" if rounds == 1 else "rounds"
        return (f"no interval ({rounds} {plural}; a 95% interval needs at least {MIN_INTERVAL_ROUNDS}): "
                f"{rounds} alternating {plural} {calls}")
    return (f"95% interval [{iv['low']:.3f}, {iv['high']:.3f}] over {rounds} alternating rounds {calls} "
            f"(half-width {stop['half_width']:.1%}, target {stop['target_half_width']:.0%})")


def render_summary(report: Mapping[str, Any]) -> str:
    s = report["setting"]
    lines = [f"{report['problem']['slug']}  world={s['world_size']} {s['device']}/{s['backend']} "
             f"{s['dtype']} size={s['size']}",
             f"verdict: {report['verdict'].upper()}"]
    failure = report.get("failure")
    if failure:
        lines.append(f"failure: {failure['failure_class']}: {failure['message']}")
        for label in ("compiler_output", "traceback"):
            if failure.get(label):
                lines.append(f"--- {label} ---\n{failure[label].rstrip()[-3000:]}")
        for rank, stack in sorted((failure.get("stacks") or {}).items()):
            lines.append(f"--- rank {rank} stacks ---\n{stack.rstrip()[-2000:]}")
    passed = sum(1 for t in report["trials"] if t["passed"])
    if report["trials"]:
        lines.append(f"trials: {passed}/{len(report['trials'])} passed")
    timing = report.get("timing")
    if timing:
        c, r = timing["candidate"], timing["reference"]
        label = "" if timing["device"] == "cuda" else " (CPU timings)"
        lines.append(f"reference {r['median_ms']:.4f} ms  candidate {c['median_ms']:.4f} ms  "
                     f"speedup {timing['speedup']:.3f}x{label}")
        if timing.get("interval") and timing.get("stop"):
            lines.append(_interval_line(timing))
        if (timing.get("clocks") or {}).get("moved"):
            lines.append(f"warning: GPU clocks moved while timing: {timing['clocks']['note']}")
        if timing.get("roofline"):
            rl = timing["roofline"]
            lines.append(f"roofline {rl['time_ms']:.4f} ms ({rl['bound']}-bound on {report['hardware_profile']}): "
                         f"candidate {c['roofline_fraction']:.1%}, reference {r['roofline_fraction']:.1%}")
    w = report["wall_time"]
    compile_s = f", compile {w['compile_s']:.1f} s" if w.get("compile_s") else ""
    lines.append(f"wall time {w['total_s']:.1f} s (candidate {w['candidate_s']:.1f} s, "
                 f"reference {w['reference_s']:.1f} s{compile_s})")
    if w.get("phases_s"):
        lines.append("judge's phases: " + ", ".join(f"{phase} {s:.1f} s" for phase, s in w["phases_s"].items()))
    return "\n".join(lines)


def cmd_problems(args: argparse.Namespace) -> int:
    from .catalog import problem_rows, summary_text

    rows = problem_rows()
    if args.json:
        print(json.dumps(rows, indent=1))
    elif args.summary:
        print(summary_text(rows))
    else:
        for row in rows:
            print(f"{row['id']:>5}  {row['slug']:<40} {','.join(row['categories']):<24} "
                  f"{row['source']['codebase']}")
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from .suite import check_references

    ok = check_references(args.slugs, args.world_size, device=args.device, size=args.size,
                          timed=args.time, hardware=args.hardware, json_path=args.json, chunk=args.chunk,
                          dtype=args.dtype)
    return 0 if ok else 1


def cmd_probe(args: argparse.Namespace) -> int:
    import torch

    from .hardware import probe

    if args.device == "cuda" and not torch.cuda.is_available():
        print("pkb probe: error: --device cuda needs a visible CUDA GPU and this host has none; "
              "`pkb probe --device cpu` profiles the CPU over gloo instead", file=sys.stderr)
        return 2
    profile = probe.probe(args.device, args.out, world_size=args.world_size, profile_id=args.id,
                          command="pkb " + " ".join(sys.argv[1:]))
    print(json.dumps({"id": profile["id"], "roofline": profile["roofline"]}, indent=1))
    return 0


def _remote_help() -> dict[str, str]:
    """The remote commands with their one-line help, from ``pkb_client`` where it is installed
    (a bare checkout on a GPU host may not have it: then the names alone)."""
    try:
        from pkb_client.commands import COMMAND_HELP
    except ImportError:
        return {name: "talks to a PKB Portal (needs pkb_client: pip install ./client)"
                for name in ("login", "submit", "run", "prompt", "agent")}
    return dict(COMMAND_HELP)


REMOTE_COMMANDS = tuple(_remote_help())


def _remote_command(argv: Sequence[str]) -> bool:
    """Whether the first word that is not an option (or ``--server``'s value) is remote."""
    skip = False
    for word in argv:
        if skip:
            skip = False
        elif word == "--server":
            skip = True
        elif not word.startswith("-"):
            return word in REMOTE_COMMANDS
    return False


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if _remote_command(argv):
        from pkb_client.cli import main as remote

        return remote(argv)
    from .bytecode_cache import adopt

    adopt()  # before torch is imported: on hosts whose torch ships no bytecode, compiled once
    parser = argparse.ArgumentParser(
        prog="pkb", description="PKB multi-GPU kernel benchmark: eval, sweep, problems, "
        "check-references and probe run the evaluator here; login, submit, run, prompt and agent "
        "talk to a PKB Portal (`pkb submit --help`).")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in (_add_eval, _add_sweep, _add_problems, _add_check, _add_probe):
        add(sub)
    for name, text in _remote_help().items():  # listed here; parsed by pkb_client (dispatched above)
        sub.add_parser(name, help=text + " (remote)", add_help=False)
    args = parser.parse_args(argv)
    commands = {"eval": cmd_eval, "sweep": cmd_sweep, "problems": cmd_problems, "check-references": cmd_check,
                "probe": cmd_probe}
    try:
        return commands[args.command](args)
    except (ValueError, KeyError, FileNotFoundError) as exc:
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        print(f"pkb {args.command}: error: {message}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
