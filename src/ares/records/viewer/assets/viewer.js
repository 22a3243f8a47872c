"use strict";
// ARES trajectory viewer. Reads the JSON island written by ares.records.viewer and builds the page
// with DOM calls and textContent only, so episode text can never become markup.
(function () {
  const data = JSON.parse(document.getElementById("ares-data").textContent);
  const episodes = data.episodes;
  const state = { text: "", status: "", key: "started_at", dir: 1, selected: null };

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "class") node.className = v; else node.setAttribute(k, v);
    }
    for (const child of children.flat()) {
      if (child === null || child === undefined) continue;
      node.append(child instanceof Node ? child : String(child));
    }
    return node;
  }
  const svg = (tag, attrs) => {
    const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
    return node;
  };
  const fmtReward = (r) => (r === null || r === undefined ? "–" : Number(r).toFixed(3));
  const fmtSeconds = (s) => (s === null || s === undefined ? "–" : s < 1 ? (s * 1000).toFixed(0) + " ms" : s.toFixed(2) + " s");
  const statusCell = (s) => el("span", { class: "status status-" + s }, s);

  // --- header stats and status filter ---------------------------------------------------------
  const rewards = episodes.map((e) => e.reward).filter((r) => typeof r === "number");
  const mean = rewards.length ? rewards.reduce((a, b) => a + b, 0) / rewards.length : null;
  document.getElementById("stats").textContent =
    `${episodes.length} episodes · mean reward ${fmtReward(mean)} · ` +
    `${episodes.filter((e) => e.reward === 1).length} with reward 1`;
  const statusSelect = document.getElementById("status-filter");
  for (const s of [...new Set(episodes.map((e) => e.status))].sort()) statusSelect.append(el("option", { value: s }, s));

  // --- table ----------------------------------------------------------------------------------
  function visible() {
    const needle = state.text.trim().toLowerCase();
    const rows = episodes.filter((e) =>
      (!state.status || e.status === state.status) &&
      (!needle || [e.task, e.id, e.status].some((f) => String(f).toLowerCase().includes(needle))));
    const k = state.key;
    return rows.sort((a, b) => {
      const x = a[k], y = b[k];
      if (x === y) return 0;
      if (x === null || x === undefined) return 1; // missing values always last
      if (y === null || y === undefined) return -1;
      return (typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y), undefined, { numeric: true })) * state.dir;
    });
  }

  function renderTable() {
    const rows = visible();
    const body = document.querySelector("#episodes tbody");
    body.replaceChildren(...rows.map((e) => {
      const tr = el("tr", { "data-id": e.id, class: e.id === state.selected ? "selected" : null },
        el("td", {}, e.task || e.id), el("td", { class: "num" }, fmtReward(e.reward)), el("td", {}, statusCell(e.status)),
        el("td", { class: "num" }, e.steps), el("td", { class: "num" }, fmtSeconds(e.duration_s)));
      tr.addEventListener("click", () => select(e.id));
      return tr;
    }));
    if (!rows.length) body.append(el("tr", {}, el("td", { colspan: 5, class: "empty" }, "No episode matches the filters.")));
    document.getElementById("count").textContent = `${rows.length} of ${episodes.length}`;
    for (const th of document.querySelectorAll("#episodes th")) {
      th.classList.toggle("sorted-asc", th.dataset.key === state.key && state.dir === 1);
      th.classList.toggle("sorted-desc", th.dataset.key === state.key && state.dir === -1);
    }
  }

  document.getElementById("filter").addEventListener("input", (ev) => { state.text = ev.target.value; renderTable(); });
  statusSelect.addEventListener("change", (ev) => { state.status = ev.target.value; renderTable(); });
  for (const th of document.querySelectorAll("#episodes th")) {
    th.addEventListener("click", () => {
      state.dir = state.key === th.dataset.key ? -state.dir : 1;
      state.key = th.dataset.key;
      renderTable();
    });
  }

  // --- reward histogram -----------------------------------------------------------------------
  function renderHistogram() {
    const box = document.getElementById("histogram");
    if (!rewards.length) { box.append(el("p", { class: "empty" }, "No rewards recorded.")); return; }
    let lo = Math.min(0, ...rewards), hi = Math.max(1, ...rewards);
    const bins = 10, width = 300, height = 150, pad = 22;
    const counts = new Array(bins).fill(0);
    for (const r of rewards) counts[Math.min(bins - 1, Math.floor(((r - lo) / (hi - lo)) * bins))]++;
    const top = Math.max(...counts);
    const chart = svg("svg", { viewBox: `0 0 ${width} ${height + pad}`, width: "100%", role: "img", "aria-label": "Reward histogram" });
    const barW = (width - pad) / bins;
    counts.forEach((c, i) => {
      const h = top ? (c / top) * (height - 10) : 0;
      const bar = svg("rect", { class: "bar", x: pad + i * barW + 1, y: height - h, width: barW - 2, height: h, "data-count": c });
      const a = lo + ((hi - lo) * i) / bins, b = lo + ((hi - lo) * (i + 1)) / bins;
      const tip = svg("title", {}); tip.textContent = `${c} episode(s) with reward in [${a.toFixed(2)}, ${b.toFixed(2)}${i === bins - 1 ? "]" : ")"}`;
      bar.append(tip);
      chart.append(bar);
    });
    chart.append(svg("line", { class: "axis", x1: pad, y1: height, x2: width, y2: height }));
    for (const [x, label, anchor] of [[pad, lo, "start"], [width, hi, "end"], [(pad + width) / 2, (lo + hi) / 2, "middle"]]) {
      const t = svg("text", { class: "tick", x, y: height + 14, "text-anchor": anchor }); t.textContent = label.toFixed(2); chart.append(t);
    }
    const yTick = svg("text", { class: "tick", x: pad - 4, y: 12, "text-anchor": "end" }); yTick.textContent = top; chart.append(yTick);
    box.append(chart);
    const missing = episodes.length - rewards.length;
    if (missing) box.append(el("p", { class: "empty" }, `${missing} episode(s) without a reward`));
  }

  // --- episode detail -------------------------------------------------------------------------
  function message(m) {
    return el("div", { class: "msg msg-" + m.role },
      el("div", { class: "role" }, m.name ? `${m.role} (${m.name})` : m.role), el("pre", {}, m.content),
      (m.tool_calls || []).map((c) => el("pre", { class: "tool-call" }, `→ ${c.name}(${c.arguments})`)));
  }

  function command(c) {
    const ok = c.exit_code === 0 && !c.timed_out && !c.limit_hit;
    const flags = [c.timed_out ? "timed out" : null, c.limit_hit ? "limit: " + c.limit_hit : null].filter(Boolean);
    return el("div", { class: "cmd" },
      el("div", { class: "cmd-head" }, el("code", {}, "$ " + c.cmd),
        el("span", { class: ok ? "exit-ok" : "exit-bad" }, "exit " + (c.exit_code ?? "?"), flags.length ? " · " + flags.join(", ") : ""),
        el("span", {}, fmtSeconds(c.duration_s)), c.cwd ? el("span", {}, c.cwd) : null),
      c.stdout ? el("pre", { class: "stdout" }, c.stdout) : null,
      c.stderr ? el("pre", { class: "stderr" }, c.stderr) : null);
  }

  function turn(t) {
    const reward = t.reward === null || t.reward === undefined ? null :
      el("div", { class: "reward-line" }, `reward ${fmtReward(t.reward)}`,
        Object.keys(t.reward_terms).length ? " (" + Object.entries(t.reward_terms).map(([k, v]) => `${k}=${v}`).join(", ") + ")" : "");
    return el("div", { class: "turn", "data-step": t.index },
      el("div", { class: "turn-head" }, `step ${t.index} · ${t.step_type} · ${fmtSeconds(t.latency_s)}`),
      t.action ? message({ role: "assistant", content: t.action.content, tool_calls: t.action.tool_calls }) : null,
      t.commands.length ? el("div", { class: "commands" }, t.commands.map(command)) : null,
      t.messages.map(message), reward,
      t.context ? el("div", { class: "context-mark" }, CONTEXT_NOTES[t.context] || t.context) : null);
  }

  const CONTEXT_NOTES = {
    summary: "the agent asks the policy to summarize (its context is over budget)",
    compacted: "compacted: the conversation restarts from the task and the summary (a new training sequence)",
  };

  function detail(e) {
    const v = e.verifier;
    const meta = el("div", { class: "meta" },
      [["episode", e.id], ["task", e.task], ["status", e.status], ["reward", fmtReward(e.reward)], ["steps", e.steps],
       ["duration", fmtSeconds(e.duration_s)], ["truncation", e.truncation], ["exit", e.exit_reason],
       ["group", e.group], ["branched from", e.parent ? `${e.parent} at step ${e.branch_step}` : null], ["policy time", e.policy && e.policy.policy_latency_s ? fmtSeconds(e.policy.policy_latency_s) : null],
       ["tokens", e.policy && e.policy.prompt_tokens !== null && e.policy.prompt_tokens !== undefined
         ? `${e.policy.prompt_tokens} in / ${e.policy.completion_tokens} out` : null],
       ["cost", e.policy && e.policy.cost_usd !== null && e.policy.cost_usd !== undefined ? `$${e.policy.cost_usd.toFixed(4)}` : null]]
        .filter(([, val]) => val !== null && val !== undefined && val !== "")
        .map(([k, val]) => el("span", {}, k + " ", el("b", {}, val))));
    const verifier = el("div", { class: "verifier" }, el("h3", {}, "Verifier"),
      v.status ? el("div", { class: "meta" }, "status ", el("b", {}, v.status)) : null,
      v.stdout ? el("pre", { class: "stdout" }, v.stdout) : null,
      v.stderr ? el("pre", { class: "stderr" }, v.stderr) : null,
      v.limit_hits && v.limit_hits.length ? el("div", { class: "meta" }, "limit hits ", el("b", {}, v.limit_hits.join(", "))) : null,
      v.sandbox_crash ? el("div", { class: "meta" }, "sandbox crashed under the agent ", el("b", {}, v.sandbox_crash)) : null,
      v.mode ? el("div", { class: "meta" }, "tests saw ", el("b", {}, v.mode === "outputs"
        ? "the pristine image + the task's outputs" : v.mode === "full" ? "the agent's whole filesystem" : "the agent's own sandbox")) : null,
      v.changed_outside ? el("div", { class: "outside" },
        el("div", { class: "meta" }, "changed outside the task's outputs ",
          el("b", {}, `${v.changed_outside.count}${v.changed_outside.truncated ? "+" : ""} path(s)`)),
        el("pre", {}, v.changed_outside.paths.join("\n"))) : null,
      !v.stdout && !v.stderr ? el("p", { class: "empty" }, "No verifier output recorded.") : null,
      (v.files || []).map((f) => el("details", { class: "verifier-file" },
        el("summary", {}, `/logs/verifier/${f.name}`), el("pre", {}, f.text))));
    const error = e.error ? el("div", { class: "error" }, el("h3", {}, "Error"),
      el("pre", {}, `${e.error.type}: ${e.error.message}${e.error.traceback ? "\n\n" + e.error.traceback : ""}`)) : null;
    return [el("h2", {}, e.task || e.id), meta, error, el("h3", {}, "Conversation"),
      e.turns.length ? e.turns.map(turn) : el("p", { class: "empty" }, "No steps recorded."), verifier];
  }

  function select(id) {
    const e = episodes.find((x) => x.id === id);
    if (!e) return;
    state.selected = id;
    const panel = document.getElementById("detail");
    panel.replaceChildren(...detail(e).flat().filter((n) => n !== null));
    panel.hidden = false;
    try { history.replaceState(null, "", "#" + encodeURIComponent(id)); } catch (_) { /* some schemes refuse */ }
    renderTable();
  }

  renderHistogram();
  renderTable();
  if (location.hash.length > 1) select(decodeURIComponent(location.hash.slice(1)));
})();
