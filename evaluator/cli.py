"""The ``pkb`` command line: eval, problems, check-references, probe."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from contract import progress

from .config import EvalConfig, Limits


def _add_eval(sub: Any) -> None:
    p = sub.add_parser("eval", help="evaluate a candidate solution file against a problem")
    p.add_argument("--problem", required=True, help="problem slug (see `pkb problems`)")
    p.add_argument("--solution", required=True, type=Path, help="Python file defining solution(...)")
    p.add_argument("--world-size", type=int, required=True)
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--dtype", default=None, help="bfloat16, float32 or float16 (default: the problem's)")
    p.add_argument("--size", default="default", help="size preset: small or default")
    p.add_argument("--trials", type=int, default=5)
    p.add_argument("--seed", type=int, default=None, help="base seed (default: a fresh secret one)")
    p.add_argument("--no-timing", action="store_true", help="check correctness only")
    p.add_argument("--hardware", default=None, help="hardware profile id for the roofline")
    p.add_argument("--startup-timeout", type=float, default=Limits.startup_s)
    p.add_argument("--step-timeout", type=float, default=Limits.step_s)
    p.add_argument("--deadline", type=float, default=None,
                   help="seconds the whole evaluation may take; each side's limit is cut to fit")
    p.add_argument("--json", type=Path, default=None, help="write the report here")
    p.add_argument("--report-fd", type=int, default=None,
                   help="also write the report to this inherited descriptor, then close it (for workers)")
    p.add_argument("--no-sandbox", action="store_true",
                   help="run candidate code unconfined, with your rights (the report says sandbox: off)")
    p.add_argument("--progress", action="store_true",
                   help="print one 'PKB-PROGRESS {json}' line to stderr per step (for workers)")


def _add_problems(sub: Any) -> None:
    p = sub.add_parser("problems", help="list the problem suite")
    p.add_argument("--summary", action="store_true", help="counts per category and per collective")
    p.add_argument("--json", action="store_true")


def _add_check(sub: Any) -> None:
    p = sub.add_parser("check-references",
                       help="run many problems' references on one rank group per world size")
    p.add_argument("slugs", nargs="*", help="problems to run (default: all)")
    p.add_argument("--world-size", type=int, nargs="+", default=[2, 4])
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--size", default="small")
    p.add_argument("--time", action="store_true", help="also time each reference (GPU)")
    p.add_argument("--hardware", default=None)
    p.add_argument("--chunk", type=int, default=1000,
                   help="problems per rank group (smaller prints results sooner)")
    p.add_argument("--json", type=Path, default=None)


def _add_probe(sub: Any) -> None:
    p = sub.add_parser("probe", help="measure this host and write a hardware profile")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cuda")
    p.add_argument("--out", type=Path, default=None, help="default: hardware/<id>.json")
    p.add_argument("--id", default=None, help="profile id (default: derived from the hardware)")
    p.add_argument("--world-size", type=int, default=None,
                   help="GPUs to measure (default: all) or gloo ranks on CPU (default: 2)")


def cmd_eval(args: argparse.Namespace) -> int:
    from .api import evaluate

    config = EvalConfig(problem=args.problem, solution_path=args.solution, world_size=args.world_size,
                        device=args.device, dtype=args.dtype, size=args.size, trials=args.trials,
                        seed=args.seed, timing=not args.no_timing, hardware_profile=args.hardware,
                        limits=Limits(startup_s=args.startup_timeout, step_s=args.step_timeout),
                        sandbox=not args.no_sandbox, deadline_s=args.deadline)
    if args.no_sandbox:
        print("pkb eval: warning: --no-sandbox: the candidate runs with your rights, network and files",
              file=sys.stderr)
    report = evaluate(config, _print_progress if args.progress else None)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=1))
    if args.report_fd is not None:
        with os.fdopen(args.report_fd, "wb") as pipe:
            pipe.write(json.dumps(report).encode())
    print(render_summary(report))
    return 0


def _print_progress(side: str, event: dict[str, Any]) -> None:
    print(progress.format_line(side, event), file=sys.stderr, flush=True)


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
            iv, stop = timing["interval"], timing["stop"]
            lines.append(f"95% interval [{iv['low']:.3f}, {iv['high']:.3f}] over {stop['rounds']} alternating rounds "
                         f"of {timing['block_calls']['candidate']} calls; stopped: {stop['reason']} "
                         f"(half-width {stop['half_width']:.1%}, target {stop['target_half_width']:.0%})")
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
                          timed=args.time, hardware=args.hardware, json_path=args.json, chunk=args.chunk)
    return 0 if ok else 1


def cmd_probe(args: argparse.Namespace) -> int:
    from .hardware import probe

    profile = probe.probe(args.device, args.out, world_size=args.world_size, profile_id=args.id,
                          command="pkb " + " ".join(sys.argv[1:]))
    print(json.dumps({"id": profile["id"], "roofline": profile["roofline"]}, indent=1))
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="pkb", description="PKB multi-GPU kernel benchmark")
    sub = parser.add_subparsers(dest="command", required=True)
    for add in (_add_eval, _add_problems, _add_check, _add_probe):
        add(sub)
    args = parser.parse_args(argv)
    commands = {"eval": cmd_eval, "problems": cmd_problems, "check-references": cmd_check,
                "probe": cmd_probe}
    try:
        return commands[args.command](args)
    except (ValueError, KeyError, FileNotFoundError) as exc:
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        print(f"pkb {args.command}: error: {message}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
