/* Charts for PKB pages: data comes from <script type="application/json"> blocks. */
(function () {
  "use strict";
  const K = window.PKBChart;
  const data = (id) => { const el = document.getElementById(id); return el ? JSON.parse(el.textContent) : null; };
  // Every chart has a title: the one given, else the element's data-title, else its section's heading.
  const titleOf = (el) => {
    if (el.dataset.title) return el.dataset.title;
    const box = el.closest("section, div");
    const heading = box ? box.querySelector("h2, h3") : null;
    return heading ? heading.textContent.trim() : "";
  };
  const plot = (id, traces, lay) => {
    const el = document.getElementById(id);
    if (!el || !window.Plotly) return;
    const full = Object.assign({}, lay || {});
    if (!full.title) full.title = titleOf(el);
    K.plot(id, traces, full);
  };
  const values = (series) => Object.values(series).flat();

  function hardware() {
    const heat = data("data-heatmap");
    // The colour scale starts at zero: a scale from the smallest value makes a 5% gap look total.
    const top = heat ? Math.max(...heat.z.flat().filter((v) => typeof v === "number")) : 0;
    if (heat) plot("chart-heatmap", [{ type: "heatmap", z: heat.z, x: heat.x, y: heat.y, colorscale: "Viridis", zauto: false, zmin: 0, zmax: top,
      colorbar: { title: { text: "GB/s" } }, hovertemplate: "%{y} → %{x}: %{z:.1f} GB/s<extra></extra>" }],
      { title: "Measured peer bandwidth, one direction (GB/s; colour scale from 0)", xaxis: { title: "to GPU" }, yaxis: { title: "from GPU", autorange: "reversed" } });
    const curves = data("data-curves");
    if (curves) plot("chart-curves", Object.entries(curves.series).map(([op, s]) => ({ type: "scatter", mode: "lines+markers", name: op, x: s.x, y: s.y })),
      { title: (curves.backend || "").toUpperCase() + " bus bandwidth by message size", xaxis: { title: "message size (bytes, log scale)", type: "log" }, yaxis: { title: "bus bandwidth (GB/s)", rangemode: "tozero" } });
  }

  function models() {
    const t = data("data-models");
    if (!t) return;
    // On CPU (a smoke test) the bars are drawn but rank nothing, and the title says so.
    const box = document.getElementById("chart-fastp");
    const unranked = box && box.dataset.rankedBy === "correctness" ? " (not ranked: CPU smoke test)" : "";
    // fast_p's columns, not their intervals' ends (fast_1_low, fast_1_high: the table shows them)
    const keys = t.columns.map((c) => c.key).filter((k) => k.startsWith("fast_") && !k.includes("_at_") && !/_(low|high)$/.test(k));
    const y = t.rows.flatMap((r) => keys.map((k) => r[k]));
    // Each bar carries its value: a hard board's bars are a few percent tall. Plotly shrinks a
    // label to its bar's width: where bars are narrow (three models on a phone: about 14 px) the
    // label stands upright at a readable size instead of a 4 px speck.
    const bar = box ? (box.clientWidth - 90) / Math.max(1, keys.length) * 0.8 / Math.max(1, t.rows.length) : 100;
    const upright = bar < 36;
    plot("chart-fastp", t.rows.map((r) => ({ type: "bar", name: r.model, x: keys.map((k) => k.replace("fast_", "p=").replace("_", ".")), y: keys.map((k) => r[k]),
      text: keys.map((k) => (r[k] ? (100 * r[k]).toFixed(1) + "%" : "")), textposition: "outside", cliponaxis: false,
      textangle: upright ? -90 : 0, textfont: { size: 11 }, constraintext: upright ? "none" : "both" })),
      { title: "fast_p: share of problems solved faster than p × the reference" + unranked, barmode: "group", xaxis: { title: "speedup threshold p (x)" },
        yaxis: K.shareAxis("share of problems (%)", y, upright ? 1.35 : 1.15) });
  }

  function compare() {
    const d = data("data-compare");
    if (!d) return;
    // On CPU (a smoke test) the speed charts are drawn but rank nothing, and their titles say so.
    const unranked = d.ranked_by === "correctness" ? " (not ranked: CPU smoke test)" : "";
    // Each curve in its colour, with markers at the board's thresholds carrying error bars: the
    // 95% interval of fast_p over the problems (Wilson's).
    const colours = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"];
    const spans = d.fast_p_intervals || {};
    const curves = [];
    Object.entries(d.fast_p.series).forEach(([m, y], i) => {
      const colour = colours[i % colours.length];
      curves.push({ type: "scatter", mode: "lines", name: m, legendgroup: m, x: d.fast_p.p, y: y, line: { shape: "hv", color: colour } });
      const iv = spans[m];
      if (iv && iv.low.every((v) => v != null)) curves.push({ type: "scatter", mode: "markers", name: m + " (95% interval)", legendgroup: m, showlegend: false,
        x: iv.p, y: iv.value, marker: { color: colour, size: 6 },
        error_y: { type: "data", symmetric: false, array: iv.high.map((h, j) => h - iv.value[j]), arrayminus: iv.low.map((l, j) => iv.value[j] - l), color: colour, thickness: 1.5, width: 4 },
        customdata: iv.low.map((l, j) => [100 * l, 100 * iv.high[j]]),
        hovertemplate: "fast_%{x}: %{y:.1%} (95% interval %{customdata[0]:.1f}–%{customdata[1]:.1f}%)<extra>" + m + "</extra>" });
    });
    const tops = Object.values(spans).flatMap((iv) => iv.high.filter((v) => v != null));
    plot("chart-fastp", curves,
      { title: "fast_p curves, with 95% intervals at p = 0, 0.5, 1, 1.5, 2, 3" + unranked, xaxis: { title: "speedup threshold p (x)" }, yaxis: K.shareAxis("fast_p (share, %)", values(d.fast_p.series).concat(tops), 1.05) });
    // Paired differences (first model minus second, in points) with their 95% intervals: a bar
    // that crosses the dotted 0 line is not distinguishable on these problems.
    const diffs = d.differences || [];
    const box = document.getElementById("chart-differences");
    if (box && diffs.length) {
      const keys = Object.keys(diffs[0].metrics);
      const label = (k) => diffs[0].metrics[k].label || k;
      box.style.height = Math.max(360, 200 + 18 * keys.length * Math.min(diffs.length, 6)) + "px";
      // scattermode "group": each pair's point beside the others' within a metric's row, not on them
      plot("chart-differences", diffs.map((pair, i) => ({ type: "scatter", mode: "markers", orientation: "h", name: pair.a + " − " + pair.b,
        y: keys.map(label), x: keys.map((k) => 100 * pair.metrics[k].difference), marker: { size: 8, color: colours[i % colours.length],
          symbol: keys.map((k) => (pair.metrics[k].distinguishable ? "circle" : "circle-open")) },
        error_x: { type: "data", symmetric: false, color: colours[i % colours.length],
          array: keys.map((k) => 100 * (pair.metrics[k].high - pair.metrics[k].difference)),
          arrayminus: keys.map((k) => 100 * (pair.metrics[k].difference - pair.metrics[k].low)) },
        customdata: keys.map((k) => [100 * pair.metrics[k].low, 100 * pair.metrics[k].high, pair.metrics[k].words]),
        hovertemplate: "%{y}: %{x:+.1f} points (95% interval %{customdata[0]:.1f} to %{customdata[1]:.1f}): %{customdata[2]}<extra>" + pair.a + " − " + pair.b + "</extra>" })),
        { title: "Paired differences, first model minus second (points; bars: 95% paired bootstrap interval over " + diffs[0].problems + " problems; open: not distinguishable)" + unranked,
          yaxis: { title: "metric", categoryarray: keys.map(label).reverse(), categoryorder: "array", dtick: 1 },
          xaxis: { title: "difference (percentage points)", zeroline: false }, scattermode: "group", scattergap: 0.4,
          shapes: [{ type: "line", yref: "paper", y0: 0, y1: 1, x0: 0, x1: 0, line: { dash: "dot", color: "#888" } }] });
    }
    // Only problems some model solved: a point-less axis of every problem squeezes the plot.
    const solved = d.problems.filter((p) => Object.values(d.speedups).some((s) => s[p] != null));
    // Error bars: each best speedup's interval, where its report has one (schema 1.3 on).
    const bars = (m, s) => {
      const iv = (d.intervals || {})[m] || {};
      if (!Object.keys(s).some((p) => iv[p])) return undefined;
      return { type: "data", symmetric: false, array: Object.keys(s).map((p) => (iv[p] ? iv[p][1] - s[p] : 0)),
               arrayminus: Object.keys(s).map((p) => (iv[p] ? s[p] - iv[p][0] : 0)) };
    };
    // Problems down the side, read across: rotated names under a half-width chart took most of
    // its height and left the points a strip 40 px tall. The chart grows with the problems.
    const scatter = document.getElementById("chart-scatter");
    if (scatter) scatter.style.height = Math.max(360, 170 + 22 * solved.length) + "px";
    plot("chart-scatter", Object.entries(d.speedups).map(([m, s]) => ({ type: "scatter", mode: "markers", name: m, y: Object.keys(s), x: Object.values(s), marker: { size: 9 },
      error_x: bars(m, s), hovertemplate: "%{y}: %{x:.3f}x<extra>" + m + "</extra>" })),
      { title: "Best correct speedup per problem (bars: its interval)" + unranked, yaxis: { title: "problem (solved by at least one model)", categoryarray: solved.slice().reverse(), categoryorder: "array", dtick: 1 },
        xaxis: K.logAxis("best correct speedup (x, log scale)", values(d.speedups).concat([1])),
        shapes: [{ type: "line", yref: "paper", y0: 0, y1: 1, x0: 1, x1: 1, line: { dash: "dot", color: "#888" } }] });
    // All zero: say so on the chart instead of leaving an empty grid to puzzle over.
    const shares = values(d.categories).flatMap(Object.values);
    const none = !shares.some((v) => v > 0) ? [{ text: "No model is faster than the reference in any category", xref: "paper", yref: "paper",
      x: 0.5, y: 0.5, showarrow: false, font: { size: 14, color: "#6b7280" } }] : [];
    plot("chart-categories", Object.entries(d.categories).map(([m, c]) => ({ type: "bar", name: m, x: Object.keys(c), y: Object.values(c) })),
      { title: "Faster than the reference, by category" + unranked, barmode: "group", xaxis: { title: "category" }, yaxis: K.shareAxis("share of the category (%)", shares),
        annotations: none });
    const outcomes = Array.from(new Set(Object.values(d.failures).flatMap((f) => Object.keys(f))));
    const most = Math.max(1, ...Object.values(d.failures).map((f) => Object.values(f).reduce((a, b) => a + b, 0)));
    plot("chart-failures", outcomes.map((o) => ({ type: "bar", name: o, x: Object.keys(d.failures), y: Object.values(d.failures).map((f) => f[o] || 0) })),
      { title: "Outcome of every attempt", barmode: "stack", showlegend: true, xaxis: { title: "model" }, yaxis: K.countAxis("attempts (count)", most) });
  }

  // Markers per round, a line at their median (the speedup) and a band for its interval.
  function roundTraces(r) {
    const x0 = 0.5, x1 = r.round.length + 0.5, traces = [];
    const pct = r.level != null ? Math.round(r.level * 100) + "% " : "";
    if (r.low != null && r.high != null) traces.push({ type: "scatter", mode: "lines", name: pct + "interval " + r.low.toFixed(2) + "–" + r.high.toFixed(2) + "x",
      x: [x0, x1, x1, x0, x0], y: [r.low, r.low, r.high, r.high, r.low], fill: "toself", fillcolor: "rgba(59,91,219,0.15)", line: { width: 0 }, hoverinfo: "skip" });
    if (r.median != null) traces.push({ type: "scatter", mode: "lines", name: "median " + r.median.toFixed(2) + "x",
      x: [x0, x1], y: [r.median, r.median], line: { color: "#3b5bdb", width: 2 }, hoverinfo: "skip" });
    traces.push({ type: "scatter", mode: "markers", name: "ratio of the round", x: r.round, y: r.ratio, marker: { size: 7, color: "#1d2330" },
      customdata: r.round.map((_, i) => [r.reference_ms[i], r.candidate_ms[i]]),
      hovertemplate: "round %{x}: %{y:.3f}x<br>reference %{customdata[0]:.4f} ms, candidate %{customdata[1]:.4f} ms<extra></extra>" });
    return traces;
  }

  function submission() {
    const ranks = data("data-ranks");
    if (ranks) plot("chart-ranks", [
      { type: "bar", name: "reference", x: ranks.ranks.map((r) => "rank " + r), y: ranks.reference },
      { type: "bar", name: "candidate", x: ranks.ranks.map((r) => "rank " + r), y: ranks.candidate }],
      { title: "Median time per rank", barmode: "group", xaxis: { title: "rank" }, yaxis: { title: "median time (ms)", rangemode: "tozero" } });
    const rounds = data("data-rounds");
    if (rounds) plot("chart-rounds", roundTraces(rounds), {
      title: { text: "Speedup in each alternating round (reference ms / candidate ms)" },
      xaxis: { title: "round (in the order run)", dtick: rounds.round.length > 30 ? undefined : 1 },
      yaxis: { title: "speedup (x, reference / candidate)" } });
    const box = document.getElementById("status-box");
    if (!box || box.dataset.done === "1") return;
    const poll = () => fetch(box.dataset.statusUrl, { headers: { Accept: "application/json" } })
      .then((r) => r.json()).then((s) => {
        document.getElementById("status").textContent = s.status;
        document.getElementById("queue").textContent = s.queue_position ? "· position " + s.queue_position + " in the queue" : "";
        document.getElementById("progress").textContent = s.progress ? "· " + s.progress : "";
        if (s.done) window.location.reload(); else setTimeout(poll, 1500);
      }).catch(() => setTimeout(poll, 5000));
    setTimeout(poll, 1000);
  }

  // A run's fast_p curve (thick) beside other runs on the same hardware.
  function runCurves() {
    const d = data("data-run-curves");
    if (!d) return;
    plot("chart-run-fastp", Object.entries(d.series).map(([name, y]) => ({ type: "scatter", mode: "lines", name: name, x: d.p, y: y,
      line: { shape: "hv", width: name === d.current ? 4 : 1.5 } })),
      { xaxis: { title: "p (speedup threshold)" }, yaxis: K.shareAxis("fast_p over the run's problems", values(d.series)) });
  }

  // While a run has pending samples, reload its page when another sample finishes.
  function followRun() {
    const box = document.getElementById("run-progress");
    if (!box || box.dataset.done === "1" || !box.dataset.progressUrl) return;
    const seen = Number(box.dataset.finished || 0);
    const poll = () => fetch(box.dataset.progressUrl, { headers: { Accept: "application/json" } })
      .then((r) => (r.ok ? r.json() : null))
      .then((p) => { if (p && (p.done || p.finished + p.failed !== seen)) window.location.reload(); else setTimeout(poll, 5000); })
      .catch(() => setTimeout(poll, 15000));
    setTimeout(poll, 5000);
  }

  window.PKB = { hardware, models, compare, submission, runCurves, followRun };
})();
