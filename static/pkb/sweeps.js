/* Message-size sweep charts (docs/sweeps.md): data from <script type="application/json"> blocks. */
(function () {
  "use strict";
  const data = (id) => { const el = document.getElementById(id); return el ? JSON.parse(el.textContent) : null; };
  const bytes = (n) => {
    for (const [unit, scale] of [["GiB", 2 ** 30], ["MiB", 2 ** 20], ["KiB", 2 ** 10]]) {
      if (n >= scale) { const v = n / scale; return (Number.isInteger(v) ? v : v.toPrecision(3)) + " " + unit; }
    }
    return n + " B";
  };
  const K = window.PKBChart;
  // A log x axis of message sizes, ticked at sizes that ran (as many as fit the chart's width:
  // 17 labels from 4 KiB to 256 MiB overlapped) and labelled in binary units.
  const sizeAxis = (xs, el) => {
    const ticks = K.thin(Array.from(new Set(xs)).sort((a, b) => a - b), el, 70);
    return { title: "message size (bytes, log scale; nccl-tests' size)", type: "log", tickvals: ticks, ticktext: ticks.map(bytes) };
  };
  const layout = (id, title, xs, yaxis, extra) => Object.assign({
    title: title, xaxis: sizeAxis(xs, document.getElementById(id)), yaxis: yaxis,
  }, extra || {});
  const plot = (id, traces, lay) => K.plot(id, traces, lay);
  const line = (name, s, style) => Object.assign({ type: "scatter", mode: "lines+markers", name: name, x: s.x, y: s.y,
    customdata: s.x.map(bytes), hovertemplate: name + "<br>%{customdata}: %{y:.3g} GB/s<extra></extra>" }, style || {});
  const referenceName = (device) => "reference (" + (device === "cuda" ? "NCCL" : "gloo") + ")";

  // While the worker sweeps (after the evaluation is finished), reload when the sweep is done.
  function waitForSweep() {
    const el = document.getElementById("sweep-status");
    if (!el || (el.dataset.status !== "running" && el.dataset.status !== "waiting")) return;
    const poll = () => fetch(el.dataset.statusUrl, { headers: { Accept: "application/json" } }).then((r) => r.json())
      .then((s) => { if (s.done && s.sweep_status !== el.dataset.status) window.location.reload(); else setTimeout(poll, 5000); })
      .catch(() => setTimeout(poll, 10000));
    setTimeout(poll, 5000);
  }

  function submission() {
    waitForSweep();
    const d = data("data-sweep");
    if (!d) return;
    const xs = d.candidate.x.concat(d.reference.x, d.roofline.x, d.failed.map((f) => f.x));
    const traces = [
      line("candidate", d.candidate, { line: { color: "#3b5bdb", width: 3 } }),
      line(referenceName(d.device), d.reference, { line: { color: "#868e96" } }),
    ];
    if (d.roofline.x.length) traces.push(line("roofline", d.roofline, { mode: "lines", line: { color: "#2b8a3e", dash: "dash" } }));
    // Bandwidth spans decades from 4 KiB to 256 MiB: a log axis keeps the small sizes readable.
    // Failed sizes have no bandwidth: mark them at the bottom of the curves.
    const floor = Math.min(...traces.concat(d.roofline.x.length ? [d.roofline] : []).flatMap((t) => t.y).filter((v) => v > 0), Infinity);
    if (d.failed.length) traces.push({ type: "scatter", mode: "markers", name: "failed at this size", x: d.failed.map((f) => f.x),
      y: d.failed.map(() => (Number.isFinite(floor) ? floor : 1)), marker: { symbol: "x", size: 12, color: "#c92a2a" },
      customdata: d.failed.map((f) => bytes(f.x) + ": " + f.failure_class), hovertemplate: "%{customdata}<extra></extra>" });
    plot("chart-sweep-busbw", traces, layout("chart-sweep-busbw", "Bus bandwidth per message size: candidate, " + referenceName(d.device) + " and roofline, " +
      d.world_size + " ranks", xs, K.logAxis("bus bandwidth (GB/s, log scale)", traces.flatMap((t) => t.y))));
    const s = d.speedup;
    plot("chart-sweep-speedup", [{
      type: "scatter", mode: "lines+markers", name: "speedup (95% interval)", x: s.x, y: s.y, line: { color: "#3b5bdb" },
      error_y: { type: "data", symmetric: false, array: s.y.map((v, i) => s.high[i] - v), arrayminus: s.y.map((v, i) => v - s.low[i]) },
      customdata: s.x.map((x, i) => [bytes(x), s.low[i], s.high[i]]),
      hovertemplate: "%{customdata[0]}: %{y:.3f}x (%{customdata[1]:.3f}-%{customdata[2]:.3f})<extra></extra>",
    }], layout("chart-sweep-speedup", "Speedup per message size (reference time / candidate time), with 95% intervals", s.x.length ? s.x : xs,
      { title: "speedup (x, reference / candidate)", rangemode: "tozero" },
      { shapes: [{ type: "line", xref: "paper", x0: 0, x1: 1, y0: 1, y1: 1, line: { dash: "dot", color: "#888" } }] }));
  }

  function problem() {
    const d = data("data-problem-sweep");
    if (!d) return;
    const palette = ["#3b5bdb", "#e8590c", "#7048e8", "#0c8599", "#d6336c"];
    const traces = [];
    if (d.reference && d.reference.x.length) traces.push(line(referenceName(d.device), d.reference, { line: { color: "#868e96", width: 3 } }));
    if (d.probe) traces.push(line(d.probe.label, d.probe, { line: { color: "#adb5bd", dash: "dot" } }));
    if (d.roofline && d.roofline.x.length) traces.push(line("roofline (" + d.hardware + ")", d.roofline, { mode: "lines", line: { color: "#2b8a3e", dash: "dash" } }));
    (d.candidates || []).forEach((c, i) => traces.push(line(c.label, c, { line: { color: palette[i % palette.length] } })));
    const xs = traces.flatMap((t) => t.x);
    plot("chart-problem-sweep", traces, layout("chart-problem-sweep", "Bus bandwidth per message size on " + d.hardware + " (" + d.world_size +
      " ranks): reference, roofline and the best submissions' sweeps", xs, K.logAxis("bus bandwidth (GB/s, log scale)", traces.flatMap((t) => t.y))));
  }

  window.PKBSweeps = { submission, problem };
})();
