/* MedPRESS report.html: charts and the transcript browser.
 *
 * Reads the payload of medpress.reports.html_data from <script id="medpress-data">. Model and
 * user text is only ever put in the page as text nodes (el() below): no innerHTML anywhere.
 * State (tab, filters, page, open dialogue, comparison) lives in location.hash, so a link
 * restores the view.
 */
(function () {
  "use strict";

  var P = JSON.parse(document.getElementById("medpress-data").textContent);
  var PAGE = 50;
  var COLORS = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#000000",
    "#F0E442"];
  var DASHES = ["solid", "dash", "dashdot", "dot"];
  var SHORT = { SAFE: "S", UNSAFE: "U", AMBIGUOUS: "A" };
  // Labels come from the data (a suite has its own); those without a colour of their own get
  // the neutral "other" chip. WORST is the most severe label, whose first turn is the "flip".
  var COLORED = { SAFE: true, UNSAFE: true, AMBIGUOUS: true, unjudged: true };
  var WORST = P.worst || "UNSAFE";
  var DEFAULTS = { tab: "results", run: "", cond: "", fam: "", area: "", topic: "", urg: "",
    lab: "", lt: "", mode: "", flip: "", dis: "", unj: "", q: "", page: "1", open: "",
    cmp: "" };
  var FILTERS = ["run", "cond", "fam", "area", "topic", "urg", "lab", "lt", "mode", "flip",
    "dis", "unj", "q"];
  var state = Object.assign({}, DEFAULTS);
  var renderSeq = 0;

  /* -- DOM helpers: text is always a text node ------------------------------------------- */
  function el(tag, props) {
    var e = document.createElement(tag);
    if (props) {
      Object.keys(props).forEach(function (k) {
        var v = props[k];
        if (v === null || v === undefined || v === false) return;
        if (k === "class") e.className = v;
        else if (k === "testid") e.setAttribute("data-testid", v);
        else if (k === "onclick") e.addEventListener("click", v);
        else e.setAttribute(k, v === true ? "" : String(v));
      });
    }
    for (var i = 2; i < arguments.length; i++) append(e, arguments[i]);
    return e;
  }
  function append(parent, child) {
    if (child === null || child === undefined || child === false) return;
    if (Array.isArray(child)) { child.forEach(function (c) { append(parent, c); }); return; }
    parent.appendChild(typeof child === "object" ? child : document.createTextNode(String(child)));
  }
  function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); }
  function chipClass(lab) { return "chip " + (COLORED[lab] ? lab : "other"); }
  function short(lab) {  // UNHELPFUL_REFUSAL -> UR
    return SHORT[lab] || lab.split("_").map(function (w) { return w.charAt(0); }).join("");
  }
  function $(id) { return document.getElementById(id); }

  /* -- units, with what the filters need precomputed -------------------------------------- */
  var units = P.units;
  var byKey = {};
  var byDialogue = {};
  var maxTurn = 0;
  units.forEach(function (u) {
    var card = P.dialogues[u.d] || { turns: [] };
    u.key = u.r + "|" + u.c + "|" + u.k + "|" + u.d;
    u.card = card;
    u.byTurn = {};
    u.modes = {};
    u.unj = u.t.length < card.turns.length;
    u.t.forEach(function (t) {
      u.byTurn[t.n] = t;
      if (t.l === null) u.unj = true;
      if (t.m) u.modes[t.m] = true;
      if (t.n > maxTurn) maxTurn = t.n;
    });
    if (card.turns.length > maxTurn) maxTurn = card.turns.length;
    byKey[u.key] = u;
    (byDialogue[u.d] = byDialogue[u.d] || []).push(u);
  });
  function searchText(u) {
    if (u.txt === undefined) {
      var parts = [];
      u.t.forEach(function (t) { parts.push(userText(u, t), t.a); });
      u.txt = parts.join("\n").toLowerCase();
    }
    return u.txt;
  }
  function userText(u, t) {
    if (t.u !== undefined) return t.u;
    var c = u.card.turns[t.n - 1];
    return c ? c.u : "";
  }
  function runName(i) { return P.runs[i] ? P.runs[i].name : "run " + i; }
  function unitTitle(u) {
    return runName(u.r) + " · " + u.c + (u.k ? " · repeat " + u.k : "");
  }

  /* -- filtering -------------------------------------------------------------------------- */
  function matches(u, q) {
    var s = state;
    if (s.run !== "" && u.r !== +s.run) return false;
    if (s.cond && u.c !== s.cond) return false;
    if (s.fam && u.card.family !== s.fam) return false;
    if (s.area && u.card.area !== s.area) return false;
    if (s.topic && u.card.topic !== s.topic) return false;
    if (s.urg && u.card.urgency !== s.urg) return false;
    if (s.lab) {
      if (s.lt) {
        var t = u.byTurn[s.lt];
        if (s.lab === "unjudged") { if (t && t.l !== null) return false; }
        else if (!t || t.l !== s.lab) return false;
      } else if (s.lab === "unjudged") {
        if (!u.unj) return false;
      } else if (!u.t.some(function (x) { return x.l === s.lab; })) return false;
    }
    if (s.mode && !u.modes[s.mode]) return false;
    if (s.flip === "none" ? u.f !== null : s.flip && u.f !== +s.flip) return false;
    if (s.dis && !u.g) return false;
    if (s.unj && !u.unj) return false;
    if (q && searchText(u).indexOf(q) < 0) return false;
    return true;
  }
  function filtered() {
    var q = state.q.trim().toLowerCase();
    return units.filter(function (u) { return matches(u, q); });
  }

  /* -- the hash ----------------------------------------------------------------------------- */
  function readHash() {
    var params = new URLSearchParams(location.hash.replace(/^#/, ""));
    Object.keys(DEFAULTS).forEach(function (k) {
      var v = params.get(k);
      state[k] = v === null ? DEFAULTS[k] : v;
    });
  }
  function writeHash() {
    var params = new URLSearchParams();
    Object.keys(DEFAULTS).forEach(function (k) {
      if (state[k] !== DEFAULTS[k]) params.set(k, state[k]);
    });
    var text = params.toString();
    history.replaceState(null, "", text ? "#" + text : location.pathname + location.search);
  }

  /* -- controls ----------------------------------------------------------------------------- */
  function distinct(values) {
    var seen = {};
    values.forEach(function (v) { if (v !== "" && v !== undefined) seen[v] = true; });
    return Object.keys(seen).sort();
  }
  function fillSelect(name, anyText, options) {
    var sel = document.querySelector('[data-filter="' + name + '"]');
    clear(sel);
    sel.appendChild(el("option", { value: "" }, anyText));
    options.forEach(function (o) {
      sel.appendChild(el("option", { value: o[0] }, o[1]));
    });
  }
  function pairs(values) { return values.map(function (v) { return [v, v]; }); }
  function setupControls() {
    var cards = Object.keys(P.dialogues).map(function (k) { return P.dialogues[k]; });
    var turns = [];
    for (var n = 1; n <= maxTurn; n++) turns.push([String(n), "turn " + n]);
    fillSelect("run", "all runs", P.runs.map(function (r, i) { return [String(i), r.name]; }));
    fillSelect("cond", "all conditions", pairs(P.conditions));
    fillSelect("fam", "all families", pairs(distinct(cards.map(function (c) { return c.family; }))));
    fillSelect("area", "all areas", pairs(distinct(cards.map(function (c) { return c.area; }))));
    fillSelect("topic", "all topics", pairs(distinct(cards.map(function (c) { return c.topic; }))));
    fillSelect("urg", "any urgency", pairs(distinct(cards.map(function (c) { return c.urgency; }))));
    fillSelect("lab", "any label", pairs(P.labels).concat([["unjudged", "unjudged"]]));
    fillSelect("lt", "any turn", turns);
    fillSelect("mode", "any failure mode", pairs(P.modes));
    fillSelect("flip", "any turn or never", [["none", "never"]].concat(turns));
    document.querySelectorAll("[data-filter]").forEach(function (input) {
      var name = input.getAttribute("data-filter");
      var evt = input.tagName === "SELECT" || input.type === "checkbox" ? "change" : "input";
      input.addEventListener(evt, function () {
        state[name] = input.type === "checkbox" ? (input.checked ? "1" : "") : input.value;
        state.page = "1";
        update();
      });
    });
    document.querySelector(".filters").addEventListener("submit", function (e) {
      e.preventDefault();
    });
    $("filter-reset").addEventListener("click", function () {
      FILTERS.forEach(function (k) { state[k] = DEFAULTS[k]; });
      state.page = "1";
      update();
    });
    $("page-prev").addEventListener("click", function () {
      state.page = String(Math.max(1, +state.page - 1));
      update();
    });
    $("page-next").addEventListener("click", function () {
      state.page = String(+state.page + 1);
      update();
    });
    document.querySelectorAll("[data-tab]").forEach(function (b) {
      b.addEventListener("click", function () {
        state.tab = b.getAttribute("data-tab");
        update();
      });
    });
  }
  function syncControls() {
    document.querySelectorAll("[data-filter]").forEach(function (input) {
      var v = state[input.getAttribute("data-filter")];
      if (input.type === "checkbox") input.checked = v === "1";
      else if (input.value !== v) input.value = v;
    });
  }

  /* -- the list ----------------------------------------------------------------------------- */
  function labelStrip(u) {
    var span = el("span", { class: "strip" });
    u.t.forEach(function (t) {
      var lab = t.l || "unjudged";
      span.appendChild(el("span", {
        class: chipClass(lab) + (u.f === t.n ? " flip" : ""), "data-label": lab,
        title: "turn " + t.n + ": " + lab + (t.m ? " (" + t.m + ")" : "")
      }, t.l ? short(t.l) : "–"));
    });
    return span;
  }
  function renderList(list) {
    var pages = Math.max(1, Math.ceil(list.length / PAGE));
    var page = Math.min(Math.max(1, +state.page || 1), pages);
    state.page = String(page);
    var body = $("unit-rows");
    var frag = document.createDocumentFragment();
    list.slice((page - 1) * PAGE, page * PAGE).forEach(function (u) {
      frag.appendChild(el("tr", {
        "data-testid": "unit-row", "data-key": u.key,
        class: u.key === state.open ? "open" : null,
        onclick: function () { state.open = u.key; state.cmp = ""; update(); scrollToDialogue(); }
      },
        el("td", null, runName(u.r)), el("td", null, u.c),
        el("td", null, u.d + (u.k ? " #" + u.k : "")), el("td", null, u.card.family || ""),
        el("td", null, u.card.topic || ""), el("td", null, labelStrip(u)),
        el("td", null, u.f === null ? "never" : "turn " + u.f)));
    });
    clear(body);
    body.appendChild(frag);
    $("page-info").textContent = "Page " + page + " of " + pages;
    $("page-prev").disabled = page <= 1;
    $("page-next").disabled = page >= pages;
  }
  function renderCounts(list) {
    var replies = 0;
    var names = P.labels.concat(["unjudged"]);
    var counts = {};
    names.forEach(function (l) { counts[l] = 0; });
    list.forEach(function (u) {
      replies += u.t.length;
      u.t.forEach(function (t) { counts[t.l || "unjudged"] = (counts[t.l || "unjudged"] || 0) + 1; });
    });
    var mc = $("match-count");
    renderSeq += 1;
    mc.textContent = list.length + " of " + units.length + " dialogue runs, " + replies +
      " replies";
    mc.setAttribute("data-count", String(list.length));
    mc.setAttribute("data-replies", String(replies));
    mc.setAttribute("data-seq", String(renderSeq));
    $("label-counts").textContent = names.map(function (l) { return l + " " + counts[l]; })
      .join(" · ");
  }

  /* -- one dialogue --------------------------------------------------------------------- */
  function highlighted(text, spans) {
    // Mark each evidence span in the reply: [start, end] offsets, or a quote to look for
    // (case-insensitively); return the quotes not found.
    var ranges = [];
    var missing = [];
    (spans || []).forEach(function (s) {
      if (Array.isArray(s)) { ranges.push([s[0], s[1]]); return; }
      var q = s.trim();
      var at = q ? text.indexOf(q) : -1;
      if (at < 0 && q) at = text.toLowerCase().indexOf(q.toLowerCase());
      if (at < 0) { if (q) missing.push(s); return; }
      ranges.push([at, at + q.length]);
    });
    ranges.sort(function (a, b) { return a[0] - b[0]; });
    var merged = [];
    ranges.forEach(function (r) {
      var last = merged[merged.length - 1];
      if (last && r[0] <= last[1]) last[1] = Math.max(last[1], r[1]);
      else merged.push([r[0], r[1]]);
    });
    var nodes = [];
    var pos = 0;
    merged.forEach(function (r) {
      if (r[0] > pos) nodes.push(document.createTextNode(text.slice(pos, r[0])));
      nodes.push(el("mark", { "data-testid": "evidence" }, text.slice(r[0], r[1])));
      pos = r[1];
    });
    if (pos < text.length) nodes.push(document.createTextNode(text.slice(pos)));
    return { nodes: nodes, missing: missing };
  }
  function renderTurn(u, t) {
    var lab = t.l || "unjudged";
    var flipped = u.f === t.n;
    var card = u.card.turns[t.n - 1];
    var div = el("div", {
      class: "turn" + (flipped ? " flipped" : ""), "data-testid": "turn",
      "data-turn": t.n, "data-label": lab
    });
    div.appendChild(el("div", { class: "turn-meta" },
      "Turn " + t.n + (card && card.p ? " · " + card.p : "")));
    div.appendChild(el("div", { class: "user-text", "data-testid": "user-text" }, userText(u, t)));
    var head = el("div", { class: "reply-head" },
      el("span", { class: chipClass(lab), "data-testid": "label-chip" }, lab),
      t.m ? el("span", { class: "mode", "data-testid": "failure-mode" }, t.m) : null,
      flipped ? el("span", { class: "flip-marker", "data-testid": "flip-marker" },
        "◆ flip: first " + WORST + " reply") : null,
      t.cut ? el("span", { class: "muted" }, "cut off at the token limit") : null,
      t.g ? el("span", { class: "flip-marker", "data-testid": "disagree-marker" },
        "judges disagree") : null);
    div.appendChild(head);
    if (t.z) {
      div.appendChild(el("details", { class: "reasoning", "data-testid": "reasoning" },
        el("summary", null, "Reasoning (hidden from the judge; not part of the judged answer)"),
        el("div", { class: "reasoning-text" }, t.z)));
    }
    if (t.x) {
      div.appendChild(el("div", { class: "gen-error", "data-testid": "gen-error" },
        "Generation failed: " + t.x));
    }
    var hl = highlighted(t.a, t.e);
    var reply = el("div", { class: "reply-text", "data-testid": "reply-text" });
    if (!t.a && !t.x) reply.appendChild(el("span", { class: "missing" }, "(empty reply)"));
    append(reply, hl.nodes);
    div.appendChild(reply);
    if (hl.missing.length) {
      div.appendChild(el("div", { class: "evidence-unmatched", "data-testid": "evidence-unmatched" },
        "Evidence not found verbatim in the reply: ", hl.missing.join(" | ")));
    }
    (t.w || []).forEach(function (w) {
      var named = P.runs[u.r] && P.runs[u.r].judges.length > 1;
      div.appendChild(el("div", { class: "rationale", "data-testid": "rationale" },
        named ? w[0] + ": " + w[1] : w[1]));
    });
    if (t.v) {
      div.appendChild(el("div", { class: "votes", "data-testid": "votes" }, "Judges: " +
        t.v.map(function (v) { return v[0] + " " + (v[1] || "no verdict"); }).join(", ")));
    }
    (t.j || []).forEach(function (j) {
      div.appendChild(el("div", { class: "judge-error", "data-testid": "judge-error" },
        "Unjudged (" + j[0] + "): " + j[1]));
    });
    return div;
  }
  function renderCard(u) {
    var c = u.card;
    var dl = el("dl", { class: "card", "data-testid": "dialogue-card" });
    [["Dialogue", u.d], ["Family", c.family], ["Area", c.area], ["Topic", c.topic],
      ["Urgency", c.urgency], ["Unsafe belief", c.unsafe_belief],
      ["Safe stance", c.safe_stance], ["Source", c.source]].concat(c.x || []).forEach(function (row) {
      if (row[1]) dl.appendChild(el("dt", null, row[0]));
      if (row[1]) dl.appendChild(el("dd", { "data-field": row[0] }, row[1]));
    });
    return dl;
  }
  function renderDialogue() {
    var box = $("dialogue");
    clear(box);
    var u = byKey[state.open];
    if (!u) { box.hidden = true; return; }
    box.hidden = false;
    var other = byKey[state.cmp];
    var select = el("select", { "data-testid": "compare-select", id: "compare-select" },
      el("option", { value: "" }, "— none —"));
    (byDialogue[u.d] || []).forEach(function (o) {
      if (o.key !== u.key) select.appendChild(el("option", { value: o.key }, unitTitle(o)));
    });
    select.value = other ? other.key : "";
    select.addEventListener("change", function () { state.cmp = select.value; update(); });
    box.appendChild(el("div", { class: "dialogue-head" },
      el("h2", { "data-testid": "dialogue-title" }, u.d + " — " + unitTitle(u)),
      el("label", null, "Side by side with ", select),
      el("button", {
        type: "button", "data-testid": "dialogue-close",
        onclick: function () { state.open = ""; state.cmp = ""; update(); }
      }, "Close")));
    box.appendChild(renderCard(u));
    var panes = other ? [u, other] : [u];
    var grid = el("div", { class: "sbs" + (other ? " two" : ""), "data-testid": "side-by-side" });
    var ids = ["pane-main", "pane-compare"];
    panes.forEach(function (p, i) {
      grid.appendChild(el("div", { class: "pane-head", "data-testid": ids[i] + "-head",
        style: "grid-column:" + (i + 1) }, unitTitle(p) + (p.f ? " · first " + WORST + " at turn " +
        p.f : " · never " + WORST)));
    });
    var n = Math.max.apply(null, panes.map(function (p) {
      return Math.max(p.t.length ? p.t[p.t.length - 1].n : 0, p.card.turns.length);
    }));
    for (var turn = 1; turn <= n; turn++) {
      panes.forEach(function (p, i) {
        var t = p.byTurn[turn];
        var cell = t ? renderTurn(p, t) : el("div", { class: "turn missing" },
          "Turn " + turn + ": not generated");
        cell.setAttribute("data-pane", ids[i]);
        cell.style.gridColumn = String(i + 1);
        grid.appendChild(cell);
      });
    }
    box.appendChild(grid);
  }
  function scrollToDialogue() {
    var box = $("dialogue");
    if (!box.hidden && box.scrollIntoView) box.scrollIntoView({ block: "start" });
  }

  /* -- charts (plotly.js, drawn once the results are shown) -------------------------------- */
  var chartsDrawn = false;
  function esc(s) {  // plotly reads names as pseudo-HTML: show them as text
    return String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  }
  function pct(v) { return v === null || v === undefined ? null : v; }
  function seriesName(g, several) { return esc(several ? g.model + " · " + g.condition : g.condition); }
  function errs(values, cis) {
    var plus = [], minus = [];
    values.forEach(function (v, i) {
      var ci = cis && cis[i];
      plus.push(ci && v !== null ? ci[1] - v : null);
      minus.push(ci && v !== null ? v - ci[0] : null);
    });
    return { type: "data", symmetric: false, array: plus, arrayminus: minus, thickness: 1 };
  }
  var LAYOUT = {
    margin: { l: 60, r: 20, t: 30, b: 50 }, hovermode: "closest",
    font: { family: "system-ui, sans-serif", size: 13 },
    legend: { orientation: "h", x: 0, y: 1.02, xanchor: "left", yanchor: "bottom" }
  };
  var CONFIG = { displaylogo: false, responsive: true, modeBarButtonsToRemove: ["sendDataToCloud"] };
  function loadPlotly() {
    // plotly.js ships as text/plain so that the page does not wait for it; run it on first
    // use (the page's CSP allows this exact text by its hash)
    if (typeof Plotly === "undefined" && $("plotly-js")) {
      var script = document.createElement("script");
      script.textContent = $("plotly-js").textContent;
      document.head.appendChild(script);
    }
    return typeof Plotly !== "undefined";
  }
  function plot(id, traces, layout) {
    var node = $(id);
    if (!node || !loadPlotly()) return;
    Plotly.newPlot(node, traces, Object.assign({}, LAYOUT, layout), CONFIG);
  }
  function drawCharts() {
    if (chartsDrawn) return;
    chartsDrawn = true;
    if (P.suite) return;  // a suite's results are its own tables; these charts are MedPRESS's
    var pooled = P.groups.filter(function (g) { return g.family === "all"; });
    var models = distinct(pooled.map(function (g) { return g.model; }));
    var several = models.length > 1;
    function style(i, mode) {
      var c = COLORS[i % COLORS.length];
      return {
        mode: mode, line: { color: c, dash: DASHES[Math.floor(i / COLORS.length) % 4] },
        marker: { color: c, size: 7 }
      };
    }
    var byTurn = pooled.map(function (g, i) {
      var x = g.UAR_at.map(function (_, j) { return j + 1; });
      return Object.assign(style(i, "lines+markers"), {
        x: x, y: g.UAR_at.map(pct), name: seriesName(g, several), error_y: errs(g.UAR_at, g.ci.UAR_at),
        hovertemplate: "turn %{x}: UAR %{y:.1%}<extra>%{fullData.name}</extra>"
      });
    });
    plot("chart-uar-by-turn", byTurn, {
      xaxis: { title: { text: "Turn" }, dtick: 1 },
      yaxis: { title: { text: "UAR (share UNSAFE)" }, tickformat: ".0%", rangemode: "tozero" }
    });
    var surv = pooled.map(function (g, i) {
      return Object.assign(style(i, "lines+markers"), {
        x: g.survival.map(function (_, j) { return j + 1; }), y: g.survival,
        name: seriesName(g, several), line: Object.assign(style(i).line, { shape: "hv" }),
        error_y: errs(g.survival, g.ci.survival),
        hovertemplate: "turn %{x}: %{y:.1%} never UNSAFE so far<extra>%{fullData.name}</extra>"
      });
    });
    plot("chart-survival", surv, {
      xaxis: { title: { text: "Turn" }, dtick: 1 },
      yaxis: { title: { text: "Share with no UNSAFE reply yet" }, tickformat: ".0%", range: [0, 1.05] }
    });
    var families = distinct(P.groups.filter(function (g) { return g.family !== "all"; })
      .map(function (g) { return g.family; }));
    var fam = pooled.map(function (pg, i) {
      var ys = families.map(function (f) {
        var g = P.groups.filter(function (x) {
          return x.model === pg.model && x.condition === pg.condition && x.family === f;
        })[0];
        return g || null;
      });
      var vals = ys.map(function (g) { return g ? g.UAR : null; });
      return {
        type: "bar", x: families.map(esc), y: vals, name: seriesName(pg, several),
        marker: { color: COLORS[i % COLORS.length] },
        error_y: errs(vals, ys.map(function (g) { return g ? g.ci.UAR : null; })),
        hovertemplate: "%{x}: UAR %{y:.1%}<extra>%{fullData.name}</extra>"
      };
    });
    plot("chart-family", fam, {
      barmode: "group", yaxis: { title: { text: "UAR" }, tickformat: ".0%", rangemode: "tozero" }
    });
    if ($("chart-modes")) {
      var names = pooled.map(function (g) { return seriesName(g, several); });
      var modeTraces = P.modes.map(function (m, i) {
        return {
          type: "bar", name: esc(m), x: names, marker: { color: COLORS[i % COLORS.length] },
          y: pooled.map(function (g) { return g.failure_modes[m] || 0; }),
          hovertemplate: "%{x}: %{y} replies<extra>%{fullData.name}</extra>"
        };
      }).filter(function (t) { return t.y.some(function (v) { return v > 0; }); });
      plot("chart-modes", modeTraces, { barmode: "stack", yaxis: { title: { text: "Replies" } } });
    }
    if ($("chart-heatmap")) {
      var conds = P.conditions.filter(function (c) {
        return pooled.some(function (g) { return g.condition === c; });
      });
      var z = models.map(function (m) {
        return conds.map(function (c) {
          var g = pooled.filter(function (x) { return x.model === m && x.condition === c; })[0];
          return g ? g.UAR : null;
        });
      });
      plot("chart-heatmap", [{
        type: "heatmap", x: conds.map(esc), y: models.map(esc), z: z, colorscale: "YlOrRd",
        zmin: 0, zmax: 1, texttemplate: "%{z:.0%}", colorbar: { tickformat: ".0%", title: { text: "UAR" } },
        hovertemplate: "%{y} · %{x}: UAR %{z:.1%}<extra></extra>"
      }], { margin: { l: 200, r: 20, t: 30, b: 60 } });
    }
    drawPaired();
  }
  function drawPaired() {
    var sel = $("paired-metric");
    var all = P.paired.filter(function (p) { return p.family === "all"; });
    var metrics = distinct(all.map(function (p) { return p.metric; }));
    if (!sel.options.length) {
      metrics.forEach(function (m) { sel.appendChild(el("option", { value: m }, m)); });
      if (metrics.indexOf("UAR") >= 0) sel.value = "UAR";
      sel.addEventListener("change", drawPaired);
    }
    var rows = all.filter(function (p) { return p.metric === sel.value && p.diff !== null; });
    var several = distinct(rows.map(function (p) { return p.model; })).length > 1;
    var labels = rows.map(function (p) {
      return esc((several ? p.model + " · " : "") + p.cond_a + " → " + p.cond_b);
    });
    var rate = ["UAR", "SAR", "AR", "FR"].indexOf(sel.value) >= 0;
    plot("chart-paired", [{
      type: "scatter", mode: "markers", x: rows.map(function (p) { return p.diff; }), y: labels,
      marker: { color: COLORS[0], size: 9 },
      error_x: {
        type: "data", symmetric: false, thickness: 1.5,
        array: rows.map(function (p) { return p.hi === null ? null : p.hi - p.diff; }),
        arrayminus: rows.map(function (p) { return p.lo === null ? null : p.diff - p.lo; })
      },
      hovertemplate: "%{y}: B − A = %{x" + (rate ? ":.1%" : ":.2f") + "}<extra></extra>"
    }], {
      margin: { l: 260, r: 20, t: 30, b: 50 }, showlegend: false,
      xaxis: { title: { text: "B − A (" + sel.value + ")" }, zeroline: true,
        tickformat: rate ? ".0%" : null },
      yaxis: { automargin: true }
    });
  }

  /* -- everything ------------------------------------------------------------------------- */
  function update() {
    document.querySelectorAll("[data-tab-panel]").forEach(function (panel) {
      panel.hidden = panel.getAttribute("data-tab-panel") !== state.tab;
    });
    document.querySelectorAll("[data-tab]").forEach(function (b) {
      b.setAttribute("aria-selected", b.getAttribute("data-tab") === state.tab ? "true" : "false");
    });
    if (state.tab === "transcripts") {
      syncControls();
      var list = filtered();
      renderCounts(list);
      renderList(list);
      renderDialogue();
    } else {
      setTimeout(drawCharts, 0);
    }
    writeHash();
  }

  readHash();
  setupControls();
  update();
  window.addEventListener("hashchange", function () { readHash(); update(); scrollToDialogue(); });
  if (state.open) scrollToDialogue();
  document.documentElement.setAttribute("data-ready", "1");
  if (window.performance && performance.mark) performance.mark("medpress-ready");
})();
