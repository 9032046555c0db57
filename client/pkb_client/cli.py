"""``pkb`` against a PKB Portal: login, submit, run create|add|status|scores|import, prompt,
agent. Human text on stdout (status lines on stderr); ``--json`` prints one JSON document on
stdout instead. Exit codes: ``pkb_client.exits``."""

from __future__ import annotations

import argparse
import getpass
import json
import sys
import time
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from . import agent, config, exits, pkbdir
from .commands import COMMAND_HELP
from .http import Api, ApiError
from .reports import summary
from .waiting import WaitTimeout, terminal_line, wait_for_submission

PROBLEM_HELP = "problem slug, e.g. all-reduce (GET /api/v1/problems/ or `pkb problems` lists them)"
HARDWARE_HELP = "hardware id, e.g. h200-x4-nvlink (GET /api/v1/hardware/ lists them)"
INFERRED_HARDWARE_HELP = (HARDWARE_HELP + "; default: the portal picks the one hardware that a "
                          "worker serves and that runs the problem, and says so when there is no "
                          "single choice")
MODEL_HELP = "model name the result is filed under on the leaderboard, e.g. gpt-5.5"


class Usage(Exception):
    pass


def _common() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--server", default=argparse.SUPPRESS,
                        help="portal URL (default: PKB_SERVER, then the one `pkb login` saved)")
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                        help="print one JSON document on stdout")
    return common


def build_parser() -> argparse.ArgumentParser:
    common = _common()
    parser = argparse.ArgumentParser(prog="pkb", parents=[common], description=__doc__,
                                     epilog="exit codes: " + "; ".join(f"{c} {t}" for c, t in exits.TABLE))
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("login", parents=[common], help=COMMAND_HELP["login"])
    p.add_argument("--username", help="default: asked for")
    p.add_argument("--password", help="default: asked for (or PKB_PASSWORD)")
    p.add_argument("--token", help="store this token instead of asking for one")

    p = sub.add_parser("submit", parents=[common], help=COMMAND_HELP["submit"])
    p.add_argument("file", type=Path, help="the Python file that defines solution(...)")
    p.add_argument("--problem", required=True, help=PROBLEM_HELP)
    p.add_argument("--hardware", help=INFERRED_HARDWARE_HELP)
    p.add_argument("--backend", default="torch", choices=("torch", "triton", "cuda"))
    p.add_argument("--model", default="human", help=MODEL_HELP + " (default: human)")
    p.add_argument("--provider", default="", help="who serves the model, e.g. openai (optional)")
    p.add_argument("--wait", action="store_true", help="follow it live and print the report")
    p.add_argument("--timeout", type=float, default=3600.0, help="seconds --wait waits")

    p = sub.add_parser("prompt", parents=[common], help=COMMAND_HELP["prompt"])
    p.add_argument("--problem", required=True, help=PROBLEM_HELP)
    p.add_argument("--hardware", help=HARDWARE_HELP + "; default: the hardware `pkb submit` "
                   "would pick (the one that runs the problem and that a worker serves), else the "
                   "busiest; the prompt names it")
    p.add_argument("--backend", default="torch", choices=("torch", "triton", "cuda"))

    p = sub.add_parser("agent", parents=[common], help=COMMAND_HELP["agent"])
    p.add_argument("--model-command", required=True,
                   help="shell command: reads the prompt on stdin, prints a solution file")
    p.add_argument("--problem", required=True, help=PROBLEM_HELP)
    p.add_argument("--hardware", help=HARDWARE_HELP + "; default: --run's hardware, else the one "
                   "`pkb prompt` picks (what `pkb submit` would pick), and the agent says which")
    p.add_argument("--turns", type=int, default=3, help="attempts, each fed the last failure (default: 3)")
    p.add_argument("--backend", default="torch", choices=("torch", "triton", "cuda"))
    p.add_argument("--run", type=int, help="record the turns in this run (default: a new run)")
    p.add_argument("--model", default="agent", help="model name of the new run (default: agent)")
    p.add_argument("--provider", default="", help="who serves the model, e.g. openai (optional)")
    p.add_argument("--wait-timeout", type=float, default=3600.0,
                   help="seconds to wait for each turn's verdict (default: %(default)s)")
    p.add_argument("--model-timeout", type=float, default=600.0,
                   help="seconds the model command may take per turn (default: %(default)s)")

    run = sub.add_parser("run", parents=[common], help=COMMAND_HELP["run"])
    rsub = run.add_subparsers(dest="run_command", required=True)
    p = rsub.add_parser("create", parents=[common], help="create a run")
    p.add_argument("--model", required=True, help=MODEL_HELP)
    p.add_argument("--hardware", required=True, help=HARDWARE_HELP)
    p.add_argument("--k", type=int, required=True, help="samples per problem")
    p.add_argument("--provider", default="", help="who serves the model, e.g. openai (optional)")
    p.add_argument("--backend", default="cuda", choices=("torch", "triton", "cuda"))
    p.add_argument("--precision", default="bf16", help="the samples' precision, e.g. bf16 (default)")
    p.add_argument("--sampling", default="{}", help='JSON, e.g. \'{"temperature": 1.0}\'')
    p.add_argument("--note", default="", help="shown on the run's page")
    p.add_argument("--link", default="", help="a URL shown on the run's page (a paper, a repository)")
    p = rsub.add_parser("add", parents=[common],
                        help="add samples: a .py (with --problem), a directory or a zip/tar")
    p.add_argument("run", type=int)
    p.add_argument("paths", type=Path, nargs="+")
    p.add_argument("--problem", help="the problem of a single .py file: " + PROBLEM_HELP)
    for name, helptext in (("status", "progress: queued, running, done, per problem"),
                           ("scores", "pass@k, fast_p, fast_1@k")):
        p = rsub.add_parser(name, parents=[common], help=helptext)
        p.add_argument("run", type=int)
        p.add_argument("--wait", action="store_true", help="wait until no sample is pending")
        p.add_argument("--timeout", type=float, default=6 * 3600.0)
        if name == "scores":
            p.add_argument("--partial", action="store_true", help="scores so far, while pending")
    p = rsub.add_parser("import", parents=[common], help="import a ParallelKernelBench directory")
    p.add_argument("directory", type=Path)
    p.add_argument("--hardware", required=True, help="where to evaluate it: " + HARDWARE_HELP)
    p.add_argument("--k", type=int, default=1, help="samples per problem (default: 1)")
    p.add_argument("--model", help="override the directory's model slug")
    p.add_argument("--provider", help="override the directory's provider")
    p.add_argument("--note", default="", help="shown on the run's page")
    p.add_argument("--link", default="", help="a URL shown on the run's page (a paper, a repository)")
    p.add_argument("--dry-run", action="store_true", help="show each file's fate; store nothing")
    return parser


class Out:
    """Human text or one JSON document; status lines always to stderr."""

    def __init__(self, as_json: bool) -> None:
        self.as_json = as_json

    def result(self, data: Any, text: str) -> None:
        print(json.dumps(data, indent=1) if self.as_json else text)

    def status(self, line: str) -> None:
        terminal_line(line)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    out = Out(getattr(args, "json", False))
    api = Api(config.server(getattr(args, "server", None)), config.token())
    handler: Callable[[argparse.Namespace, Api, Out], int] = (
        HANDLERS[f"run {args.run_command}"] if args.command == "run" else HANDLERS[args.command])
    try:
        return handler(args, api, out)
    except ApiError as exc:
        return _fail(out, exc.as_json(), f"pkb {args.command}: {exc.code or 'error'}: {exc.message}",
                     exc.exit_code)
    except Usage as exc:
        return _fail(out, {"error": {"code": "usage", "message": str(exc)}}, f"pkb {args.command}: {exc}",
                     exits.USAGE)
    except WaitTimeout as exc:
        return _fail(out, {"error": {"code": "timeout", "message": str(exc)}}, f"pkb {args.command}: {exc}",
                     exits.TIMEOUT)
    except agent.ModelCommandError as exc:
        return _fail(out, {"error": {"code": "model_command", "message": str(exc)}},
                     f"pkb agent: {exc}", exits.MODEL_COMMAND)
    except KeyboardInterrupt:
        return 130


def _fail(out: Out, data: dict[str, Any], text: str, code: int) -> int:
    if out.as_json:
        print(json.dumps(data, indent=1))
    else:
        print(text, file=sys.stderr)
    return code


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise Usage(f"cannot read {path}: {exc.strerror}") from None


def cmd_login(args: argparse.Namespace, api: Api, out: Out) -> int:
    import os

    server = api.base.removesuffix("/api/v1/")
    token = args.token
    if not token:
        username = args.username or input("username: ")
        password = args.password or os.environ.get("PKB_PASSWORD") or getpass.getpass("password: ")
        answer = api.post("auth/token/", data={"username": username, "password": password})
        token = answer["token"]
    checked = Api(server, token)
    checked.get("submissions/", page_size=1)  # the token works (raises AUTH otherwise)
    path = config.save({**config.load(), "server": server, "token": token})
    out.result({"server": server, "config": str(path)}, f"logged in to {server}; token saved in {path}")
    return exits.OK


def cmd_submit(args: argparse.Namespace, api: Api, out: Out) -> int:
    source = _read(args.file)
    fields = {"problem": args.problem, "backend": args.backend, "model": args.model,
              "provider": args.provider}
    if args.hardware:  # otherwise the portal picks the obvious one, or says why there is none
        fields["hardware"] = args.hardware
    sub = api.post("submissions/", data=fields,
                   files={"source": (args.file.name, source, "text/x-python")})
    if not args.wait:
        out.result(sub, f"submission #{sub['id']} {sub['status']}: {api.base.removesuffix('/api/v1/')}"
                        f"/submissions/{sub['id']}/")
        return exits.OK
    sub = wait_for_submission(api, sub["id"], timeout_s=args.timeout, show=out.status)
    out.result(sub, summary(sub))
    return verdict_exit(sub)


def verdict_exit(sub: dict[str, Any]) -> int:
    if sub["status"] == "failed":
        return exits.LOST
    return exits.OK if sub.get("verdict") == "pass" else exits.FAILED


def cmd_prompt(args: argparse.Namespace, api: Api, out: Out) -> int:
    prompt = api.get("prompt/", problem=args.problem, hardware=args.hardware, backend=args.backend)
    out.result(prompt, prompt["prompt"].rstrip())
    return exits.OK


def cmd_run_create(args: argparse.Namespace, api: Api, out: Out) -> int:
    try:
        sampling = json.loads(args.sampling)
    except ValueError:
        raise Usage("--sampling: JSON text of an object") from None
    run = api.post("runs/", json={"model": args.model, "hardware": args.hardware, "k": args.k,
                                  "provider": args.provider, "backend": args.backend,
                                  "precision": args.precision, "sampling": sampling,
                                  "note": args.note, "link": args.link})
    out.result(run, f"run {run['id']} created: {run['model']} on {run['hardware']}, k={run['k']}")
    return exits.OK


def cmd_run_add(args: argparse.Namespace, api: Api, out: Out) -> int:
    results: list[dict[str, Any]] = []
    for path in args.paths:
        if path.is_dir():
            blob, count = pkbdir.pack(path, keep_top=False)
            if not count:
                raise Usage(f"{path} holds no .py files")
            answer = api.post(f"runs/{args.run}/samples/",
                              files={"archive": (f"{path.name}.tar.gz", blob, "application/gzip")})
        elif path.suffix == ".py":
            if not args.problem:
                raise Usage(f"{path}: name its problem with --problem (or add a directory laid out "
                            "<problem>/<n>.py)")
            answer = api.post(f"runs/{args.run}/samples/", data={"problem": args.problem},
                              files={"source": (path.name, _read(path), "text/x-python")})
        else:
            answer = api.post(f"runs/{args.run}/samples/",
                              files={"archive": (path.name, _read(path), "application/octet-stream")})
        results.extend(answer["files"])
    accepted = sum(r["status"] == "accepted" for r in results)
    lines = [_file_line(r) for r in results]
    lines.append(f"{accepted} accepted, {len(results) - accepted} refused")
    out.result({"run": args.run, "accepted": accepted, "rejected": len(results) - accepted,
                "files": results}, "\n".join(lines))
    return exits.OK if accepted == len(results) else exits.REFUSED


def _file_line(r: dict[str, Any]) -> str:
    if r["status"] == "accepted" and r.get("submission") is None:
        return f"  would add {r['name']} -> {r['problem']} ({r['adapter']})"
    if r["status"] == "accepted":
        return f"  accepted  {r['name']} -> {r['problem']} sample {r['index']} (submission #{r['submission']})"
    return f"  refused   {r['name']}: {r['code']}: {r['message']}"


def _wait_run(api: Api, run: int, timeout_s: float, out: Out) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    last = ""
    while True:
        progress = api.get(f"runs/{run}/progress/")
        line = (f"run {run}: {progress['queued']} queued, {progress['running']} running, "
                f"{progress['finished']} finished, {progress['failed']} lost")
        if line != last:
            out.status(line)
            last = line
        if progress["done"] or not progress["samples"]:
            return progress
        if time.monotonic() > deadline:
            raise WaitTimeout(f"run {run} still has pending samples after {timeout_s:.0f} s")
        time.sleep(3.0)


def cmd_run_status(args: argparse.Namespace, api: Api, out: Out) -> int:
    progress = _wait_run(api, args.run, args.timeout, out) if args.wait else api.get(f"runs/{args.run}/progress/")
    lines = [f"run {args.run}: {progress['samples']} samples · {progress['queued']} queued · "
             f"{progress['running']} running · {progress['finished']} finished "
             f"({progress['correct']} correct) · {progress['failed']} lost · "
             f"{progress['rejected']} refused files · "
             + ("done" if progress["done"] else "pending" if progress["samples"] else "no samples yet")]
    lines += [f"  {p['problem']:<40} queued {p['queued']} running {p['running']} finished "
              f"{p['finished']} correct {p['correct']} lost {p['failed']}" for p in progress["problems"]]
    out.result(progress, "\n".join(lines))
    return exits.OK


def cmd_run_scores(args: argparse.Namespace, api: Api, out: Out) -> int:
    if args.wait:
        _wait_run(api, args.run, args.timeout, out)
    scores = api.get(f"runs/{args.run}/scores/", partial=1 if args.partial else None)
    out.result(scores, scores_text(scores))
    return exits.OK


def _share(value: float, span: dict[str, Any] | None) -> str:
    """``31.0% [22.1, 40.2]``: a share with its 95% interval over the problems (a server from
    before the intervals sends none: the share alone)."""
    if not span:
        return f"{value:.1%}"
    return f"{value:.1%} [{100 * span['low']:.1f}, {100 * span['high']:.1f}]"


def scores_text(s: dict[str, Any]) -> str:
    lines = [f"run {s['run']}: {s['model']} on {s['hardware']}, k={s['k']}"
             + ("" if s["complete"] else f" (partial: {s['pending']} pending)")]
    spans = False
    for key, label in (("run_problems", "over the run's problems"), ("suite", "over the suite")):
        sc = s[key]
        iv = sc.get("intervals") or {}
        spans = spans or bool(iv)
        fast = "  ".join(f"fast_{p} {_share(v, iv.get('fast_p', {}).get(p))}" for p, v in sc["fast_p"].items())
        passk = "  ".join(f"pass@{k} {_share(v, iv.get('pass_at_k', {}).get(k))}" for k, v in sc["pass_at_k"].items())
        fastk = "  ".join(f"fast_1@{k} {_share(v, iv.get('fast_1_at_k', {}).get(k))}"
                          for k, v in sc["fast_1_at_k"].items())
        sep = "\n  " if iv else "  "
        lines.append(f"{label} ({sc['problems']} problems, {sc['correct']} solved):\n  {fast}\n  {passk}{sep}{fastk}")
    if spans:
        lines.append("[low, high]: 95% interval over the problems, in % (docs/runs.md, \"Scores\")")
    return "\n".join(lines)


def cmd_run_import(args: argparse.Namespace, api: Api, out: Out) -> int:
    if not args.directory.is_dir():
        raise Usage(f"{args.directory} is not a directory")
    blob, count = pkbdir.pack(args.directory)
    if not count:
        raise Usage(f"{args.directory} holds no .py files")
    fields = {"hardware": args.hardware, "k": args.k, "note": args.note, "link": args.link,
              "directory": args.directory.resolve().name}
    fields.update({k: v for k, v in (("model", args.model), ("provider", args.provider)) if v})
    answer = api.post("runs/pkb-import/" + ("?dry_run=1" if args.dry_run else ""), data=fields,
                      files={"archive": (f"{args.directory.name}.tar.gz", blob, "application/gzip")})
    if args.dry_run:
        lines = [f"{answer['directory']}: {answer['model']} ({answer['provider']}), {answer['backend']} "
                 f"{answer['precision']} on {answer['hardware']}; nothing stored"]
        lines += [_file_line(r) for r in answer["files"]]
        lines.append(f"{answer['accepted']} would be accepted, {answer['rejected']} refused")
        out.result(answer, "\n".join(lines))
        return exits.OK
    lines = [f"run {answer['id']}: {answer['model']} ({answer['backend']}, {answer['precision']}) on "
             f"{answer['hardware']} from {answer['imported_from']}"]
    lines += [_file_line(r) for r in answer["files"]]
    lines.append(f"{answer['accepted']} accepted, {answer['rejected']} refused")
    out.result(answer, "\n".join(lines))
    return exits.OK


def cmd_agent(args: argparse.Namespace, api: Api, out: Out) -> int:
    if args.turns < 1:
        raise Usage("--turns: at least 1")
    run_id, hardware = args.run, args.hardware
    if hardware is None:  # as submit and prompt: the portal's choice, named
        hardware = (api.get(f"runs/{run_id}/")["hardware"] if run_id is not None else
                    api.get("prompt/", problem=args.problem, backend=args.backend)["hardware"])
        out.status(f"hardware: {hardware} (" + (f"run {run_id}'s" if run_id is not None else
                                                 "chosen by the portal; --hardware to name one") + ")")
    if run_id is None:
        run = api.post("runs/", json={"model": args.model, "provider": args.provider,
                                      "hardware": hardware, "k": args.turns,
                                      "backend": args.backend,
                                      "note": f"pkb agent loop on {args.problem}, {args.turns} turns; "
                                              f"model command: {args.model_command}"})
        run_id = run["id"]
    result = agent.run_agent(api, run_id=run_id, problem=args.problem, hardware=hardware,
                             backend=args.backend, command=args.model_command, turns=args.turns,
                             wait_s=args.wait_timeout, model_timeout_s=args.model_timeout,
                             show=out.status)
    data = {"run": result.run, "passed": result.passed, "turns": result.turns}
    lines = [f"run {result.run}: " + ("passed" if result.passed else "no turn passed")]
    lines += [f"  turn {t['turn']}: {t.get('verdict') or t['status']}"
              + (f" ({t['failure_class'] or t['code']})" if t.get("failure_class") or t.get("code") else "")
              + (f" speedup {t['speedup']:.3f}x" if t.get("speedup") else "") for t in result.turns]
    out.result(data, "\n".join(lines))
    return result.exit_code


HANDLERS: dict[str, Callable[[argparse.Namespace, Api, Out], int]] = {
    "login": cmd_login, "submit": cmd_submit, "prompt": cmd_prompt, "agent": cmd_agent,
    "run create": cmd_run_create, "run add": cmd_run_add, "run status": cmd_run_status,
    "run scores": cmd_run_scores, "run import": cmd_run_import,
}


if __name__ == "__main__":
    sys.exit(main())
