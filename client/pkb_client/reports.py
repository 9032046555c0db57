"""Reading a submission as the portal returns it: a short summary for the terminal and the
feedback an agent's next turn gets."""

from __future__ import annotations

from typing import Any

PENDING = ("queued", "compiling", "running")
TRACE_CHARS = 4000


def speedup_text(sub: dict[str, Any]) -> str:
    if sub.get("speedup") is None:
        return ""
    text = f"{sub['speedup']:.3f}x"
    if sub.get("speedup_low") is not None and sub.get("speedup_high") is not None:
        text += f" (95% interval {sub['speedup_low']:.3f}-{sub['speedup_high']:.3f})"
    return text


def status_line(sub: dict[str, Any]) -> str:
    parts = [f"#{sub['id']} {sub['status']}"]
    if sub.get("queue_position"):
        parts.append(f"position {sub['queue_position']} in queue")
    if sub.get("progress") and sub["status"] in PENDING:
        parts.append(sub["progress"])
    return " · ".join(parts)


def summary(sub: dict[str, Any]) -> str:
    lines = [f"submission #{sub['id']}: {sub['problem']} on {sub['hardware']} "
             f"({sub['world_size']} ranks, {sub['size']}) · status {sub['status']}"]
    if sub["status"] == "failed":
        lines.append(f"lost by the infrastructure: {sub.get('status_reason') or 'no reason given'}")
        return "\n".join(lines)
    if sub.get("verdict"):
        lines.append(f"verdict: {sub['verdict'].upper()}" +
                     (f" ({sub['failure_class']})" if sub.get("failure_class") else ""))
    failure = (sub.get("report") or {}).get("failure") or {}
    if failure.get("message"):
        lines.append(f"message: {failure['message']}")
    for key in ("compiler_output", "traceback"):
        if failure.get(key):
            lines.append(f"--- {key} ---\n{failure[key].rstrip()[-TRACE_CHARS:]}")
    if sub.get("candidate_ms") is not None:
        lines.append(f"reference {sub['reference_ms']:.4f} ms · candidate {sub['candidate_ms']:.4f} ms"
                     f" · speedup {speedup_text(sub)}")
    if sub.get("roofline_fraction") is not None:
        lines.append(f"roofline fraction {sub['roofline_fraction']:.1%}")
    return "\n".join(lines)


def feedback(sub: dict[str, Any] | None, turn: int, refused: dict[str, Any] | None = None) -> str:
    """What the model is told about its previous turn: failure class, rank, message, traceback
    or compiler log, timing."""
    head = f"## Result of your previous attempt (turn {turn})\n"
    if refused is not None:
        return (head + f"The portal refused the file before evaluating it: {refused.get('code')}: "
                f"{refused.get('message')}\nPrint one complete Python file that defines `solution`.\n")
    assert sub is not None
    if sub["status"] == "failed":
        return head + ("The evaluation was lost by the infrastructure (not your kernel's fault): "
                       f"{sub.get('status_reason')}\nSubmit the same or a better solution.\n")
    report = sub.get("report") or {}
    failure = report.get("failure") or {}
    lines = [head, f"Verdict: {sub.get('verdict')}" +
             (f", failure class `{sub['failure_class']}`" if sub.get("failure_class") else "")]
    where = [f"{k} {failure[k]}" for k in ("rank", "trial", "output") if failure.get(k) is not None]
    if where:
        lines.append("Where: " + ", ".join(where))
    if failure.get("message"):
        lines.append(f"Message: {failure['message']}")
    for key, label in (("compiler_output", "Compiler output"), ("traceback", "Traceback")):
        if failure.get(key):
            lines.append(f"{label}:\n```\n{failure[key].rstrip()[-TRACE_CHARS:]}\n```")
    if sub.get("candidate_ms") is not None:
        lines.append(f"Timing: reference {sub['reference_ms']:.4f} ms, yours {sub['candidate_ms']:.4f} "
                     f"ms, speedup {speedup_text(sub)}.")
    if sub.get("verdict") == "pass":
        lines.append("It is correct. Make it faster if you can; keep it correct.")
    else:
        lines.append("Fix it. Print one complete Python file that defines `solution`.")
    return "\n".join(lines) + "\n"
