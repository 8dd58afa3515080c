// errkb site: copy buttons, the index search, and the per-page pattern tester.
// Record text is untrusted: it only ever reaches the page through textContent,
// never innerHTML. Dataset regexes run in a backtracking engine here, so: patterns of
// literals and (.+?) gaps are decided by indexOf (gapSpan, linear, never a RegExp);
// a RegExp is built only for patterns with at most one unbounded repeat, no repeat
// or alternation inside a repeat (errkb/site/build.py: quadratic at worst); every
// pattern is prefiltered by its literals, and input and lines are capped.
(function () {
  "use strict";

  // ---- copy buttons --------------------------------------------------------
  function codeText(block) {
    var code = block.querySelector("pre code") || block.querySelector("pre");
    var clone = code.cloneNode(true);
    clone.querySelectorAll(".linenos").forEach(function (n) { n.remove(); });
    return clone.textContent.replace(/\n$/, "");
  }
  function copyText(text) {
    if (navigator.clipboard && window.isSecureContext) {
      return navigator.clipboard.writeText(text);
    }
    // file:// and plain http: the clipboard API may be missing; use a hidden textarea.
    var ta = document.createElement("textarea");
    ta.value = text;
    ta.setAttribute("readonly", "");
    ta.style.position = "fixed";
    ta.style.opacity = "0";
    document.body.appendChild(ta);
    ta.select();
    var ok = false;
    try { ok = document.execCommand("copy"); } catch (e) { ok = false; }
    ta.remove();
    return ok ? Promise.resolve() : Promise.reject(new Error("copy failed"));
  }
  document.querySelectorAll(".code .copy").forEach(function (button) {
    button.addEventListener("click", function () {
      var text = codeText(button.parentElement);
      copyText(text).then(function () { button.textContent = "Copied"; },
                          function () { button.textContent = "Select and copy"; });
      setTimeout(function () { button.textContent = "Copy"; }, 2000);
    });
  });

  // ---- patterns ------------------------------------------------------------
  var ANSI = /\x1b\[[0-9;?]*[ -\/]*[@-~]/g;
  // "SomeError: message" inside a traceback or behind a log prefix.
  var CLASS_PREFIX = /(?:^|[\s:(\[])([A-Za-z_][A-Za-z0-9_.]*(?:Error|Exception|Warning|Exit|Interrupt|Fault)): /;

  function compile(source, classes) {
    if (!source) { return null; }
    var full = source.replace(/\\p\{X(\d+)\}/g, function (_, k) { return classes[Number(k)]; });
    try { return new RegExp(full, "u"); } catch (e) { return null; }
  }
  function isAscii(text) { return /^[\x00-\x7f]*$/.test(text); }

  // k code points on from UTF-16 index pos (Python counts code points), or -1 past the end.
  function advance(t, pos, k) {
    while (k > 0) {
      if (pos >= t.length) { return -1; }
      var c = t.charCodeAt(pos);
      pos += (c >= 0xd800 && c <= 0xdbff && pos + 1 < t.length) ? 2 : 1;
      k--;
    }
    return pos;
  }
  // errkb.match.patterns.gap_match for one line, with the span re.search reports
  // (lazy gaps): plan = [anchoredStart, anchoredEnd, lead, literals, gaps, tail].
  function gapSpan(t, plan) {
    var as = plan[0], ae = plan[1], lead = plan[2], lits = plan[3], gaps = plan[4], tail = plan[5];
    if (!lits.length) { return null; }
    var atZero = as || lead !== null;
    var pos = 0, first = -1;
    for (var i = 0; i < lits.length; i++) {
      var lit = lits[i];
      var from = i === 0 ? (lead === null ? 0 : advance(t, 0, lead)) : advance(t, pos, gaps[i - 1]);
      if (from < 0) { return null; }
      var s;
      if (i === lits.length - 1 && ae && tail === null) {
        s = t.length - lit.length;
        if (s < from || t.slice(s) !== lit) { return null; }
        if (i === 0 && as && lead === null && s !== 0) { return null; }
        return { start: atZero ? 0 : (i === 0 ? s : first), end: t.length };
      }
      if (i === 0 && as && lead === null) {
        if (t.slice(0, lit.length) !== lit) { return null; }
        s = 0;
      } else {
        s = t.indexOf(lit, from);
      }
      if (s < 0) { return null; }
      if (i === 0) { first = s; }
      pos = s + lit.length;
    }
    var end = pos;
    if (tail !== null) {
      end = advance(t, pos, tail);
      if (end < 0) { return null; }
    }
    if (ae) { end = t.length; }
    return { start: atZero ? 0 : first, end: end };
  }
  window.errkbGapSpan = gapSpan;  // for tests/test_site_browser.py

  // A matcher for one record: a RegExp, or the gap plan; null when neither.
  function matcherFor(source, plan, classes) {
    if (plan) { return { plan: plan }; }
    var re = compile(source, classes);
    return re ? { re: re } : null;
  }

  // The texts a pattern is tried on: each line of the input, without colour codes,
  // and the message after an exception class (for patterns anchored with ^).
  function candidates(text, maxInput, maxLine) {
    text = text.slice(0, maxInput).replace(ANSI, "");
    var out = [];
    text.split(/\r\n|\r|\n/).forEach(function (line) {
      line = line.slice(0, maxLine);
      if (!line.trim()) { return; }
      out.push(line);
      var m = CLASS_PREFIX.exec(line);
      if (m) { out.push(line.slice(m.index + m[0].length)); }
      var trimmed = line.trim();
      if (trimmed !== line) { out.push(trimmed); }
    });
    return out;
  }

  // A match, or null: literals first (cheap, and they bound what the regex sees). m is a
  // matcher, or a function making one: the index compiles a record's RegExp only when a
  // text has all its literals.
  function tryPattern(m, literals, asciiOnly, texts) {
    if (typeof m === "function") {
      var make = m;
      m = null;
      for (var k = 0; k < texts.length && !m; k++) {
        if (literals.every(function (lit) { return texts[k].indexOf(lit) >= 0; })) { m = make(); if (!m) { return null; } }
      }
      if (!m) { return null; }
    }
    for (var i = 0; i < texts.length; i++) {
      var t = texts[i];
      var all = true;
      for (var j = 0; j < literals.length; j++) {
        if (t.indexOf(literals[j]) < 0) { all = false; break; }
      }
      if (!all) { continue; }
      if (asciiOnly && !isAscii(t)) { continue; }
      if (m.plan) {
        var span = gapSpan(t, m.plan);
        if (span) { return { text: t, start: span.start, end: span.end }; }
        continue;
      }
      m.re.lastIndex = 0;
      var found = m.re.exec(t);
      if (found) { return { text: t, start: found.index, end: found.index + found[0].length }; }
    }
    return null;
  }

  function showMatch(el, hit) {
    el.textContent = "";
    el.className = "tester-result ok";
    el.appendChild(document.createTextNode("Matches: "));
    el.appendChild(document.createTextNode(hit.text.slice(0, hit.start)));
    var mark = document.createElement("mark");
    mark.textContent = hit.text.slice(hit.start, hit.end);
    el.appendChild(mark);
    el.appendChild(document.createTextNode(hit.text.slice(hit.end)));
  }

  // ---- the pattern tester on a fix page ------------------------------------
  document.querySelectorAll("form[data-tester]").forEach(function (form) {
    var data = JSON.parse(form.querySelector(".tester-data").textContent);
    var input = form.querySelector("textarea");
    var result = form.querySelector(".tester-result");
    var button = form.querySelector(".test-button");
    var re = matcherFor(data.source, data.plan, []);
    if (!re) {
      input.disabled = true;
      button.disabled = true;
      return;
    }
    function run() {
      var text = input.value;
      if (!text.trim()) { result.textContent = ""; result.className = "tester-result"; return; }
      var hit = tryPattern(re, data.literals, data.ascii_only, candidates(text, data.max_input, data.max_line));
      if (hit) { showMatch(result, hit); return; }
      result.className = "tester-result no";
      result.textContent = "No match" + (text.length > data.max_input ? " in the first " + data.max_input + " characters" : "") +
        (data.ascii_only && !isAscii(text) ? " (this pattern is only checked exactly on ASCII text)" : "") + ".";
    }
    button.addEventListener("click", run);
    input.addEventListener("input", run);
  });

  // ---- the index: filters, full-text search, log-line matching -------------
  // index.html holds the first page of records and a manifest of the search data's
  // chunks (search/<k>-<hash>.js). Each chunk is a script calling errkbSearchChunk:
  // <script src> works from file://, where fetch() of a local file does not. All chunks
  // are requested at once and run in order; a search made before the last one arrives
  // covers the records loaded so far, says so, and is redone as more arrive.
  var indexEl = document.getElementById("errkb-index");
  if (!indexEl) { return; }
  var data = JSON.parse(indexEl.textContent);
  var total = data.total;
  var PAGE = data.page;
  var start = 0;
  var chunks = data.chunks.map(function (c) {
    var chunk = { src: c.src, n: c.n, start: start, records: null, classes: null, matchers: null };
    start += c.n;
    return chunk;
  });
  var loaded = 0;
  var loadedRecords = 0;
  var failed = [];
  var all = document.getElementById("all-records");
  var results = document.getElementById("results");
  var more = document.getElementById("more");
  var q = document.getElementById("q");
  var count = document.getElementById("count");
  var limit = PAGE;
  var filters = {
    r: document.getElementById("f-repo"),
    g: document.getElementById("f-tag"),
    c: document.getElementById("f-class"),
    s: document.getElementById("f-severity"),
    st: document.getElementById("f-status"),
    pr: document.getElementById("f-proof")
  };

  function complete() { return loaded === chunks.length; }
  function filtersActive() { return Object.keys(filters).some(function (k) { return filters[k].value !== ""; }); }
  // Whether what is on screen depends on the search data (not just the first page in the HTML).
  function usesData() { return q.value.trim() !== "" || filtersActive() || limit > PAGE; }

  var redraw = null;
  function dataChanged() {
    if (redraw === null && (usesData() || complete() || failed.length)) {
      redraw = setTimeout(function () { redraw = null; update(true); }, 0);
    }
  }
  window.errkbSearchChunk = function (k, payload) {
    var chunk = chunks[k];
    if (!chunk || chunk.records) { return; }
    chunk.records = payload.records;
    chunk.classes = payload.classes;
    chunk.matchers = new Array(payload.records.length);
    loaded++;
    loadedRecords += payload.records.length;
    dataChanged();
  };
  chunks.forEach(function (chunk) {
    var script = document.createElement("script");
    script.src = chunk.src;
    script.async = false;  // run in order
    script.onerror = function () { failed.push(chunk.src); dataChanged(); };
    document.body.appendChild(script);
  });

  // A result line, as _record_list.html draws it; record text only through textContent.
  function element(tag, className, text) {
    var el = document.createElement(tag);
    if (className) { el.className = className; }
    if (text !== undefined) { el.textContent = text; }
    return el;
  }
  function itemFor(r, i, hit) {
    var li = element("li", "record");
    li.setAttribute("data-i", String(i));
    var link = element("a", "record-link");
    link.setAttribute("href", r.u);
    link.appendChild(element("span", "msg", r.x || r.m));
    li.appendChild(link);
    var meta = element("span", "meta");
    meta.appendChild(element("span", "badge sev-" + r.s, r.s));
    meta.appendChild(element("code", "cls", r.c));
    meta.appendChild(element("span", "repo", r.r));
    if (r.st === "draft") { meta.appendChild(element("span", "badge status-draft", "draft, not curated")); }
    if (r.st === "findings") { meta.appendChild(element("span", "badge status-findings", "lint findings")); }
    var badge = element("span", "pattern-hit", "pattern matches");
    badge.hidden = !hit;
    meta.appendChild(badge);
    li.appendChild(meta);
    return li;
  }

  function passesFilters(r) {
    if (filters.r.value && r.r !== filters.r.value) { return false; }
    if (filters.g.value && r.g.indexOf(filters.g.value) < 0) { return false; }
    if (filters.c.value && r.c !== filters.c.value) { return false; }
    if (filters.s.value && r.s !== filters.s.value) { return false; }
    if (filters.st.value && r.st !== filters.st.value) { return false; }
    if (filters.pr.value && (filters.pr.value === "proven" ? r.pr.indexOf("proven") !== 0 : r.pr !== filters.pr.value)) { return false; }
    return true;
  }
  function words(query) {
    return query.toLowerCase().split(/\s+/).filter(function (w) { return w.length > 0; });
  }

  function plural(n) { return n + " record" + (n === 1 ? "" : "s"); }

  function update(keepPage) {
    if (!keepPage) { limit = PAGE; }
    var query = q.value;
    if (!usesData()) {
      // The plain list: its first page is in the HTML already.
      results.hidden = true;
      results.textContent = "";
      all.hidden = false;
      var after = total - Math.min(PAGE, total);
      more.hidden = after === 0;
      more.textContent = "Show " + Math.min(after, PAGE) + " more of " + after;
      count.textContent = plural(total) + (after ? " · showing the first " + PAGE : "") + loadingNote();
      return;
    }
    var ws = words(query.slice(0, data.max_input));
    var texts = query.trim() ? candidates(query, data.max_input, data.max_line) : [];
    var shown = [];
    var hits = 0;
    chunks.forEach(function (chunk) {
      if (!chunk.records) { return; }
      chunk.records.forEach(function (r, j) {
        if (!passesFilters(r)) { return; }
        var rank = null;
        if (texts.length && (r.p || r.gp) && tryPattern(function () {
          if (chunk.matchers[j] === undefined) { chunk.matchers[j] = matcherFor(r.p, r.gp, chunk.classes); }
          return chunk.matchers[j];
        }, r.l, r.a, texts)) {
          rank = 0;
          hits++;
        } else if (!ws.length) {
          rank = 2;
        } else if (ws.every(function (w) { return r.t.indexOf(w) >= 0; })) {
          var msg = r.m.toLowerCase();
          rank = ws.every(function (w) { return msg.indexOf(w) >= 0; }) ? 1 : 2;
        }
        if (rank !== null) { shown.push([rank, chunk.start + j, r]); }
      });
    });
    // Pattern matches first, then message hits, then the rest; index order otherwise.
    shown.sort(function (a, b) { return a[0] - b[0] || a[1] - b[1]; });
    var frag = document.createDocumentFragment();
    shown.slice(0, limit).forEach(function (s) { frag.appendChild(itemFor(s[2], s[1], s[0] === 0)); });
    results.textContent = "";
    results.appendChild(frag);
    all.hidden = true;
    results.hidden = false;
    var rest = shown.length - Math.min(limit, shown.length);
    more.hidden = rest === 0;
    more.textContent = "Show " + Math.min(rest, PAGE) + " more of " + rest;
    count.textContent = (shown.length === total ? plural(total) : shown.length + " of " + plural(total)) +
      (hits ? " · " + hits + " matched by pattern" : "") +
      (rest ? " · showing the first " + Math.min(limit, shown.length) : "") + loadingNote();
  }
  function loadingNote() {
    if (failed.length) { return " · search data missing (" + failed.join(", ") + "): results may be incomplete"; }
    if (complete()) { return ""; }
    return " · searched " + loadedRecords + " so far, loading the rest";
  }

  more.addEventListener("click", function () { limit += PAGE; update(true); });
  var timer = null;
  function schedule() { clearTimeout(timer); timer = setTimeout(function () { update(); }, 120); }
  q.addEventListener("input", schedule);
  Object.keys(filters).forEach(function (k) { filters[k].addEventListener("change", function () { update(); }); });
  var params = new URLSearchParams(window.location.search);
  if (params.get("q")) { q.value = params.get("q"); }
  update();
})();
