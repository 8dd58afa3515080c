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
  // errkb.text.patterns.gap_match for one line, with the span re.search reports
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
  // {any: [plan, ...]} (optional groups, branches): the leftmost span of any alternative.
  function planSpan(t, plan) {
    if (!plan.any) { return gapSpan(t, plan); }
    var best = null;
    plan.any.forEach(function (p) {
      var span = gapSpan(t, p);
      if (span && (best === null || span.start < best.start)) { best = span; }
    });
    return best;
  }

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
        var span = planSpan(t, m.plan);
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

  // ---- normalisation, as errkb.text.normalize does it for a pasted text ----
  // A port of text_messages for what people paste (a line, a few lines): the text, its
  // lines, each without colour codes and log prefixes, a JSON log's message, the message
  // after an `ErrorClass: `. Our own regexes (Python's, with \w and \d as Python's Unicode
  // sets), bounded, run only on the capped input; no record text is ever a RegExp here.
  function pyRegExp(src, flags) {
    var out = "";
    var inClass = false;
    for (var i = 0; i < src.length; i++) {
      var c = src[i];
      if (c === "\\") {
        var n = src[i + 1];
        if (n === "w") { out += inClass ? "\\p{L}\\p{N}_" : "[\\p{L}\\p{N}_]"; }
        else if (n === "d") { out += "\\p{Nd}"; }
        else { out += c + n; }
        i++;
        continue;
      }
      if (c === "[" && !inClass) { inClass = true; } else if (c === "]" && inClass) { inClass = false; }
      out += c;
    }
    return new RegExp(out.replace(/\(\?P</g, "(?<"), flags);
  }
  var LEVEL = "(?:TRACE|DEBUG|INFO|NOTICE|WARNING|WARN|ERROR|ERR|CRITICAL|FATAL|EXCEPTION|SEVERE)";
  var NORM_ANSI = pyRegExp(String.raw`\x1b(?:\[[0-?]{0,32}[ -/]{0,8}[@-~]|\][^\x07\x1b]{0,512}(?:\x07|\x1b\\)|[@-Z\\-_])`, "gu");
  var PREFIX = pyRegExp("(?:" +
    String.raw`(?P<ts>\[?\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d{1,9})?)?(?:Z|[+-]\d{2}:?\d{2}| ?UTC)?\]?(?: \| | - | ?))` +
    String.raw`|(?P<vllm>` + LEVEL + String.raw` \d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d{1,9})? ?(?:[\w.-]{1,255}\.py:\d{1,10}\] ?)?)` +
    String.raw`|(?P<syslog>[A-Z][a-z]{2} [ \d]?\d \d{2}:\d{2}:\d{2} [\w.-]{1,255} [\w./@-]{1,255}?(?:\[\d{1,10}\])?: ?)` +
    String.raw`|(?P<glog>\[?[IWEF](?:\d{3,4} \d{2}:\d{2}:\d{2}\.\d{1,9}(?: {1,16}\d{1,10})?)? [\w./-]{1,255}:\d{1,10}\] ?)` +
    String.raw`|(?P<proc>\([\w.-]{1,100}(?: [\w.-]{1,40}=[\w.-]{1,40}){1,4}\) ?)` +
    String.raw`|(?P<rank>\[rank\d{1,6}\]: ?)` +
    String.raw`|(?P<pytest>E {3,64})` +
    String.raw`|(?P<file>\[[\w./<>-]{1,255}:\d{1,10}(?: [^\]\n]{1,100})?\] ?)` +
    String.raw`|(?P<pylog>` + LEVEL + String.raw`:(?:[A-Za-z_][\w.]{0,200}:(?=\S))?(?: {1,16})?)` +
    String.raw`|(?P<loguru>\| ?` + LEVEL + String.raw` {0,16}\| ?(?:[\w.<>]{1,255}:[\w.<>]{0,255}:?\d{1,10} - )?)` +
    String.raw`|(?P<loguru2>` + LEVEL + String.raw` {0,16}\| (?:[\w.<>]{1,255}:[\w.<>]{0,255}:?\d{1,10} - )?)` +
    String.raw`|(?P<blevel>\[` + LEVEL + String.raw`\] ?)` +
    String.raw`|(?P<level>` + LEVEL + String.raw`(?: - | \| | {1,16}(?=\S)))` + ")", "uy");
  var LOGGER = pyRegExp(String.raw`(?:\[[^\]\s]{1,100}\]|[A-Za-z_]\w{0,100}(?:[.\-/]\w{1,100}){1,12}|[A-Za-z]{1,100}_\d{1,10})(?::? | - )(?=\S)`, "uy");
  var ERROR_LINE = pyRegExp(String.raw`((?:[A-Za-z_]\w{0,100}\.){0,12}[A-Za-z_]\w{0,100}` +
    String.raw`(?:Error|Exception|Warning|Exit|Interrupt|Fault|Failure|Iteration|Timeout|Refused|Denied|NotFound|Err|Exists))` +
    String.raw`(?::(?: |$)|$)`, "uy");
  var PREFIX_FAMILIES = ["ts", "vllm", "syslog", "glog", "proc", "rank", "pytest", "file", "pylog", "loguru", "loguru2", "blevel", "level"];
  var TERMINAL_PREFIXES = { syslog: 1, glog: 1, file: 1, pylog: 1, loguru: 1, loguru2: 1 };
  var LEVEL_PREFIXES = { vllm: 1, pylog: 1, loguru: 1, loguru2: 1, blevel: 1, level: 1 };
  var LEVEL_ONLY = { pylog: pyRegExp(LEVEL + ":", "uy"), loguru: pyRegExp(String.raw`\| ?` + LEVEL + String.raw` {0,16}\| ?`, "uy"),
                     loguru2: pyRegExp(LEVEL + String.raw` {0,16}\| `, "uy") };
  var JSON_MESSAGE_KEYS = ["message", "msg", "log", "error", "err", "exception", "exc_info", "stack_trace", "text", "event"];

  function stickyAt(re, text, pos) { re.lastIndex = pos; return re.exec(text); }
  // str.strip(): Python's whitespace (str.isspace), which is JS's \s less U+FEFF, plus
  // U+001C-U+001F and U+0085
  var PY_SPACE = "[\\t\\n\\v\\f\\r \\x1c-\\x1f\\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]";
  var PY_STRIP = new RegExp("^" + PY_SPACE + "+|" + PY_SPACE + "+$", "gu");
  var PY_RSTRIP = new RegExp(PY_SPACE + "+$", "u");
  function pyStrip(s) { return s.replace(PY_STRIP, ""); }
  function stripAnsi(text) { return text.indexOf("\x1b") < 0 ? text : text.replace(NORM_ANSI, ""); }
  // errkb.text.normalize.prefix_length; headerOnly is its names=False (a logger's name stays)
  function prefixLength(line, headerOnly) {
    var pos = 0;
    var seen = {};
    var levelSeen = false;
    for (var n = 0; n < 12; n++) {
      var m = stickyAt(PREFIX, line, pos);
      if (m === null || m.index + m[0].length === pos) {
        if (!headerOnly && seen.ts && (seen.level || seen.blevel)) { pos = loggerEnd(line, pos); }
        break;
      }
      var family = PREFIX_FAMILIES.filter(function (f) { return m.groups[f] !== undefined; })[0];
      if (seen[family] || (LEVEL_PREFIXES[family] && levelSeen)) { break; }
      seen[family] = true;
      if (LEVEL_PREFIXES[family]) { levelSeen = true; }
      pos = m.index + m[0].length;
      if (headerOnly && LEVEL_ONLY[family]) {
        var level = stickyAt(LEVEL_ONLY[family], line, m.index);
        if (level !== null && m.index + level[0].length < pos) { return m.index + level[0].length; }
      }
      if (TERMINAL_PREFIXES[family]) { break; }
    }
    return pos;
  }
  function loggerEnd(line, pos) {
    var m = stickyAt(LOGGER, line, pos);
    if (m === null || stickyAt(ERROR_LINE, line, pos) !== null) { return pos; }
    var end = pos + m[0].length;
    var name = m[0].replace(/[: -]+$/, "");
    var next = line.slice(end, end + 1);
    if (/\p{Nd}$/u.test(name) || name.slice(-1) === "]" || (next && next === next.toUpperCase() && next !== next.toLowerCase())) {
      return end;
    }
    return pos;
  }
  function stripPrefixes(line) { var n = prefixLength(line); return n ? line.slice(n) : line; }
  function splitErrorClass(message) {
    var m = stickyAt(ERROR_LINE, message, 0);
    return m === null ? null : [m[1], message.slice(m[0].length)];
  }
  function isDict(o) { return o !== null && typeof o === "object" && !Array.isArray(o); }
  function jsonMessage(line) {
    var stripped = pyStrip(line);
    if (!(stripped.charAt(0) === "{" && stripped.slice(-1) === "}")) { return null; }
    var obj;
    try { obj = JSON.parse(stripped); } catch (e) { return null; }
    for (var depth = 0; depth < 3; depth++) {
      if (!isDict(obj)) { return null; }
      var next = null;
      for (var k = 0; k < JSON_MESSAGE_KEYS.length; k++) {
        var key = JSON_MESSAGE_KEYS[k];
        if (!Object.prototype.hasOwnProperty.call(obj, key)) { continue; }
        var value = obj[key];
        if (typeof value === "string" && value) { return value; }
        if (isDict(value)) { next = value; break; }
      }
      if (next === null) { return null; }
      obj = next;
    }
    return null;
  }
  function addLineForms(line, out, depth) {
    var body = stripPrefixes(line);
    if (body !== line) { out.push(body); }
    var inner = jsonMessage(body);
    if (inner !== null && depth < 2) {
      textMessages(inner, depth + 1).forEach(function (t) { out.push(t); });
      return;
    }
    var split = splitErrorClass(body), carried;
    if (split) {
      out.push(body); out.push(split[1]);
      carried = clientErrorMessage(split[1]);
      if (carried !== null) { out.push(carried); }
      return;
    }
    // a validator's exception as pydantic prints it: "  Value error, <message> [type=...]"
    var wrapped = PYDANTIC_ERROR.exec(body);
    if (wrapped) { out.push(body.slice(wrapped[0].length).replace(PYDANTIC_SUFFIX, "")); return; }
    carried = clientErrorMessage(body);
    if (carried !== null) { out.push(carried); }
  }
  var PYDANTIC_ERROR = /^\s{0,8}(?:Value error|Assertion failed), /;
  var PYDANTIC_SUFFIX = / \[type=\w{1,64}, input_value=[\s\S]*$/;
  // errkb.text.normalize.client_error_message: the message in an API client's error body
  // ("Error code: 400 - {'object': 'error', 'message': '...', ...}", a dict's repr or JSON)
  var CLIENT_ERROR = /^Error code: [1-5][0-9][0-9] - \{/;
  var BODY_MESSAGE = /(['"])message\1: ?(?:'((?:[^'\\\n]|\\[^\n]){1,8000})'|"((?:[^"\\\n]|\\[^\n]){1,8000})")/g;
  function clientErrorMessage(text) {
    var head = CLIENT_ERROR.exec(text);
    if (!head) { return null; }
    BODY_MESSAGE.lastIndex = head[0].length - 1;
    var found = BODY_MESSAGE.exec(text);
    if (!found) { return null; }
    var message = decodeEscapes(found[2] !== undefined ? found[2] : found[3]);
    return pyStrip(message) ? message : null;
  }
  // errkb.text.normalize.unwrapped_messages: the messages wrappers carry on a text's lines
  // (a JSON line's, pydantic's validator message, an API client's body message), each once
  function unwrappedMessages(text, depth) {
    var out = [];
    stripAnsi(text.replace(/\r\n/g, "\n")).split("\n").forEach(function (line) {
      var body = stripPrefixes(line), inner = jsonMessage(body);
      if (inner !== null) {
        if (depth < 2) { out.push(inner); unwrappedMessages(inner, depth + 1).forEach(function (m) { out.push(m); }); }
        return;
      }
      var split = splitErrorClass(body), wrapped = split ? null : PYDANTIC_ERROR.exec(body);
      if (wrapped) { out.push(body.slice(wrapped[0].length).replace(PYDANTIC_SUFFIX, "")); return; }
      var carried = clientErrorMessage(split ? split[1] : body);
      if (carried !== null) { out.push(carried); }
    });
    return dedupe(out.filter(function (m) { return pyStrip(m); }));
  }
  function dedupe(texts) {
    var seen = {};
    return texts.filter(function (t) { if (Object.prototype.hasOwnProperty.call(seen, "k" + t)) { return false; } seen["k" + t] = 1; return true; });
  }
  // errkb.text.normalize.text_messages (the texts only). A text of several lines is taken
  // line by line, with its lines joined (a wrapped message); tracebacks are not grouped.
  function textMessages(text, depth) {
    var out = [text];
    if (text.indexOf("\r") >= 0) { text = text.replace(/\r\n/g, "\n"); }
    text = stripAnsi(text);
    var lines = text.split("\n");
    while (lines.length && !pyStrip(lines[lines.length - 1])) { lines.pop(); }
    if (!lines.length) { return dedupe(out); }
    if (lines.length === 1) {
      if (lines[0] !== out[0]) { out.push(lines[0]); }
      addLineForms(lines[0], out, depth);
      return dedupe(out);
    }
    // a message raised from C++ often begins or ends with a newline: without its blank
    // edge lines (and its class), for multi-line patterns anchored with ^ and $
    var bare = withoutBlankEdges(text);
    if (bare.indexOf("\n") >= 0) {
      out.push(bare);
      var bareSplit = splitErrorClass(bare);
      if (bareSplit) { out.push(withoutBlankEdges(bareSplit[1])); }
    }
    if (lines.length <= 50) { out = out.concat(wrappedMessages(lines.join("\n"))); }
    lines.forEach(function (line) {
      if (line.slice(-1) === "\r") { line = line.slice(0, -1); }
      out.push(line);
      var clean = stripAnsi(line);
      if (clean !== line) { out.push(clean); }
      addLineForms(clean, out, 0);
    });
    return dedupe(out);
  }
  // errkb.text.normalize.wrapped_messages (the texts only): a text's lines joined back into
  // one message (an issue's editor or a terminal wrapped it); none for one line or over 50.
  function wrappedMessages(text) {
    var lines = stripAnsi(text.replace(/\r\n/g, "\n")).split("\n"), out = [];
    while (lines.length && !pyStrip(lines[lines.length - 1])) { lines.pop(); }
    if (lines.length < 2 || lines.length > 50) { return []; }
    var bodies = lines.map(function (l) { return pyStrip(stripPrefixes(l)); });
    [bodies.join(""), bodies.filter(function (b) { return b; }).join(" ")].forEach(function (joined) {
      out.push(joined);
      var split = splitErrorClass(joined);
      if (split) { out.push(split[1]); }
    });
    return dedupe(out);
  }
  // ---- errkb.text.printed: a paste as the program printed it, where the paste quotes its
  // message (pytest's "E   " margin; a string literal with its line breaks written \n)
  var PRINTED_MAX_FORMS = 4, PRINTED_MIN_LITERAL_ALNUM = 12, TEXT_MAX_LINES = 50;  // printed.*, explainer.TEXT_MAX_LINES
  var PRINTED_ESCAPES = { n: "\n", t: "\t", r: "\r", "\\": "\\", "'": "'", "\"": "\"", "0": "\0", a: "\x07", b: "\b",
                          f: "\f", v: "\v" };
  var PRINTED_HEX = { x: 2, u: 4, U: 8 };
  var PY_SPACE_CHAR = new RegExp("^" + PY_SPACE + "$", "u");
  function isAlnum(ch) { return /^[\p{L}\p{N}]$/u.test(ch); }
  function charBefore(text, i) {  // the character that ends at i, a surrogate pair whole (Python's text[i - 1])
    var low = text.charCodeAt(i - 1), high = i >= 2 ? text.charCodeAt(i - 2) : 0;
    return low >= 0xDC00 && low <= 0xDFFF && high >= 0xD800 && high <= 0xDBFF ? text.slice(i - 2, i) : text.charAt(i - 1);
  }
  function pytestMarked(line) { return line.charAt(0) === "E" && (line.length === 1 || line.charAt(1) === " "); }
  function unmarked(run) {
    var bodies = run.map(function (l) { return pyRstrip(l.slice(1)); }), margin = null;
    bodies.forEach(function (b) {
      if (!pyStrip(b)) { return; }
      var m = b.length - b.replace(/^ +/, "").length;
      if (margin === null || m < margin) { margin = m; }
    });
    if (margin === null) { return null; }
    return bodies.map(function (b) { return b.slice(margin); }).join("\n").replace(/^\n+|\n+$/g, "");
  }
  function pytestRuns(lines) {
    var runs = [], start = null;
    for (var number = 1; number <= lines.length + 1; number++) {
      var line = number <= lines.length ? lines[number - 1] : "";
      if (number <= lines.length && pytestMarked(line)) {
        if (start === null && pyStrip(line.slice(1))) { start = number; }
        continue;
      }
      if (start !== null) {
        var text = unmarked(lines.slice(start - 1, number - 1));
        if (text !== null) { runs.push([start, text]); }
        start = null;
      }
    }
    return runs;
  }
  function decodeEscapes(body) {
    var out = [], i = 0, n = body.length;
    while (i < n) {
      var c = body[i];
      if (c !== "\\" || i + 1 >= n) { out.push(c); i++; continue; }
      var e = body[i + 1];
      if (Object.prototype.hasOwnProperty.call(PRINTED_ESCAPES, e)) { out.push(PRINTED_ESCAPES[e]); i += 2; continue; }
      var width = Object.prototype.hasOwnProperty.call(PRINTED_HEX, e) ? PRINTED_HEX[e] : 0;
      var digits = width ? body.slice(i + 2, i + 2 + width) : "";
      if (width && digits.length === width && /^[0-9a-fA-F]+$/.test(digits)) {
        var code = parseInt(digits, 16);
        out.push(code < 0x110000 && !(code >= 0xD800 && code <= 0xDFFF) ? String.fromCodePoint(code) : "\ufffd");
        i += 2 + width;
        continue;
      }
      out.push(c);
      i++;
    }
    return out.join("");
  }
  function calledName(text, quote) {
    var i = quote - 1;
    while (i >= 0 && (text[i] === " " || text[i] === "\t")) { i--; }
    if (i < 0 || text[i] !== "(") { return null; }
    var end = i;
    while (i > 0) {
      var ch = charBefore(text, i);
      if (!(isAlnum(ch) || ch === "_" || ch === ".")) { break; }
      i -= ch.length;
    }
    var name = text.slice(i, end).replace(/^\.+|\.+$/g, "");
    var first = Array.from(name.split(".").pop())[0];
    return first && /^\p{Uppercase}$/u.test(first) ? name : null;  // str.isupper() of one character
  }
  function escapedLiteral(text) {
    var best = null, i = 0, n = text.length;
    while (i < n) {
      var quote = text[i];
      if ((quote !== "'" && quote !== "\"") || (i && isAlnum(charBefore(text, i)))) { i++; continue; }  // "doesn't"
      var j = i + 1, escapes = 0;
      while (j < n && text[j] !== quote) {
        if (text[j] === "\\" && j + 1 < n) { escapes++; j++; }
        j++;
      }
      if (escapes && (best === null || escapes > best[0])) { best = [escapes, i, j]; }
      i = j + 1;
    }
    if (best === null) { return null; }
    var message = decodeEscapes(text.slice(best[1] + 1, best[2])), alnum = 0;
    for (var ch of message) { if (isAlnum(ch)) { alnum++; } }
    if (alnum < PRINTED_MIN_LITERAL_ALNUM) { return null; }
    var name = calledName(text, best[1]);
    return [text.slice(0, best[1]).split("\n").length, name !== null ? name + ": " + message : message];
  }
  function beforeElision(message) {
    var at = message.indexOf("...");
    while (at !== -1) {
      var before = at > 0 ? message[at - 1] : "", after = message.slice(at + 3, at + 4);
      if (before && after && !PY_SPACE_CHAR.test(before) && !PY_SPACE_CHAR.test(after) && after !== ".") {
        return message.slice(0, at);
      }
      at = message.indexOf("...", at + 3);
    }
    return null;
  }
  function printedForms(text) {  // errkb.text.printed.printed_forms
    var forms = pytestRuns(text.split("\n")).reverse().map(function (r) { return { text: r[1], first: r[0], lineForLine: true }; });
    var literal = escapedLiteral(text);
    if (literal !== null) {
      forms.push({ text: literal[1], first: literal[0], lineForLine: false });
      var elided = beforeElision(literal[1]);
      if (elided !== null) { forms.push({ text: elided, first: literal[0], lineForLine: false }); }
    }
    var seen = new Set([text]), out = [];
    forms.forEach(function (f) { if (pyStrip(f.text) && !seen.has(f.text)) { seen.add(f.text); out.push(f); } });
    return out.slice(0, PRINTED_MAX_FORMS);
  }
  window.errkbPrintedForms = printedForms;  // for tests

  function withoutBlankEdges(text) {
    var lines = text.split("\n"), first = 0, last = lines.length;
    while (first < last && !pyStrip(lines[first])) { first++; }
    while (last > first && !pyStrip(lines[last - 1])) { last--; }
    return lines.slice(first, last).join("\n");
  }
  window.errkbTextMessages = function (text) { return textMessages(text, 0); };  // for tests

  // ---- near matches: errkb.match.near, ported ------------------------------
  // The same words, weights, word alignment (difflib.SequenceMatcher, autojunk off) and
  // span scoring, with the constants errkb.match.near exports (the manifest's "near").
  // Records' words come from the build (errkb.match.near.record_words): patterns are
  // never parsed or run here.
  var WORD = /[\p{L}\p{N}_]+(?:['’][\p{L}\p{N}_]+)*/gu;
  var NUL = "\0";
  function nearWords(text) { return text.match(WORD) || []; }
  function fsum(values) { var s = 0; for (var i = 0; i < values.length; i++) { s += values[i]; } return s; }  // Python's sum(), left to right

  // difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
  function opcodes(a, b) {
    var b2j = new Map();
    b.forEach(function (elt, j) { var l = b2j.get(elt); if (!l) { l = []; b2j.set(elt, l); } l.push(j); });
    function longest(alo, ahi, blo, bhi) {
      var besti = alo, bestj = blo, bestsize = 0;
      var j2len = new Map();
      for (var i = alo; i < ahi; i++) {
        var newj2len = new Map();
        var js = b2j.get(a[i]) || [];
        for (var n = 0; n < js.length; n++) {
          var j = js[n];
          if (j < blo) { continue; }
          if (j >= bhi) { break; }
          var k = (j2len.get(j - 1) || 0) + 1;
          newj2len.set(j, k);
          if (k > bestsize) { besti = i - k + 1; bestj = j - k + 1; bestsize = k; }
        }
        j2len = newj2len;
      }
      while (besti > alo && bestj > blo && a[besti - 1] === b[bestj - 1]) { besti--; bestj--; bestsize++; }
      while (besti + bestsize < ahi && bestj + bestsize < bhi && a[besti + bestsize] === b[bestj + bestsize]) { bestsize++; }
      return [besti, bestj, bestsize];
    }
    var queue = [[0, a.length, 0, b.length]];
    var blocks = [];
    while (queue.length) {
      var q = queue.pop();
      var x = longest(q[0], q[1], q[2], q[3]);
      var i = x[0], j = x[1], k = x[2];
      if (k) {
        blocks.push(x);
        if (q[0] < i && q[2] < j) { queue.push([q[0], i, q[2], j]); }
        if (i + k < q[1] && j + k < q[3]) { queue.push([i + k, q[1], j + k, q[3]]); }
      }
    }
    blocks.sort(function (p, r) { return p[0] - r[0] || p[1] - r[1] || p[2] - r[2]; });
    var i1 = 0, j1 = 0, k1 = 0;
    var merged = [];
    blocks.forEach(function (blk) {
      if (i1 + k1 === blk[0] && j1 + k1 === blk[1]) { k1 += blk[2]; }
      else { if (k1) { merged.push([i1, j1, k1]); } i1 = blk[0]; j1 = blk[1]; k1 = blk[2]; }
    });
    if (k1) { merged.push([i1, j1, k1]); }
    merged.push([a.length, b.length, 0]);
    var ops = [];
    var ai = 0, bj = 0;
    merged.forEach(function (blk) {
      var tag = "";
      if (ai < blk[0] && bj < blk[1]) { tag = "replace"; } else if (ai < blk[0]) { tag = "delete"; } else if (bj < blk[1]) { tag = "insert"; }
      if (tag) { ops.push([tag, ai, blk[0], bj, blk[1]]); }
      ai = blk[0] + blk[2];
      bj = blk[1] + blk[2];
      if (blk[2]) { ops.push(["equal", blk[0], ai, blk[1], bj]); }
    });
    return ops;
  }

  function splitWords(joined) { return joined.split(" ").map(function (w) { return w === NUL ? null : w.toLowerCase(); }); }

  // items: [{w, id, slug, repo, r}] in record order, those with literal words only.
  function NearIndex(items, C) {
    this.C = C;
    this.items = items;
    this.seqs = items.map(function (it) { return splitWords(it.w); });
    this.postings = new Map();
    this.idfs = new Map();
    var self = this;
    this.seqs.forEach(function (seq, i) {
      var seen = new Set();
      seq.forEach(function (w) {
        if (w === null || seen.has(w)) { return; }
        seen.add(w);
        var p = self.postings.get(w);
        if (!p) { p = []; self.postings.set(w, p); }
        p.push(i);
      });
    });
    this.weights = this.seqs.map(function (seq) { return fsum(seq.filter(function (w) { return w !== null; }).map(self.idf, self)); });
  }
  NearIndex.prototype.idf = function (word) {
    var value = this.idfs.get(word);
    if (value === undefined) {
      var posting = this.postings.get(word);
      value = Math.log(1.0 + (this.items.length + 1) / ((posting ? posting.length : 0) + 0.5));
      this.idfs.set(word, value);
    }
    return value;
  };
  NearIndex.prototype.candidates = function (lowered) {
    var common = Math.max(8, Math.floor(this.items.length * this.C.COMMON_SHARE));
    var acc = new Map();
    var self = this;
    Array.from(new Set(lowered)).forEach(function (w) {
      var posting = self.postings.get(w);
      if (!posting || posting.length > common) { return; }
      var weight = self.idf(w);
      posting.forEach(function (i) { acc.set(i, (acc.get(i) || 0.0) + weight); });
    });
    var keys = Array.from(acc.keys());
    var key = function (i) { return acc.get(i) / (self.weights[i] || 1.0); };
    keys.sort(function (p, r) { return key(r) - key(p) || p - r; });
    return keys.slice(0, this.C.CANDIDATES);
  };
  NearIndex.prototype.compare = function (i, text, original, lowered) {
    var C = this.C, self = this, idf = function (w) { return self.idf(w); };
    var item = this.items[i];
    var seq = this.seqs[i];
    var keyed = seq.map(function (w, k) { return w === null ? "\0slot" + k : w; });
    var display = item.w.split(" ").map(function (w) { return w === NUL ? "…" : w; });
    var ops = opcodes(keyed, lowered);
    var matched = 0.0, extra = 0.0;
    var total = fsum(seq.filter(function (w) { return w !== null; }).map(idf));
    var diff = [];
    ops.forEach(function (op) {
      var tag = op[0], i1 = op[1], i2 = op[2], j1 = op[3], j2 = op[4];
      var recWords = [], hasSlot = false, slots = 0;
      for (var k = i1; k < i2; k++) { if (seq[k] === null) { hasSlot = true; slots++; } else { recWords.push(display[k]); } }
      var txt = original.slice(j1, j2);
      if (tag === "equal") {
        matched += fsum(seq.slice(i1, i2).map(idf));
        diff.push(["same", recWords.join(" "), txt.join(" ")]);
        return;
      }
      if (hasSlot && txt.length) {
        var keep = C.MAX_VALUE_WORDS * slots;
        diff.push(["value", "…", txt.slice(0, keep).join(" ")]);
        if (txt.length > keep) {
          diff.push(["extra", "", txt.slice(keep).join(" ")]);
          extra += fsum(lowered.slice(j1 + keep, j2).map(idf));
        }
        if (recWords.length) { diff.push(["missing", recWords.join(" "), ""]); }
        return;
      }
      if (recWords.length && txt.length) { diff.push(["changed", recWords.join(" "), txt.join(" ")]); }
      else if (recWords.length) { diff.push(["missing", recWords.join(" "), ""]); }
      else if (txt.length) { diff.push(["extra", "", txt.join(" ")]); }
      extra += (txt.length && !hasSlot) ? fsum(lowered.slice(j1, j2).map(idf)) : 0.0;
    });
    var shared = 0;
    ops.forEach(function (op) { if (op[0] === "equal") { shared += op[2] - op[1]; } });
    if (matched === 0.0 || total === 0.0 || shared < C.MIN_SHARED_WORDS) { return null; }
    var similarity = matched / (total + extra);
    var span = this.spanScore(seq, lowered, ops, matched, total, extra, shared);
    return { i: i, item: item, similarity: Math.max(similarity, span[0]), closeness: span[1], message: text, diff: diff,
             differences: diff.filter(function (d) { return d[0] === "changed" || d[0] === "missing" || d[0] === "extra"; }).length,
             evidence: evidence(seq, ops, C) };
  };
  // errkb.match.near._evidence: the text holds the record's opening (OPENING_WORDS of its
  // first words, values between them allowed) or RUN_WORDS of its words in one run.
  function evidence(seq, ops, C) {
    var literal = seq.filter(function (w) { return w !== null; }).length;
    var opening = 0, run = 0, inOpening = true;
    ops.forEach(function (op) {
      var tag = op[0], i1 = op[1], i2 = op[2], j1 = op[3], j2 = op[4];
      if (tag === "equal") {
        run = Math.max(run, i2 - i1);
        if (inOpening) { opening += i2 - i1; }
        return;
      }
      if (!inOpening) { return; }
      if (i1 === i2 && opening === 0) { return; }
      var slots = 0;
      for (var k = i1; k < i2; k++) { if (seq[k] === null) { slots++; } }
      if (!(slots === i2 - i1 && j2 - j1 <= C.MAX_VALUE_WORDS * slots)) { inOpening = false; }
    });
    // a record opening with a wildcard needs twice the words (errkb.match.near._evidence)
    var scale = seq.length && seq[0] === null ? 2 : 1;
    return opening >= Math.min(C.OPENING_WORDS * scale, literal) || run >= C.RUN_WORDS ||
      (opening >= scale && run >= C.RUN_WORDS - C.OPENING_WORDS);
  }
  NearIndex.prototype.spanScore = function (seq, lowered, ops, matched, total, extra, shared) {
    var C = this.C, self = this, idf = function (w) { return self.idf(w); };
    var equal = [];
    ops.forEach(function (op, k) { if (op[0] === "equal") { equal.push(k); } });
    var first = equal[0], last = equal[equal.length - 1];
    function slotCount(i1, i2) { var n = 0; for (var k = i1; k < i2; k++) { if (seq[k] === null) { n++; } } return n; }
    function textWeight(list) {
      var weight = 0.0, count = 0;
      list.forEach(function (op) {
        var j1 = op[3], j2 = op[4];
        var slots = slotCount(op[1], op[2]);
        if (slots) { j1 = Math.min(j2, j1 + C.MAX_VALUE_WORDS * slots); }
        weight += fsum(lowered.slice(j1, j2).map(idf));
        count += j2 - j1;
      });
      return [weight, count];
    }
    var lead = textWeight(ops.slice(0, first));
    var trail = textWeight(ops.slice(last + 1));
    var cutWeights = [];
    var after = 0;
    ops.slice(last + 1).forEach(function (op) {
      for (var k = op[1]; k < op[2]; k++) { if (seq[k] !== null) { cutWeights.push(idf(seq[k])); } }
      after += op[4] - op[3];
    });
    var cut = fsum(cutWeights);
    var truncated = cut > 0.0 && after <= C.CUT_WORDS && matched >= C.MIN_SPAN_SHARE * total;
    var inner = ops.slice(first, last + 1).some(function (op) {
      var tag = op[0], i1 = op[1], i2 = op[2], j1 = op[3], j2 = op[4];
      return tag !== "equal" && (i2 > i1 || j2 > j1) &&
        !(tag === "replace" && slotCount(i1, i2) === i2 - i1 && j2 - j1 <= C.MAX_VALUE_WORDS);
    });
    var closeness = [];
    if (truncated) { closeness.push("truncated"); }
    if (lead[1] || (trail[1] && !truncated)) { closeness.push("extra text"); }
    if (inner || (cut && !truncated)) { closeness.push("reworded"); }
    if (!closeness.length) { closeness.push("same words"); }
    if (matched < C.MIN_SPAN_SHARE * total || shared < C.MIN_SPAN_WORDS) { return [0.0, closeness]; }
    var forgivenCut = truncated ? cut : 0.0;
    var contained = matched >= C.CONTAINED_SHARE * (total - forgivenCut);
    var forgivenExtra = contained ? lead[0] + trail[0] : 0.0;
    var score = matched / Math.max(total - forgivenCut + Math.max(extra - forgivenExtra, 0.0), matched);
    if (truncated) { score *= C.TRUNCATED_BASE + (1.0 - C.TRUNCATED_BASE) * matched / total; }
    if (forgivenExtra) { score = Math.min(score, C.EXTRA_TEXT_CAP); }
    return [score, closeness];
  };
  NearIndex.prototype.near = function (texts) {
    var C = this.C, self = this;
    if (!this.items.length) { return []; }
    var best = new Map();
    var floor = Math.min(C.MIN_SIMILARITY, C.MARGIN_FLOOR);
    dedupe(texts.filter(function (t) { return t && pyStrip(t); })).forEach(function (text) {
      var original = nearWords(text).slice(0, C.MAX_TEXT_WORDS);
      if (!original.length) { return; }
      var lowered = original.map(function (w) { return w.toLowerCase(); });
      self.candidates(lowered).forEach(function (i) {
        var found = self.compare(i, text, original, lowered);
        if (found === null || found.similarity < floor) { return; }
        var kept = best.get(i);
        if (kept === undefined || found.similarity > kept.similarity ||
            (found.similarity === kept.similarity && found.differences < kept.differences)) { best.set(i, found); }
      });
    });
    var ranked = Array.from(best.values()).filter(function (m) { return m.evidence; }).sort(function (p, r) {
      return r.similarity - p.similarity || (p.item.repo < r.item.repo ? -1 : p.item.repo > r.item.repo ? 1 : 0) ||
        (p.item.slug < r.item.slug ? -1 : p.item.slug > r.item.slug ? 1 : 0);
    });
    var shown = ranked.filter(function (m) { return m.similarity >= C.MIN_SIMILARITY; });
    if (!shown.length && ranked.length) {
      var runnerUp = ranked.length > 1 ? ranked[1].similarity : 0.0;
      if (ranked[0].similarity >= C.MARGIN_RATIO * runnerUp) { shown = ranked.slice(0, 1); }
    }
    return shown.slice(0, C.DEFAULT_LIMIT);
  };
  window.errkbNearIndex = NearIndex;  // for tests

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
    var chunk = { src: c.src, n: c.n, start: start, records: null, classes: null, matchers: null, vmatchers: null };
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
  var answer = document.getElementById("paste-answer");
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
    chunk.vmatchers = new Array(payload.records.length);
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
    var texts = query.trim() ? pasteForms(query) : [];
    texts = showAnswer(query, texts);
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
  // ---- the paste answer: what `errkb explain --json` says of the same text ----------
  // The record whose pattern matches (as the list marks it), else another release's wording
  // of a record (data/variants, matched the same way), else the near matches
  // ("Similar, not exact") of errkb.match.near, else nothing.
  function pasteText(query) {
    // as explain reads a text: one final newline ends the last line, a line's \r is dropped
    return query.slice(0, data.max_input).replace(/\n$/, "").split("\n").map(function (l) { return l.replace(/\r$/, ""); }).join("\n");
  }
  // The texts patterns are tried on: the site's own candidates and explain's normalised
  // messages, each at most max_line characters (a RegExp never sees more).
  function pasteForms(query) {
    var forms = candidates(query, data.max_input, data.max_line).concat(textMessages(pasteText(query), 0));
    return dedupe(forms.filter(function (t) { return t.length <= data.max_line && pyStrip(t); }));
  }
  // Every record whose pattern matches, in the order the paste shows them (as `errkb explain`
  // lists a log's known errors by their first line): a log's root cause before the wrapper
  // printed under it ("Engine core initialization failed. See root cause above.").
  function exactAnswer(texts, query) {
    var all = [];
    chunks.forEach(function (chunk, c) {
      if (!chunk.records) { return; }
      chunk.records.forEach(function (r, j) {
        if (!(r.p || r.gp)) { return; }
        var m = tryPattern(function () {
          if (chunk.matchers[j] === undefined) { chunk.matchers[j] = matcherFor(r.p, r.gp, chunk.classes); }
          return chunk.matchers[j];
        }, r.l, r.a, texts);
        if (m) { all.push({ kind: "match", r: r, at: positionIn(query, m.text), order: chunk.start + j }); }
      });
    });
    if (all.length) {
      all.sort(function (p, q) { return p.at - q.at || p.order - q.order; });
      all[0].others = all.slice(1);
      return all[0];
    }
    var found = null;
    chunks.some(function (chunk) {
      if (!chunk.records) { return false; }
      return chunk.records.some(function (r, j) {
        return (r.v || []).some(function (v, k) {
          if (tryPattern(function () {
            var made = chunk.vmatchers[j] || (chunk.vmatchers[j] = []);
            if (made[k] === undefined) { made[k] = matcherFor(v.p, v.gp, chunk.classes); }
            return made[k];
          }, v.l, v.a, texts)) { found = { kind: "variant", r: r, label: v.label }; }
          return found !== null;
        });
      });
    });
    return found;
  }
  // errkb.match.prefix: a paste that truly begins a record's message (a title cut short,
  // "CUDA out of memory") is that record. r.o is the record's opening literal; the rule and
  // its numbers (data.prefix) are the Python's: inside the opening, or past a long one, the
  // class agreeing where the paste names one.
  var TRAILING_CUT = /(?:\s*(?:\.\.\.|…))+\s*$/u;
  function alnumCount(s) { var n = 0; for (var ch of s) { if (/[\p{L}\p{N}]/u.test(ch)) { n++; } } return n; }
  function isBeginning(text, opening, textClass, recordClass) {
    var P = data.prefix;
    text = pyStrip(text).replace(TRAILING_CUT, "");
    if (alnumCount(text) < P.MIN_PREFIX_CHARS || pyStrip(text).split(/\s+/u).length < P.MIN_PREFIX_WORDS) { return false; }
    if (!(opening.startsWith(text) || (text.startsWith(opening) && alnumCount(opening) >= P.MIN_OPENING_CHARS))) { return false; }
    var wanted = textClass ? textClass.split(".").pop() : null;
    return !(wanted && recordClass && wanted !== recordClass);
  }
  function truncatedAnswer(texts, query) {
    var forms = [];
    var classOf = new Map();
    texts.forEach(function (t) {
      var split = splitErrorClass(t);
      if (split) { forms.push([split[1], split[0]]); classOf.set(split[1], split[0]); }
    });
    texts.forEach(function (t) { if (!classOf.has(t)) { forms.push([t, null]); } });
    var all = [];
    chunks.forEach(function (chunk) {
      if (!chunk.records) { return; }
      chunk.records.forEach(function (r, j) {
        if (!r.o) { return; }
        var hit = forms.find(function (f) { return isBeginning(f[0], r.o, f[1], r.c); });
        if (hit) { all.push({ kind: "match", truncated: true, r: r, at: positionIn(query, hit[0]), order: chunk.start + j }); }
      });
    });
    if (!all.length) { return null; }
    all.sort(function (p, q) { return p.at - q.at || p.order - q.order; });
    all[0].others = all.slice(1);
    return all[0];
  }
  // Where in the paste a text that matched starts (a normalised text may not appear verbatim:
  // its head is looked for, then it counts as after everything that does).
  function positionIn(query, text) {
    var at = query.indexOf(text);
    if (at < 0) { at = query.indexOf(text.slice(0, 40)); }
    return at < 0 ? query.length : at;
  }
  var nearIndex = null;
  function nearIndexNow() {
    if (nearIndex === null) {
      var items = [];
      chunks.forEach(function (chunk) {
        chunk.records.forEach(function (r) { if (r.w) { items.push({ w: r.w, id: r.id, slug: r.sl, repo: r.r, r: r }); } });
      });
      nearIndex = new NearIndex(items, data.near);
    }
    return nearIndex;
  }
  function recordLink(r) {
    var link = element("a", "record-link");
    link.setAttribute("href", r.u);
    link.appendChild(element("span", "msg", r.x || r.m));
    return link;
  }
  // errkb.text.normalize.repaired_forms: a message cut before its final period gets it
  // back (before the quotes or brackets around it), adjacent source string literals are
  // joined; tried only when nothing matched the texts as given. Only a text that ends
  // where the paste ends gets the period (a line inside a paste is as it was printed).
  var CLOSERS = /[)\]'"`]+$/;
  var ADJACENT_LITERALS = /(["'])[ \t]+\1/g;
  function pyRstrip(s) { return s.replace(PY_RSTRIP, ""); }  // str.rstrip(): Python's white space
  function pasteEnd(query) {
    var lines = stripAnsi(pasteText(query).replace(/\r\n/g, "\n")).split("\n");
    while (lines.length && !pyStrip(lines[lines.length - 1])) { lines.pop(); }
    var last = lines.length ? pyRstrip(lines[lines.length - 1]) : "";
    var body = pyStrip(stripPrefixes(last));
    return function (t) {
      return last.slice(last.length - t.length) === t || (body.length > 0 && t.slice(t.length - body.length) === body);
    };
  }
  function repairedForms(texts, query) {
    var atEnd = pasteEnd(query);
    var out = [];
    texts.forEach(function (t) {
      var text = pyRstrip(t);
      var forms = [text];
      var joined = text.replace(ADJACENT_LITERALS, "");
      if (joined !== text) { forms.push(joined); out.push(joined); }
      if (!atEnd(text)) { return; }
      forms.forEach(function (form) {
        var core = form.replace(CLOSERS, "");
        if (core && /[\p{L}\p{N}]$/u.test(core)) {
          out.push(core + "." + form.slice(core.length));
          if (core !== form) { out.push(form + "."); }
        }
      });
    });
    return dedupe(out.filter(function (t) { return t.length <= data.max_line; }));
  }
  // ---- the known-site tier (errkb.match.sites): where a library raises the message ------
  // Asked when no record matched, and for a log's error lines no record matched (logSiteAnswer). The manifest names a head script (sites/head-*.js:
  // libraries, files, error classes, the CUDA table, the shards' names); each shard
  // (sites/<k>-*.js) holds the served patterns whose anchor word hashes to it (errkb.site.sites),
  // so a paste loads only the shards of its own words. A pattern is literal chunks and
  // (.+?) wildcards, matched by leftmost placement of each chunk (errkb.match.chunks):
  // linear in the line, no RegExp is ever built from a pattern.
  var sitesHead = null, sitesHeadState = data.sites ? "none" : "absent";
  var siteShards = {}, siteShardState = {}, sitesFailed = [];
  var siteChunkCache = new Map();
  window.errkbSitesHead = function (head) {
    if (sitesHead) { return; }
    sitesHead = head;
    sitesHead.releaseMaps = head.libraries.map(function (lib) { return new Map(lib[2].map(function (r) { return [r[0], r[1]]; })); });
    sitesHeadState = "loaded";
    dataChanged();
  };
  window.errkbSitesShard = function (k, bucket) {
    if (siteShards[k]) { return; }
    siteShards[k] = bucket;
    siteShardState[k] = "loaded";
    dataChanged();
  };
  function loadScript(src, onerror) {
    var script = document.createElement("script");
    script.src = src;
    script.onerror = onerror;
    document.body.appendChild(script);
  }
  function wordShard(word, n) {  // FNV-1a, as errkb.site.sites.word_shard
    var h = 0x811c9dc5;
    for (var i = 0; i < word.length; i++) { h = Math.imul(h ^ word.charCodeAt(i), 0x01000193) >>> 0; }
    return h % n;
  }
  var SITE_WORD = /[A-Za-z0-9_]+(?:\.[A-Za-z_][A-Za-z0-9_]*)*/g;
  function lineWords(line) {  // a dotted run also holds its plain words ("torch.cuda" holds "cuda")
    var out = [];
    (line.match(SITE_WORD) || []).forEach(function (w) {
      out.push(w);
      if (w.indexOf(".") >= 0) { w.split(".").forEach(function (p) { out.push(p); }); }
    });
    return out;
  }
  // errkb.match.chunks.chunks_of: a served pattern's literal chunks, null for a wildcard.
  // The tokenizer is a fixed RegExp over the pattern's text, never one built from it.
  var SITE_TOKEN = /(\(\.\+\?\)|\(\[\\s\\S\]\+\?\))|\\x([0-9a-fA-F]{2})|\\(.)|([^\\.^$*+?{}[\]|()]+)|(.)/gsu;
  var SITE_CONTROL = { n: "\n", t: "\t", r: "\r", f: "\f", v: "\v" };
  function siteChunks(pattern) {
    var got = siteChunkCache.get(pattern);
    if (got !== undefined) { return got; }
    var out = [], buf = "", m, bad = false;
    SITE_TOKEN.lastIndex = 0;
    while ((m = SITE_TOKEN.exec(pattern)) !== null) {
      if (m[1] !== undefined) { if (buf) { out.push(buf); buf = ""; } out.push(null); }
      else if (m[4] !== undefined) { buf += m[4]; }
      else if (m[3] !== undefined) { buf += Object.prototype.hasOwnProperty.call(SITE_CONTROL, m[3]) ? SITE_CONTROL[m[3]] : m[3]; }
      else if (m[2] !== undefined) { buf += String.fromCharCode(parseInt(m[2], 16)); }
      else { bad = true; break; }
    }
    if (buf) { out.push(buf); }
    got = bad ? null : out;
    siteChunkCache.set(pattern, got);
    return got;
  }
  // errkb.match.chunks.chunks_match: leftmost placement; a wildcard takes at least one
  // character (counted in code points, as Python counts).
  // errkb.match.chunks.chunks_span: [start of the first literal, end of the last], or null.
  function chunksSpan(chunks, text) {
    var pos = 0, gap = 0, started = false, start = 0;
    for (var i = 0; i < chunks.length; i++) {
      var c = chunks[i];
      if (c === null) { gap++; continue; }
      var from = advance(text, started ? pos : 0, gap);
      if (from < 0) { return null; }
      var at = text.indexOf(c, from);
      if (at < 0) { return null; }
      if (!started) { start = at; }
      pos = at + c.length;
      gap = 0;
      started = true;
    }
    if (advance(text, started ? pos : 0, gap) < 0) { return null; }
    return started ? [start, pos] : [0, 0];
  }
  // errkb.match.chunks.message_span: a pattern ending in a literal must end where the message
  // does ("group_size must be greater than 0" is not "... than 0 or equal to -1"): the first
  // placement of its last literal, from the leftmost on, that END_LOOKAHEAD accepts, searched in
  // the marked fold (foldMarked: a folded line break or tab is "\n" there, and ends the message).
  var SITE_TRAILER = "\\((?:Triggered internally at|function |[A-Za-z0-9_]+=|[A-Za-z0-9_./-]+\\.(?:py|pyx|c|cc|cpp|cu|cuh|h|hpp):[0-9]+\\))" +
                     "|Traceback \\(most recent call last\\)";
  var SITE_NEXT_WORD = "(?:[A-Za-z0-9_('\"`]|-[0-9])";
  var SITE_END = "(?![.,;:!?] (?!" + SITE_TRAILER + ")" + SITE_NEXT_WORD + "| (?!" + SITE_TRAILER + "|[A-Za-z0-9_.]+=)" + SITE_NEXT_WORD;
  var END_LOOKAHEAD = SITE_END + ")", WORD_END_LOOKAHEAD = SITE_END + "|[A-Za-z0-9_])";
  var siteEndCache = new Map();
  function siteEndOf(literal) {
    var re = siteEndCache.get(literal);
    if (re) { return re; }
    var body = "";
    for (var ch of literal) { body += ch === " " ? "[ \\n]" : ch.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"); }
    re = new RegExp(body + (/[A-Za-z0-9_.]/.test(literal.charAt(literal.length - 1)) ? WORD_END_LOOKAHEAD : END_LOOKAHEAD), "g");
    siteEndCache.set(literal, re);
    return re;
  }
  function messageSpan(chunks, text, marked) {
    var span = chunksSpan(chunks, text);
    if (span === null || !chunks.length || chunks[chunks.length - 1] === null) { return span; }
    var last = chunks[chunks.length - 1], re = siteEndOf(last);
    re.lastIndex = span[1] - last.length;
    var m = re.exec(marked);
    if (m === null) { return null; }
    var literals = chunks.filter(function (c) { return c !== null; }).length;
    return [literals > 1 ? span[0] : m.index, m.index + m[0].length];
  }
  // errkb.match.chunks.fold_marked: foldSpace, but a run holding a line break or tab becomes "\n"
  function foldMarked(text) {
    return text.replace(SITE_SPACE, function (run) { return /[^ ]/.test(run) ? "\n" : " "; });
  }
  // errkb.match.chunks.unfolded_span: the span of text that foldSpace(text).slice(start, end)
  // came from, with the whitespace its edges hold.
  var SITE_NONSPACE = /[^ \t\n\r\f\v]+/g;
  function sitePast(text, want) {  // just after the want-th non-whitespace character
    if (want === 0) { return 0; }
    SITE_NONSPACE.lastIndex = 0;
    var m;
    while ((m = SITE_NONSPACE.exec(text)) !== null) {
      var n = m[0].length;
      if (want <= n) { return m.index + want; }
      want -= n;
    }
    return text.length;
  }
  function skipSpaces(text, pos) {
    while (pos < text.length && " \t\n\r\f\v".indexOf(text.charAt(pos)) >= 0) { pos++; }
    return pos;
  }
  function unfoldedSpan(text, folded, start, end) {
    function spacesBefore(k) { return folded.slice(0, k).split(" ").length - 1; }
    var first = sitePast(text, start - spacesBefore(start));
    if (folded.charAt(start) !== " ") { first = skipSpaces(text, first); }
    var last = sitePast(text, end - spacesBefore(end));
    if (end > start && folded.charAt(end - 1) === " ") { last = skipSpaces(text, last); }
    return [first, last];
  }
  // errkb.match.chunks.fold_space / folded_chunks: each run of ASCII whitespace is one
  // space, in the text and in the pattern's literals (whose own edges are dropped).
  var SITE_SPACE = /[ \t\n\r\f\v]+/g;
  function foldSpace(text) { return text.replace(SITE_SPACE, " "); }
  var siteFoldedCache = new Map();
  function siteFoldedChunks(pattern) {
    var got = siteFoldedCache.get(pattern);
    if (got !== undefined) { return got; }
    var chunks = siteChunks(pattern);
    got = null;
    if (chunks) {
      got = [];
      chunks.forEach(function (c, n) {
        if (c === null) { got.push(null); return; }
        var f = foldSpace(c);
        if (n === 0) { f = f.replace(/^ +/, ""); }
        if (n === chunks.length - 1) { f = f.replace(/ +$/, ""); }
        if (f) { got.push(f); }
      });
    }
    siteFoldedCache.set(pattern, got);
    return got;
  }
  function codePoints(s) { var n = 0; for (var ch of s) { n++; } return n; }  // len() in Python
  // errkb.match.sites._trusted_on: what "half" is half of, the folded line without its log header
  function messageLength(folded) { return codePoints(pyStrip(folded.slice(prefixLength(folded, true)))); }
  // The shards a text needs, requested if missing: null once all are here (or failed).
  function siteShardsWanted(lines) {
    var n = sitesHead.shards.length, waiting = false;
    lines.forEach(function (line) {
      lineWords(line).forEach(function (w) {
        var k = wordShard(w, n);
        if (siteShardState[k] === undefined) {
          siteShardState[k] = "loading";
          loadScript(sitesHead.shards[k], function () { siteShardState[k] = "failed"; sitesFailed.push(sitesHead.shards[k]); dataChanged(); });
        }
        if (siteShardState[k] === "loading") { waiting = true; }
      });
    });
    return waiting;
  }
  function siteOf(row) {
    var lib = sitesHead.libraries[row[0]];
    var releases = row[7];
    var last = releases.slice(releases.lastIndexOf(",") + 1);
    var rels = lib[2];
    var newest = last ? last.slice(last.lastIndexOf("-") + 1) : (rels.length ? rels[rels.length - 1][0] : "");
    var commit = sitesHead.releaseMaps[row[0]].get(newest);
    var site = { library: lib[0], file: sitesHead.files[row[1]], line: row[2], "function": row[3], condition: row[4],
                 kind: sitesHead.kinds[row[5]], errorClass: row[6] === null ? null : sitesHead.errors[row[6]],
                 releases: releases, release: newest, commit: commit === undefined ? null : commit, url: null,
                 copies: row.length > 8 ? row[8] : null };
    var repo = lib[1];
    if (repo && site.commit && /^[0-9a-f]{7,40}$/.test(site.commit)) {  // errkb.match.sites._COMMIT: a short hash links too
      site.url = "https://github.com/" + repo + "/blob/" + site.commit + "/" + site.file + "#L" + site.line;
    } else if (repo && site.release && /^\d+(?:\.\d+)*(?:\.post\d+)?$/.test(site.release)) {
      site.url = "https://github.com/" + repo + "/blob/v" + site.release + "/" + site.file + "#L" + site.line;
    }
    return site;
  }
  // errkb.match.sites.table_holds: one of the entry's words (if it asks for any), none of its
  // table's "unless" words, then its message, or its code as a whole word
  function tableHolds(c, line) {
    if (c.words.length && !c.words.some(function (w) { return line.indexOf(w) >= 0 || line.indexOf(w.toLowerCase()) >= 0; })) { return false; }
    if (c.unless.some(function (w) { return line.indexOf(w) >= 0; })) { return false; }
    if (line.indexOf(c.message) >= 0) { return true; }
    if (!c.code) { return false; }
    for (var at = line.indexOf(c.code); at >= 0; at = line.indexOf(c.code, at + 1)) {
      var end = at + c.code.length;
      if ((at === 0 || !/[A-Za-z0-9_]/.test(line.charAt(at - 1))) && (end === line.length || !/[A-Za-z0-9_]/.test(line.charAt(end)))) { return true; }
    }
    return false;
  }
  // errkb.match.sites.SiteIndex.match, then explain's one match per pattern: returns
  // "loading", "absent", or the matches (pattern, line, trust, meaning, sites).
  // errkb.match.sites._trusted_on: a "half" pattern's text is its literal text and the values it
  // encloses in a pair of its own brackets or quotes (_enclosed_length), where it matched at span
  var SITE_CLOSERS = { "(": ")", "[": "]", "{": "}", "<": ">", "'": "'", "\"": "\"", "`": "`" };
  function siteCovered(e, fchunks, folded, span) {
    var last = -1, placed = [], pos = span[0], gap = 0, total = 0;
    fchunks.forEach(function (c, k) { if (c !== null) { last = k; } });
    for (var k = 0; k < fchunks.length; k++) {
      var c = fchunks[k];
      if (c === null) { gap++; continue; }
      var from = advance(folded, pos, gap);
      var at = from < 0 ? -1 : k === last ? span[1] - c.length : folded.indexOf(c, from);
      if (from < 0 || at < from) { return e[3]; }
      placed.push([k, at, at + c.length]);
      pos = at + c.length;
      gap = 0;
    }
    for (var n = 1; n < placed.length; n++) {
      var before = fchunks[placed[n - 1][0]].replace(/ +$/, ""), after = fchunks[placed[n][0]].replace(/^ +/, "");
      if (placed[n][0] - placed[n - 1][0] === 2 && before && after &&
          Object.prototype.hasOwnProperty.call(SITE_CLOSERS, before.slice(-1)) && SITE_CLOSERS[before.slice(-1)] === after.charAt(0)) {
        total += codePoints(folded.slice(placed[n - 1][2], placed[n][1]));
      }
    }
    return e[3] + total;
  }
  function siteAnswer(text) {
    if (sitesHeadState === "absent") { return "absent"; }
    if (sitesHeadState === "none") {
      sitesHeadState = "loading";
      loadScript(data.sites, function () { sitesHeadState = "failed"; sitesFailed.push(data.sites); dataChanged(); });
    }
    if (sitesHeadState === "loading") { return "loading"; }
    if (sitesHeadState === "failed") { return []; }
    var lines = text.split("\n");
    if (siteShardsWanted(lines.filter(function (l) { return l; }))) { return "loading"; }
    var found = [], multiline = new Map();
    lines.forEach(function (line, n) {
      if (!line) { return; }
      var candidates = new Map();
      lineWords(line).forEach(function (w) {
        var shard = siteShards[wordShard(w, sitesHead.shards.length)];
        var list = shard && Object.prototype.hasOwnProperty.call(shard, w) ? shard[w] : null;
        if (list) { list.forEach(function (e) { candidates.set(e[0], e); }); }
      });
      var entries = Array.from(candidates.values()).sort(function (p, q) { return q[3] - p[3] || p[0] - q[0]; });
      var folded = foldSpace(line);
      var marked = foldMarked(line);
      var stripped = messageLength(folded);
      entries.slice(0, sitesHead.max_candidates).forEach(function (e) {
        var chunks = siteChunks(e[1]);
        if (!chunks) { return; }
        if (chunks.some(function (c) { return c !== null && c.indexOf("\n") >= 0; })) { multiline.set(e[0], e); return; }
        var span = messageSpan(siteFoldedChunks(e[1]), folded, marked);
        if (span === null) { return; }
        if (!e[2] && siteCovered(e, siteFoldedChunks(e[1]), folded, span) * 2 < stripped) { return; }  // "half": its text covers half the line
        found.push([n + 1, e]);
      });
    });
    var foldedText = multiline.size ? foldSpace(text) : "";
    var markedText = multiline.size ? foldMarked(text) : "";
    Array.from(multiline.values()).sort(function (p, q) { return p[0] - q[0]; }).forEach(function (e) {
      var span = messageSpan(siteFoldedChunks(e[1]), foldedText, markedText);
      if (!span) { return; }
      var edges = unfoldedSpan(text, foldedText, span[0], span[1]);
      var held = text.slice(edges[0], edges[1]);
      var at = edges[0] + held.length - held.replace(/^[ \t\n\r\f\v]+/, "").length;  // its first text
      var number = text.slice(0, at).split("\n").length;
      // joined onto one line (a line break at its edges does not count): "half" must cover half of it
      if (held.replace(/^[ \t\n\r\f\v]+|[ \t\n\r\f\v]+$/g, "").indexOf("\n") < 0 &&
          !e[2] && siteCovered(e, siteFoldedChunks(e[1]), foldedText, span) * 2 < messageLength(foldSpace(lines[number - 1]))) { return; }
      found.push([number, e]);
    });
    found.sort(function (p, q) { return p[0] - q[0] || q[1][3] - p[1][3] || p[1][0] - q[1][0]; });
    var out = [];
    lines.forEach(function (line, n) {  // the curated tables (CUDA, NCCL, torchrun, PyTorch's C++), on a line holding the table's word
      sitesHead.cuda.forEach(function (c) {
        if (tableHolds(c, line)) {
          out.push({ pattern: c.message, line: n + 1, trust: c.table, meaning: c.meaning, name: c.name, sites: [] });
        }
      });
    });
    out = out.concat(found.map(function (f) {
      return { pattern: f[1][1], line: f[0], trust: f[1][2] ? "strong" : "half", meaning: null, sites: f[1][4].map(siteOf) };
    }));
    out.sort(function (p, q) { return p.line - q.line; });  // stable: a line's table entries before its sites
    var seen = new Set();  // one per pattern; a table's entry one per table and message (explainer._sites)
    return out.filter(function (m) { var k = siteKey(m); if (seen.has(k)) { return false; } seen.add(k); return true; });
  }
  // errkb.explain.explainer: a paste no site was found in, read as other forms of its text, each
  // site at the line of the paste its message begins on (_line_of): its lines joined back
  // (wrappedMessages: several lines only), then the messages its wrappers carry (unwrappedMessages)
  function wrappedSiteAnswer(text) {
    return text.split("\n").length < 2 ? [] : formsSiteAnswer(text, wrappedMessages(text));
  }
  function unwrappedSiteAnswer(text) { return formsSiteAnswer(text, unwrappedMessages(text, 0)); }
  function formsSiteAnswer(text, forms) {
    var lines = text.split("\n"), out = [], seen = new Set(), waiting = false;
    forms.forEach(function (form) {
      var got = siteAnswer(form);
      if (typeof got === "string") { waiting = waiting || got === "loading"; return; }
      got.forEach(function (m) {
        if (seen.has(siteKey(m))) { return; }
        seen.add(siteKey(m));
        m.line = siteLineOf(lines, m);
        out.push(m);
      });
    });
    return waiting ? "loading" : out;
  }
  function pySplit(s) { var t = pyStrip(s); return t ? t.split(new RegExp(PY_SPACE + "+", "u")) : []; }
  function siteLineOf(lines, m) {  // errkb.explain.explainer._line_of
    var literal = m.meaning !== null ? m.pattern :
      (siteChunks(m.pattern) || []).filter(function (c) { return c && /[\p{L}\p{N}]/u.test(c); })[0] || "";
    var words = pySplit(literal).slice(0, 3).join(" ");
    var starts = [], pieces = [], at = 0;
    lines.forEach(function (line) {
      var piece = pySplit(line).join(" ");
      starts.push(at);
      pieces.push(piece);
      at += codePoints(piece) + 1;
    });
    var joined = pieces.join(" ");
    var found = words ? joined.indexOf(words) : -1;
    if (found < 0) { return 1; }
    found = codePoints(joined.slice(0, found));
    var n = 0;
    while (n < starts.length && starts[n] <= found) { n++; }
    return n;
  }
  function siteKey(m) { return (m.meaning !== null ? m.trust : "") + "\u0000" + m.pattern; }
  function siteTemplate(pattern) {  // as explain shows it: the text, "…" for each value
    return (siteChunks(pattern) || []).map(function (c) { return c === null ? "…" : c; }).join("");
  }
  function siteMore(m) {  // errkb.match.sites.SiteMatch.more, for the folded sites ("" when none)
    var copied = null, places = 0;
    m.sites.forEach(function (s) {
      places += s.copies || 1;
      if (s.copies && (copied === null || s.copies > copied.copies)) { copied = s; }
    });
    var more = places - Math.min(m.sites.length, sitesHead.sites_shown);
    if (copied === null) { return more ? "… and " + more.toLocaleString("en-US") + " more sites" : ""; }
    var copies = "generated copies: " + copied.copies.toLocaleString("en-US") + " files of " + copied.library + " " +
      copied.release + " raise it, the index keeps the first";
    return more ? "… and " + more.toLocaleString("en-US") + " more sites; " + copies : "… " + copies;
  }
  function siteDescribe(s) {  // errkb.match.sites.Site.describe
    var where = s.file + ":" + s.line + (s["function"] && s["function"] !== "<module>" ? " in " + s["function"] : "");
    var verb = { log: "logged", warn: "warned", assert: "asserted", factory: "built",  // errkb.match.sites._VERBS
                 response: "returned as an HTTP error" }[s.kind] || "raised";
    if (s.kind === "log" && s.errorClass === "INFO") { verb = "logged at info level"; }  // Site.describe's
    var partly = s.library === "torch" && /\.(?:cpp|cu|cc)$/.test(s.file) ?  // errkb.match.sites._SOURCE_READ_PARTLY
      " (the releases whose C++ source errkb read)" : "";
    return verb + " at " + where + (s.condition ? " when " + s.condition : "") + "; seen in " + s.library + " " + s.releases + partly;
  }
  // errkb.explain.explainer._explain_log's sites: in a text of several lines where records
  // matched, the lines no record matches that name an error class (explain keeps at most 20
  // such messages of a log), each at its own line; "loading" while their shards load.
  var LOG_SITE_MESSAGES = 20;
  function logSiteAnswer(text) {
    var lines = text.split("\n"), out = [], seen = new Set(), kept = new Set(), waiting = false;
    var filled = lines.filter(function (l) { return pyStrip(l); });
    // one traceback is one message to explain (text mode: no sites beside a match)
    if (filled.length < 2 || /^Traceback \(most recent call last\):/.test(pyStrip(filled[0]))) { return []; }
    lines.forEach(function (line, n) {
      var body = pyStrip(stripPrefixes(stripAnsi(line)));
      if (!splitErrorClass(body)) { return; }
      var forms = textMessages(line, 0), message = forms[forms.length - 1];  // explain's forms[-1]: the bare message
      if (kept.has(message) || kept.size >= LOG_SITE_MESSAGES) { return; }  // distinct messages, as explain keeps them
      if (exactAnswer(pasteForms(line), line)) { return; }  // a record answers this line (explain: a matched message)
      kept.add(message);
      var got = siteAnswer(message);
      if (typeof got === "string") { waiting = waiting || got === "loading"; return; }
      got.forEach(function (m) {
        if (seen.has(siteKey(m))) { return; }
        seen.add(siteKey(m));
        m.line = n + 1;
        out.push(m);
      });
    });
    return waiting ? "loading" : out;
  }
  // errkb.explain.explainer._explain_short: where the paste as given found no record and no
  // site, each form it quotes (printedForms) is answered as a paste of its own, its sites'
  // lines the paste's. {hit, texts} or {sites, form}; null for none, "loading" while waiting.
  function printedAnswer(pasted) {
    if (pasted.split("\n").length > TEXT_MAX_LINES) { return null; }  // a log: explain's log path
    var forms = printedForms(stripAnsi(pasted));
    for (var k = 0; k < forms.length; k++) {
      var form = forms[k];
      if (form.text.split("\n").length > TEXT_MAX_LINES) { continue; }  // no way round the bounds
      var texts = pasteForms(form.text), hit = exactAnswer(texts, form.text);
      if (!hit) {
        var repaired = repairedForms(texts, form.text);
        hit = repaired.length ? exactAnswer(repaired, form.text) : null;
        if (hit) { texts = repaired; }
      }
      if (!hit) { hit = truncatedAnswer(textMessages(form.text, 0), form.text); }
      if (hit) { return { hit: hit, texts: texts }; }
      var sites = siteAnswer(form.text);
      if (Array.isArray(sites) && !sites.length) { sites = wrappedSiteAnswer(form.text); }
      if (Array.isArray(sites) && !sites.length) { sites = unwrappedSiteAnswer(form.text); }
      if (sites === "loading") { return "loading"; }  // an earlier form first, as explain reads them
      if (Array.isArray(sites) && sites.length) {
        sites.forEach(function (m) { m.line = form.lineForLine ? form.first + m.line - 1 : form.first; });
        return { sites: sites, form: form };
      }
    }
    return null;
  }
  function showSites(matches, heading, log) {
    var box = element("div", "site-answer");
    box.appendChild(element("p", "answer-head", heading || "Where it is raised (a known site: errkb has no fix for it):"));
    var list = element("ol", "site-list");
    matches.forEach(function (m) {
      var li = element("li", "site-match");
      li.setAttribute("data-pattern", m.pattern);
      li.setAttribute("data-line", String(m.line));
      li.setAttribute("data-trust", m.trust);
      var at = log ? "line " + m.line + ": " : "";
      if (m.meaning !== null) {
        li.setAttribute("data-meaning", m.meaning);
        li.appendChild(element("p", "site-message", at + m.name + ": " + m.meaning));
      } else {
        li.appendChild(element("p", "site-message", at + siteTemplate(m.pattern)));
        // the first sitesHead.sites_shown (errkb.match.sites.SITES_SHOWN), newest first; the rest
        // folded under "and N more" (FlashInfer's generated kernels: one check in 435 files)
        var where = element("ul", "site-places"), rest = null;
        m.sites.forEach(function (s, k) {
          var place = element("li", "site");
          place.setAttribute("data-site", JSON.stringify(s));
          place.appendChild(element("span", "site-where", siteDescribe(s)));
          if (s.url) {
            place.appendChild(document.createTextNode(" "));
            var link = element("a", "site-source", "source");
            link.setAttribute("href", s.url);
            link.setAttribute("rel", "noopener noreferrer");
            place.appendChild(link);
          }
          if (k < sitesHead.sites_shown) { where.appendChild(place); return; }
          if (rest === null) { rest = element("ul", "site-places"); }
          rest.appendChild(place);
        });
        li.appendChild(where);
        var moreText = siteMore(m);
        if (rest !== null) {
          var more = element("details", "site-more");
          more.appendChild(element("summary", null, moreText));
          more.appendChild(rest);
          li.appendChild(more);
        } else if (moreText) {  // generated copies beyond the few the index keeps: said, nothing to fold
          li.appendChild(element("p", "site-more", moreText));
        }
      }
      list.appendChild(li);
    });
    box.appendChild(list);
    return box;
  }

  // Shows the answer; returns the texts it matched on (the repaired forms where only
  // those matched), which the list then marks its pattern matches with.
  function showAnswer(query, texts) {
    answer.textContent = "";
    answer.removeAttribute("data-id");
    answer.removeAttribute("data-label");
    answer.removeAttribute("data-truncated");
    answer.removeAttribute("data-ids");
    answer.removeAttribute("data-sites");
    answer.removeAttribute("data-sites-missing");
    var kind = "none";
    if (query.trim()) {
      var hit = exactAnswer(texts, query);
      if (!hit) {
        var repaired = repairedForms(texts, query);
        hit = repaired.length ? exactAnswer(repaired, query) : null;
        if (hit) { texts = repaired; }
      }
      // on explain's own forms of the text (errkb.text.normalize.text_messages), as the CLI does
      if (!hit && complete()) { hit = truncatedAnswer(textMessages(pasteText(query), 0), query); }
      var sites = null, printed = null;
      if (!hit && complete()) {
        sites = siteAnswer(pasteText(query));
        if (Array.isArray(sites) && !sites.length) { sites = wrappedSiteAnswer(pasteText(query)); }
        if (Array.isArray(sites) && !sites.length) { sites = unwrappedSiteAnswer(pasteText(query)); }
        if ((Array.isArray(sites) && !sites.length) || sites === "absent") {  // a site built without the layer too
          printed = printedAnswer(pasteText(query));
          if (printed === "loading") { sites = "loading"; }
          if (printed && printed.hit) { hit = printed.hit; texts = printed.texts; }
          if (printed && printed.sites) { sites = printed.sites; }
        }
      }
      if (hit) {
        kind = hit.kind;
        answer.setAttribute("data-id", hit.r.id);
        var others = hit.others || [];
        answer.setAttribute("data-ids", [hit.r.id].concat(others.map(function (o) { return o.r.id; })).join(" "));
        if (hit.truncated) { answer.setAttribute("data-truncated", "1"); }
        answer.appendChild(element("p", "answer-head", hit.kind !== "match" ? "Matches an " + hit.label + ":" :
          hit.truncated ? "Begins a known error's message (the text stops inside it):" :
          others.length ? "Matches " + (others.length + 1) + " known errors, in the order the text shows them:" : "Matches a known error:"));
        if (hit.label) { answer.setAttribute("data-label", hit.label); }
        if (!others.length) { answer.appendChild(recordLink(hit.r)); } else {
          var found = element("ol", "match-list");
          [hit].concat(others).forEach(function (o) {
            var li = element("li", "match");
            li.setAttribute("data-id", o.r.id);
            li.appendChild(recordLink(o.r));
            found.appendChild(li);
          });
          answer.appendChild(found);
        }
        // a log's other error lines raised at known sites, after its known errors (as explain);
        // asked once every record has loaded (a line's record may be in a chunk still loading)
        if (hit.truncated || (printed && printed.hit)) {
          // a text that begins a record, a record of a quoted form: explain's text mode, no sites
          answer.setAttribute("data-sites", "0");
        } else if (!complete()) {
          answer.setAttribute("data-sites", "loading");
        } else {
          var logSites = logSiteAnswer(pasteText(query));
          answer.setAttribute("data-sites", typeof logSites === "string" ? logSites : String(logSites.length));
          if (sitesFailed.length) { answer.setAttribute("data-sites-missing", sitesFailed.join(" ")); }
          if (typeof logSites !== "string" && logSites.length) {
            answer.appendChild(showSites(logSites, "Also in this text, raised at known sites (where, not a fix):", true));
          }
        }
      } else if (!complete()) {
        kind = "loading";
        answer.appendChild(element("p", "answer-head", "No exact match in the records loaded so far; similar records are shown once the rest has loaded."));
      } else {
        // no record matched: where a library raises it, if a known site does (never a fix);
        // near matches of the text answered (a quoted form's, where one found its site)
        var near = nearIndexNow().near(textMessages(printed && printed.sites ? printed.form.text : pasteText(query), 0));
        answer.setAttribute("data-sites", typeof sites === "string" ? sites : String(sites.length));
        if (sitesFailed.length) { answer.setAttribute("data-sites-missing", sitesFailed.join(" ")); }
        if (typeof sites !== "string" && sites.length) {
          kind = "site";
          answer.appendChild(element("p", "answer-head", "No known error matches this text."));
          answer.appendChild(showSites(sites));
        } else if (sites === "loading" && !near.length) {
          kind = "loading";
          answer.appendChild(element("p", "answer-head", "No known error matches this text; looking up where it is raised…"));
        }
        if (near.length) {
          kind = "near";
          answer.setAttribute("data-id", near[0].item.id);
          answer.appendChild(element("p", "answer-head", "Similar, not exact (the message may have changed between versions):"));
          var list = element("ol", "near-list");
          near.forEach(function (n) {
            var li = element("li", "near");
            li.setAttribute("data-id", n.item.id);
            li.setAttribute("data-similarity", String(n.similarity));
            li.setAttribute("data-closeness", n.closeness.join(", "));
            li.appendChild(recordLink(n.item.r));
            li.appendChild(element("span", "meta", " " + n.item.repo + " · similarity " + (Math.round(n.similarity * 1e4) / 1e4).toFixed(2) + " [" + n.closeness.join(", ") + "]"));
            list.appendChild(li);
          });
          answer.appendChild(list);
        }
      }
    }
    answer.setAttribute("data-kind", kind);
    answer.setAttribute("data-q", String(query.length));  // which text it answers (tests wait on it)
    answer.hidden = kind === "none";
    return texts;
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
