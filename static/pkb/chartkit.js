/* What every PKB chart shares (charts.js, sweeps.js): the layout, titles that fit their chart,
   a legend that never covers an axis title, and axes scaled to the data they show. */
(function () {
  "use strict";
  const FONT_PX = 15, AXIS_FONT_PX = 14;

  // Break text at spaces into lines of at most `chars` characters (plotly does not wrap titles:
  // on a phone a long one ran off the chart, and a long y title ran into the chart's title).
  const wrap = (text, chars) => {
    if (!text || chars < 8 || text.length <= chars) return text;
    const lines = [];
    let line = "";
    for (const word of text.split(" ")) {
      if (line && (line + " " + word).length > chars) { lines.push(line); line = word; } else line = line ? line + " " + word : word;
    }
    if (line) lines.push(line);
    return lines.join("<br>");
  };
  const textOf = (title) => (title && typeof title === "object" ? title.text : title) || "";
  // About 0.55 em per character of the chart font: a safe upper bound for the titles here.
  const charsFor = (px, fontPx) => Math.floor(px / (0.55 * fontPx));

  /* Layout for a chart in `el`: titles wrapped to its size, the legend in a row below the x
     axis title (container-referenced, so plotly grows the bottom margin for both instead of
     drawing one over the other), automargin for long category names. */
  const layout = (el, extra) => {
    const width = el.clientWidth || 600, height = el.clientHeight || 360;
    const lay = Object.assign({ margin: { t: 60, r: 20, b: 40, l: 60 } }, extra || {});
    lay.legend = Object.assign({ orientation: "h", x: 0, xanchor: "left", yref: "container", y: 0, yanchor: "bottom" }, lay.legend || {});
    const title = textOf(lay.title);
    if (title) {
      const wrapped = wrap(title, charsFor(width - 30, FONT_PX));
      // Above the plot area (paper-referenced, anchored at its bottom), so automargin makes room
      // for every line: anchored at the container's top, plotly shifted a wrapped title up by its
      // extra lines and a phone showed only the last one.
      lay.title = Object.assign({ x: 0.01, xanchor: "left", yref: "paper", y: 1, yanchor: "bottom", pad: { b: 10 }, automargin: true,
                                  font: { size: FONT_PX } }, typeof lay.title === "object" ? lay.title : {}, { text: wrapped });
    }
    for (const key of ["xaxis", "yaxis"]) {
      const axis = Object.assign({ automargin: true }, lay[key] || {});
      const text = textOf(axis.title);
      // plotly.js 3+ shows no axis title given as a bare string: it wants { text }.
      if (text) axis.title = Object.assign({}, typeof axis.title === "object" ? axis.title : {},
        { text: wrap(text, charsFor(key === "yaxis" ? height - 110 : width - 80, AXIS_FONT_PX)), font: { size: AXIS_FONT_PX } });
      lay[key] = axis;
    }
    return lay;
  };

  const config = { responsive: true, displaylogo: false };
  const plot = (id, traces, lay) => {
    const el = document.getElementById(id);
    if (!el || !window.Plotly) return null;
    const drawn = layout(el, lay);
    Plotly.newPlot(el, traces, drawn, config);
    // The y title was wrapped for a guess at the plot's height; a title of three or four lines
    // (a phone) leaves less, and the y title then ran up into it: where they meet, wrap it again
    // to the plot area plotly drew.
    const text = textOf(lay && lay.yaxis && lay.yaxis.title), size = el._fullLayout && el._fullLayout._size;
    const box = (sel) => { const n = el.querySelector(sel); return n ? n.getBoundingClientRect() : null; };
    const y = box(".g-ytitle"), t = box(".g-gtitle");
    if (text && size && size.h && y && t && y.height && t.height && y.top < t.bottom && t.top < y.bottom &&
        y.left < t.right && t.left < y.right) {
      const rewrapped = wrap(text, charsFor(size.h, AXIS_FONT_PX));
      if (rewrapped !== drawn.yaxis.title.text) Plotly.relayout(el, { "yaxis.title.text": rewrapped });
    }
    return el;
  };

  // A share axis (0 to 1 shown as %) from zero to a little above the largest value: on a fixed
  // 0-100% axis the 0.7-2% bars of a hard board were invisible.
  // `headroom`: how far above the largest value the axis ends (room for the bars' labels).
  const shareAxis = (title, values, headroom) => {
    const top = Math.max(0, ...values.filter((v) => typeof v === "number"));
    const upper = top > 0 ? Math.min(1, top * (headroom || 1.15)) : 0.05;
    return { title: title, range: [0, upper], tickformat: upper < 0.1 ? ".1%" : ".0%", rangemode: "tozero" };
  };

  // A count axis with whole-number ticks only (no "0.5 attempts").
  const countAxis = (title, top) => {
    const steps = [1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000, 2000, 5000, 10000];
    const dtick = steps.find((s) => top / s <= 8) || Math.ceil(top / 8);
    return { title: title, tick0: 0, dtick: dtick, tickformat: "d", rangemode: "tozero" };
  };

  // A log axis labelled at powers of ten once the data span two decades or more (plotly's own
  // 2 and 5 labels between them cluttered the sweep charts); narrower spans keep plotly's ticks.
  const logAxis = (title, values) => {
    const positive = values.filter((v) => typeof v === "number" && v > 0);
    const axis = { title: title, type: "log" };
    if (positive.length && Math.log10(Math.max(...positive) / Math.min(...positive)) >= 2) axis.dtick = 1;
    return axis;
  };

  // At most one tick label per `px` pixels of the chart's width, for a log axis of positive
  // `ticks` (sorted), evenly spaced: each kept tick at least one step past the one before, the
  // step being the larger of an even share of the range and the ticks' median gap. Every k-th
  // tick was uneven where two series' sizes meet (the probe's 4x steps, then a sweep's 2x steps
  // crowded at the right of the problem page's chart).
  const thin = (ticks, el, px) => {
    if (ticks.length < 3) return ticks;
    const room = Math.max(2, Math.floor(((el && el.clientWidth) || 600) / (px || 70)));
    const gaps = ticks.slice(1).map((t, i) => Math.log(t / ticks[i])).sort((a, b) => a - b);
    const step = Math.max(Math.log(ticks[ticks.length - 1] / ticks[0]) / (room - 1), gaps[Math.floor(gaps.length / 2)]);
    const kept = [];
    for (const t of ticks) if (!kept.length || Math.log(t / kept[kept.length - 1]) >= step * 0.999) kept.push(t);
    return kept;
  };

  window.PKBChart = { layout, plot, wrap, shareAxis, countAxis, logAxis, thin };
})();
