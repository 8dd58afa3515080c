"""The raise-site finder: which messages it templates, how, and what it reports it cannot."""

from __future__ import annotations

import json
import re
import subprocess
import textwrap
import zipfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from errkb.mine.raise_sites import ALL_KINDS, CONTEXT_LINES, scan, sites_in_source
from errkb.mine.sources import SourceTree
from errkb.mine.templates import Placeholder, Template, escape_literal


def one_site(code: str):
    sites = sites_in_source(textwrap.dedent(code), "pkg/mod.py")
    assert len(sites) == 1, sites
    return sites[0]


def test_seed_raise_gives_the_seeds_own_pattern_and_message(seed_record):
    # The seed's window starts inside the parameter list; give it back its def line.
    source = "def get_flashinfer_allreduce_quant_workspace(\n" + seed_record["sourceCode"] + "\n"
    site = one_site(source)
    assert site.error_class == seed_record["errorClass"]
    assert site.template.pattern() == seed_record["messagePattern"]
    assert site.template.render() == seed_record["errorMessage"]
    assert site.function == "get_flashinfer_allreduce_quant_workspace"
    assert site.message_kind == "literal"  # implicit concatenation is one literal to ast
    assert site.line == 1 + seed_record["lineNumber"] - seed_record["sourceCodeStart"] + 1


def test_escaping_only_regex_metacharacters():
    assert escape_literal("a.b^c$d*e+f?g{h}i[j]k\\l|m(n)o") == r"a\.b\^c\$d\*e\+f\?g\{h\}i\[j\]k\\l|m\(n\)o".replace("|", "\\|")
    # Spaces, quotes, commas, dashes, hashes stay as they are (unlike re.escape).
    assert escape_literal("it's a \"flag\", --x #1 & ~y") == "it's a \"flag\", --x #1 & ~y"
    assert escape_literal("line1\nline2\ttab") == "line1\\nline2\\ttab"


def test_fstring_with_conversion_and_spec():
    site = one_site(
        """
        def check(dtype, n):
            raise TypeError(f"unsupported dtype {dtype!r} for {n:d} inputs (max {2.5:.1f}).")
        """
    )
    t = site.template
    assert t.display() == "unsupported dtype {dtype} for {n} inputs (max {2.5})."
    assert t.pattern() == r"unsupported dtype (.+?) for (.+?) inputs \(max (.+?)\)\."
    assert t.render() == "unsupported dtype 'float32' for 3 inputs (max 0.5)."
    assert re.search(t.pattern(), t.render())
    assert site.function == "check" and site.message_kind == "f-string"


@pytest.mark.parametrize(
    "code, display, kind",
    [
        ('raise ValueError("bad value %s for %r" % (x, key))', "bad value {x} for {key}", "percent"),
        ('raise ValueError("bad value %(v)s, 100%% sure" % {"v": val})', "bad value {val}, 100% sure", "percent"),
        ('raise ValueError("only one: %d" % count)', "only one: {count}", "percent"),
        ('raise ValueError("{} and {name} and {0}".format(a, name=b))', "{a} and {b} and {a}", "format"),
        ('raise ValueError("prefix " + name + " suffix")', "prefix {name} suffix", "concatenation"),
        ('raise ValueError(MESSAGE)', "module level message", "constant"),
        ('raise ValueError(TEMPLATE.format(x))', "template {x} here", "format"),
        ('raise ValueError(_("translated text {n}").format(n=n))', "translated text {n}", "format"),
        ('raise KeyError(message="keyword message only")', "keyword message only", "literal"),
    ],
)
def test_message_forms(code, display, kind):
    source = f'MESSAGE = "module level message"\nTEMPLATE = "template {{}} here"\n\ndef f(x, key, val, count, a, b, name, n):\n    {code}\n'
    site = one_site(source)
    assert site.template is not None, site.reason
    assert site.template.display() == display
    assert site.message_kind == kind
    assert re.search(site.template.pattern(), site.template.render())


def test_local_message_variable_assigned_once_is_followed():
    site = one_site(
        """
        def load(path):
            msg = f"cannot load {path}: not a checkpoint"
            raise OSError(msg)
        """
    )
    assert site.template.display() == "cannot load {path}: not a checkpoint"
    assert site.message_kind == "variable"


def test_a_format_string_held_by_a_local_is_the_template():
    """torch's sm_120 warning: a local bound once to a literal, formatted where it is warned;
    a nested function reads its enclosing function's; a name bound twice is no literal."""
    site = one_site(
        """
        def _check_cubins():
            incompatible_device_warn = \"\"\"
        {} with CUDA capability sm_{} is not compatible with the current PyTorch installation.
        \"\"\"
            for name in names:
                if bad:
                    raise RuntimeError(incompatible_device_warn.format(name, cap))
        """
    )
    assert site.template.pattern().startswith("\\n([\\s\\S]+?) with CUDA capability sm_([\\s\\S]+?) is not compatible")
    nested = one_site(
        """
        def outer():
            fmt = "Found GPU%d %s which requires CUDA_VERSION >= %d to work properly"
            def inner():
                raise RuntimeError(fmt % (1, "x", 3))
            inner()
        """
    )
    assert nested.template.pattern().startswith("Found GPU(.+?) (.+?) which requires CUDA_VERSION >= (.+?) to work")
    twice = sites_in_source(textwrap.dedent(
        """
        def f(x):
            fmt = "a {} template that is long enough to be one"
            if x:
                fmt = "another {} template that is long enough"
            raise ValueError(fmt.format(x))
        """), "pkg/mod.py")
    assert [site.template for site in twice] == [None]  # a site, untemplated
    # a parameter of the same name as a module constant is the parameter: no literal
    shadowed = sites_in_source(textwrap.dedent(
        """
        FMT = "the module's {} template, long enough to be one"
        def f(x, FMT):
            raise ValueError(FMT.format(x))
        """), "pkg/mod.py")
    assert [site.template for site in shadowed] == [None]


@pytest.mark.parametrize(
    "body, reason",
    [
        ("for msg in a:\n        raise ValueError(msg)", "message is a variable"),
        ("raise ValueError(make_message())", "message is a call result"),
        ("raise ValueError()", "no message argument"),
        ("raise ValueError", "raises a class or an existing exception object, no message"),
        ("raise make_error('this is built by a factory')", "raises the result of a factory call (class unknown)"),
        ("raise ValueError(f'{a}: {b}')", "message literal too short to identify the error"),
        ("raise ValueError(self.message)", "message is an attribute"),
        ("raise ValueError('')", "empty message"),
        ("raise ValueError(fmt % args)", "format string is not a literal"),
    ],
)
def test_untemplated_sites_are_counted_with_their_reason(body, reason):
    site = one_site(f"def f(self, a, b, fmt, args):\n    {body}\n")
    assert site.template is None
    assert site.reason == reason


def test_bare_reraise_is_not_a_site():
    assert sites_in_source("try:\n    pass\nexcept Exception:\n    raise\n", "m.py") == []


def test_qualified_function_and_window():
    code = "\n" * 30 + textwrap.dedent(
        """
        class Parser:
            def parse(self, text):
                def inner():
                    raise SyntaxError(f"unexpected token in {text}")
                return inner
        """
    ) + "\n" * 40
    site = one_site(code)
    assert site.function == "Parser.parse.inner"
    assert site.line == 35
    assert (site.source_start, site.source_end) == (35 - CONTEXT_LINES, 35 + CONTEXT_LINES)
    lines = code.splitlines()
    assert site.source_code.split("\n") == lines[site.source_start - 1 : site.source_end]
    # Near the top of a file the window is clipped, never before line 1.
    top = one_site('raise RuntimeError("failed at import time")\n')
    assert top.source_start == 1 and top.source_end == 1 and top.function == "<module>"


def test_placeholders_do_not_cross_lines_unless_the_message_does():
    single = Template((
        "value ", Placeholder("x"), " is bad",
    ))
    assert single.pattern() == "value (.+?) is bad"
    assert not re.search(single.pattern(), "value 1\n2 is bad")
    multi = Template(("Expected:\n", Placeholder("a"), "\nGot:\n", Placeholder("b")))
    assert multi.pattern() == "Expected:\\n([\\s\\S]+?)\\nGot:\\n([\\s\\S]+?)"
    assert re.search(multi.pattern(), "Expected:\nrow 1\nrow 2\nGot:\nnothing")


_literal = st.text(alphabet="ab.(\n ", min_size=1, max_size=4)
_parts = st.lists(st.one_of(_literal, st.just(Placeholder("v"))), min_size=1, max_size=5)


@settings(max_examples=400, deadline=None)
@given(parts=_parts, text=st.text(alphabet="ab.(\n x", max_size=12))
def test_linear_template_check_agrees_with_re(parts, text):
    t = Template.of(parts)
    if not t.parts:
        return
    assert t.matches(text) == bool(re.search(t.pattern(), text))
    assert t.fullmatches(text) == bool(re.fullmatch(t.pattern(), text))


def test_scan_counts_unparsable_files(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "ok.py").write_text('def f():\n    raise ValueError("a real message here")\n')
    (pkg / "py2.py").write_text('print "hello"\n')
    result = scan(pkg)
    assert result.files == 3
    assert [s.file for s in result.sites] == ["pkg/ok.py"]
    assert result.unparsable[0][0] == "pkg/py2.py"
    assert result.unparsable[0][1].startswith("SyntaxError (line 1)")
    assert result.summary()["templated_share"] == 1.0


def test_wheel_is_read_in_place_with_its_metadata(tmp_path):
    wheel = tmp_path / "demo-1.2.3-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("demo/__init__.py", 'def go():\n    raise RuntimeError("demo failed to go")\n')
        zf.writestr(
            "demo-1.2.3.dist-info/METADATA",
            "Metadata-Version: 2.1\nName: demo\nVersion: 1.2.3\n"
            "Project-URL: Bug Tracker, https://github.com/someone/fork/issues\n"
            "Project-URL: Source, https://github.com/demo-org/demo\n",
        )
    tree = SourceTree.open(wheel)
    prov = tree.provenance()
    assert (prov.kind, prov.repo, prov.version, prov.sha) == ("wheel", "demo-org/demo", "1.2.3", None)
    assert "known but no commit sha" in prov.note
    [site] = scan(tree).sites
    assert (site.file, site.line, site.template.literal) == ("demo/__init__.py", 2, "demo failed to go")

    commit = "0123456789abcdef0123456789abcdef01234567"
    with zipfile.ZipFile(wheel, "a") as zf:
        zf.writestr("demo-1.2.3.dist-info/direct_url.json", json.dumps(
            {"url": "https://github.com/demo-org/demo", "vcs_info": {"vcs": "git", "commit_id": commit}}))
    assert SourceTree.open(wheel).provenance().sha == commit


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def test_git_checkout_gives_commit_and_repo(tmp_path):
    repo = tmp_path / "checkout"
    (repo / "src" / "tool").mkdir(parents=True)
    (repo / "src" / "tool" / "__init__.py").write_text('raise ImportError("tool needs a newer Python")\n')
    _git(repo, "init", "-q")
    _git(repo, "remote", "add", "origin", "git@github.com:tool-org/tool.git")
    _git(repo, "add", ".")
    _git(repo, "-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-q", "-m", "init")
    tree = SourceTree.open(repo / "src" / "tool")
    prov = tree.provenance()
    assert prov.kind == "git checkout"
    assert prov.sha == _git(repo, "rev-parse", "HEAD")
    assert prov.repo == "tool-org/tool"
    # Paths are relative to the checkout's top, as on GitHub.
    assert [s.file for s in scan(tree).sites] == ["src/tool/__init__.py"]


def test_warnings_are_sites_only_when_asked_for():
    code = textwrap.dedent(
        """
        import warnings

        def old_api(name):
            warnings.warn(f"{name} is deprecated and will be removed", DeprecationWarning, stacklevel=2)
            warnings.warn("plain user warning text here")
        """
    )
    assert sites_in_source(code, "m.py") == []
    deprecated, plain = sites_in_source(code, "m.py", warnings=True)
    assert (deprecated.kind, deprecated.error_class, deprecated.template.display()) == (
        "warn", "DeprecationWarning", "{name} is deprecated and will be removed")
    assert (plain.error_class, plain.template.literal) == ("UserWarning", "plain user warning text here")


def test_a_relative_package_folder_reads_like_an_absolute_one(tmp_path, monkeypatch):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "m.py").write_text('raise ValueError("boom here")\n')
    monkeypatch.chdir(tmp_path)
    relative = list(SourceTree.open("pkg").python_files())
    assert relative == list(SourceTree.open(tmp_path / "pkg").python_files())
    assert [name for name, _ in relative] == ["pkg/__init__.py", "pkg/m.py"]


# ---------------------------------------------------------------- messages with choices, built by helpers


def all_sites(code: str, kinds=frozenset({"raise", "warn"})):
    return sites_in_source(textwrap.dedent(code), "pkg/mod.py", kinds=kinds)


def test_a_variable_assigned_in_each_branch_gives_one_pattern_per_branch():
    # vLLM's processor: "... maximum model length of {n}. {suggestion}", two suggestions.
    sites = all_sites(
        """
        def check(prompt_type, n, max_len, multimodal):
            if multimodal:
                suggestion = ("Make sure that `max_model_len` is no smaller than the "
                              "number of text tokens plus multimodal tokens.")
            else:
                suggestion = "Make sure that `max_model_len` is no smaller than the number of text tokens."
            raise ValueError(
                f"The {prompt_type} prompt (length {n}) is longer than the maximum model length of {max_len}. "
                f"{suggestion}")
        """
    )
    assert [s.template.display() for s in sites] == [
        "The {prompt_type} prompt (length {n}) is longer than the maximum model length of {max_len}. Make sure "
        "that `max_model_len` is no smaller than the number of text tokens plus multimodal tokens.",
        "The {prompt_type} prompt (length {n}) is longer than the maximum model length of {max_len}. Make sure "
        "that `max_model_len` is no smaller than the number of text tokens.",
    ]
    assert {s.line for s in sites} == {8}  # one raise, two wordings


def test_a_nested_helper_is_read_with_its_closure_and_its_branches():
    # torch.load's _get_wo_message: the text is built by a nested def from load's own locals.
    sites = all_sites(
        """
        def load(f, weights_only):
            UNSAFE_MESSAGE = "Re-running `torch.load` with `weights_only` set to `False` will likely succeed."
            DOCS = " Check the documentation of torch.load."

            def _get_wo_message(message: str) -> str:
                if "GLOBAL" in message:
                    updated = "Weights only load failed. Two options: " + UNSAFE_MESSAGE + " error: " + message
                else:
                    updated = f"Weights only load failed. {UNSAFE_MESSAGE}\\n Please file an issue: " + message
                return updated + DOCS

            try:
                return _legacy_load(f)
            except RuntimeError as e:
                raise pickle.UnpicklingError(_get_wo_message(str(e))) from None
        """
    )
    assert [(s.function, s.error_class, s.message_kind) for s in sites] == [("load", "UnpicklingError", "helper")] * 2
    texts = [s.template.display() for s in sites]
    assert texts[0] == ("Weights only load failed. Two options: Re-running `torch.load` with `weights_only` set to "
                        "`False` will likely succeed. error: {message} Check the documentation of torch.load.")
    assert texts[1].startswith("Weights only load failed. Re-running `torch.load` with")


def test_helpers_at_module_level_and_methods_are_followed():
    sites = all_sites(
        """
        def _create_warning_msg(num_worker_suggest, num_workers):
            return (f"This DataLoader will create {num_workers} worker processes in total. "
                    f"Our suggested max number of worker in current system is {num_worker_suggest}.")

        class Loader:
            def _detail(self, name):
                return f"Checkpoint {name} has no tensor named weight_scale_inv"

            def check(self, n, name):
                warnings.warn(_create_warning_msg(3, n))
                raise KeyError(self._detail(name))
        """
    )
    assert [(s.kind, s.template.display()) for s in sites] == [
        # the helper's parameters are wildcards, whatever the caller passes
        ("warn", "This DataLoader will create {num_workers} worker processes in total. Our suggested max number of "
                 "worker in current system is {num_worker_suggest}."),
        ("raise", "Checkpoint {name} has no tensor named weight_scale_inv"),
    ]


def test_a_message_built_step_by_step_reads_each_step_where_it_is_made_and_loops_end():
    sites = all_sites(
        """
        def deprecate(old, new, version):
            msg = f"`{old}()`"
            if new:
                msg = f"{msg} is deprecated since {version}; use `{new}()` instead."
            warnings.warn(msg, FutureWarning)

        def again():
            return again()

        def a():
            raise ValueError(again())

        def b(c):
            if c:
                x = f"{y} and the first part of the message"
            y = f"{x} and the second part of the message"
            raise ValueError(y)
        """
    )
    # each `msg = f"{msg} ..."` reads the msg before it; "`{old}()`" alone is too short a message
    assert [s.template.display() for s in sites[:1]] == ["`{old}()` is deprecated since {version}; use `{new}()` instead."]
    assert sites[1].template is None and sites[1].reason == "message is a call result"
    # x may be unassigned where y reads it (c false), and y where x reads it: wildcards, no loop
    assert sites[2].template.display() == "{y} and the first part of the message and the second part of the message"
    assert len(sites) == 3


def test_choices_within_choices_stay_bounded():
    # 30 names, each chosen in two branches from the next: 2**30 messages if each were
    # followed; the site is read in bounded work and gives at most MAX_ALTERNATIVES patterns.
    from errkb.mine.raise_sites import MAX_ALTERNATIVES

    lines = ["def f(c):"]
    for i in range(30):
        lines += [f"    if c == {i}:", f"        a{i} = f'first {{a{i + 1}}} words of text'",
                  "    else:", f"        a{i} = f'second {{a{i + 1}}} words of text'"]
    lines += ["    a30 = 'the end of the message'", "    raise ValueError(a0)"]
    sites = sites_in_source("\n".join(lines), "pkg/mod.py")
    assert 1 <= len(sites) <= MAX_ALTERNATIVES
    assert all(s.line == 123 for s in sites)


def test_a_terminals_colour_codes_are_left_out_of_the_pattern():
    site = one_site(
        """
        def load():
            raise RuntimeError("Weights only load failed, \\033[1mdo those steps only if you trust the source\\033[0m.")
        """
    )
    assert site.template.display() == "Weights only load failed, do those steps only if you trust the source."


def _displays(code: str) -> list[tuple[int, str | None]]:
    return [(s.line, s.template.display() if s.template else None) for s in all_sites(code)]


def test_only_the_assignments_that_reach_the_raise_are_its_message():
    assert _displays(
        """
        def check(x):
            if x < 0:
                msg = "negative values are not allowed"
                raise ValueError(msg)
            msg = f"value {x} is too large for this buffer"
            msg += " (see the docs)"
            raise ValueError(msg)
        """
    ) == [(5, "negative values are not allowed"), (8, "value {x} is too large for this buffer (see the docs)")]


def test_an_extended_or_empty_choice_is_read_as_the_program_builds_it():
    assert _displays(
        """
        def f(x, close):
            msg = "Invalid value"
            msg += " for parameter x"
            if close:
                hint = " (did you mean foo?)"
            else:
                hint = ""
            raise ValueError(f"{msg} (see the docs){hint}")
        """
    ) == [(9, "Invalid value for parameter x (see the docs) (did you mean foo?)"),
          (9, "Invalid value for parameter x (see the docs)")]


def test_names_are_read_in_the_scope_that_binds_them():
    assert _displays(
        """
        NOTE = "module note text"

        def g():
            return "module level helper text"

        def h():
            return g()

        def outer(kind_of):
            kind = "alpha"
            msg = f"the {kind} value is broken"

            def g():
                return "a caller's own nested g"

            def inner():
                kind = "beta"
                return f"{msg}; see the docs"

            class C:
                def check(self):
                    raise ValueError(self._msg())

                def _msg(self):
                    return f"{NOTE} is the problem"

            NOTE = "outer note text"
            raise ValueError(inner())
            raise ValueError(h())

        def shadowed(g):
            raise ValueError(g())

        def caught(msg="default message text"):
            try:
                run()
            except Exception as msg:
                raise ValueError(f"failed to run: {msg}")
        """
    ) == [
        (23, "outer note text is the problem"),  # the class's method reads outer's NOTE, set later
        (29, "the alpha value is broken; see the docs"),  # inner's own `kind` is not msg's
        (30, "module level helper text"),  # h's g is the module's, not the caller's
        (33, None),  # a parameter named g is no helper
        (39, "failed to run: {msg}"),  # `except ... as msg` is a value, not the default
    ]


@pytest.mark.parametrize(
    "code, expected",
    [
        # an exception may leave a try body after any statement: every state it passed reaches the handler
        ("""def f():
                msg = "default message here"
                try:
                    msg = "specific failure message"
                    risky()
                    msg = "after risky message"
                    risky()
                except KeyError:
                    raise ValueError(msg)""",
         {"default message here", "specific failure message", "after risky message"}),
        # a finally starts from every way out of its try
        ("""def f():
                msg = "default message here"
                try:
                    msg = "specific failure message"
                    risky()
                except OSError:
                    msg = "handler message text"
                    raise
                finally:
                    logger.error(msg)""",
         {"default message here", "specific failure message", "handler message text"}),
        # a break through a finally is not followed: no text is claimed
        ("""def f(xs):
                for x in xs:
                    try:
                        msg = "set before the break"
                        break
                    finally:
                        msg = "set in the finally clause"
                raise ValueError(msg)""", {None}),
        # continue states reach the next pass and what follows the loop
        ("""def f(xs):
                msg = "first message text"
                for x in xs:
                    if x:
                        msg = "second message text"
                        continue
                    risky()
                raise ValueError(msg)""", {"first message text", "second message text"}),
        # += in a loop: how many times is not known
        ("""def f(xs):
                msg = "items missing:"
                for x in xs:
                    msg += " item"
                raise ValueError(msg)""", {None}),
        # a += reads its base where the base was made
        ("""def f():
                prefix = "first prefix text"
                msg = f"{prefix}: error"
                prefix = "second prefix text"
                msg += " more"
                raise ValueError(msg)""", {"first prefix text: error more"}),
        # `del d[msg]` does not unbind msg
        ("""def f(d, c):
                msg = "first message text"
                if c:
                    msg = "second message text"
                    del d[msg]
                raise ValueError(msg)""", {"first message text", "second message text"}),
        # a walrus in the statement itself, or in a match guard, rebinds
        ("""def f(x):
                err = "initial placeholder text"
                assert not (err := check(x)), err""", {None}),
        ("""def f(x):
                err = "initial placeholder text"
                match x:
                    case 1 if (err := check(x)):
                        raise ValueError(err)""", {None}),
        # a while True loop is left only by its breaks
        ("""def f():
                msg = "never reaches the raise"
                while True:
                    msg = "always the message"
                    if check():
                        break
                raise ValueError(msg)""", {"always the message"}),
        # a sibling def's nonlocal assignment changes the closure's value
        ("""def f():
                msg = "first message text"
                def g():
                    nonlocal msg
                    msg = "changed by the closure"
                def h():
                    raise ValueError(msg)
                g()
                h()""", {None}),
    ],
)
def test_the_data_flow_claims_no_text_the_program_may_not_hold(code, expected):
    sites = [s for s in all_sites(code, kinds=ALL_KINDS) if s.kind != "raise" or s.error_class == "ValueError"
             or s.kind == "assert"]
    assert {s.template.display() if s.template else None for s in sites} == expected


def test_seventeen_choices_are_too_many_to_claim():
    branches = "".join(f"            {'if' if n == 0 else 'elif'} k == {n}:\n                msg = 'choice number {n} of the message'\n"
                       for n in range(17))
    site = one_site(f"def f(k):\n    if True:\n{branches}        raise ValueError(msg)\n".replace("            ", "        "))
    assert site.template is None


def test_long_elif_chains_and_huge_functions_stay_bounded():
    # 700 elifs: the flow gives up on this site alone (no RecursionError for the file)
    chain = "".join(f"    {'if' if n == 0 else 'elif'} k == {n}:\n        msg = 'choice {n} of the message text'\n"
                    for n in range(700))
    sites = sites_in_source(f"def f(k):\n{chain}    raise ValueError(msg)\n\ndef g():\n    raise KeyError('g is still read')\n",
                            "pkg/mod.py")
    assert [s.error_class for s in sites] == ["ValueError", "KeyError"] and sites[1].template is not None
    # 1,000 raises of distinct message variables in one function: past the flow budget they are wildcards
    body = "".join(f"    a{i} = 'first part number {i}'\n    if x == {i}:\n        raise ValueError(f'{{a{i}}} for the parameter {{y}}')\n"
                   for i in range(1000))
    sites = sites_in_source(f"def f(x, y):\n{body}", "pkg/mod.py")
    assert len(sites) == 1000
    assert sites[0].template.display() == "first part number 0 for the parameter {y}"
    assert sites[-1].template.display() == "{a999} for the parameter {y}"


@pytest.mark.parametrize(
    "code, expected",
    [
        # a context manager may suppress an exception anywhere in its body
        ("""from contextlib import suppress
            def f(d):
                msg = "first message text"
                with suppress(KeyError):
                    d["missing"]
                    msg = "second message text"
                raise ValueError(msg)""", {"first message text", "second message text"}),
        # a walrus in a lambda default or an annotation binds in the enclosing function
        ("""def f():
                msg = "initial message text"
                g = lambda a=(msg := "lambda default text"): a
                raise ValueError(msg)""", {None}),
        ("""def f():
                msg = "initial message text"
                def g(a: (msg := "annotation text")): pass
                raise ValueError(msg)""", {None}),
        # a class body's names are not followed (its own, its enclosing function's)
        ("""MSG = "module message text"
            def f():
                MSG = "function message text"
                class C:
                    raise ValueError(MSG)""", {None}),
        # a module constant bound anywhere else is no constant
        ("""MSG = "default message text"
            if win:
                MSG = "windows message text"
            def f():
                raise ValueError(MSG)""", {None}),
        ("""MSG = "default message text"
            def set_it():
                global MSG
                MSG = "changed at run time"
            def f():
                raise ValueError(MSG)""", {None}),
        # a helper rebound, defined twice or in two branches is not followed
        ("""def _msg():
                return "fallback message text"
            try:
                from fast import _msg
            except ImportError:
                pass
            def f():
                raise ValueError(_msg())""", {None}),
        ("""class C:
                def _msg(self):
                    return "old message text"
                def _msg(self):
                    return "new message text"
                def check(self):
                    raise ValueError(self._msg())""", {None}),
        ("""def f(c):
                if c:
                    def helper():
                        return "first helper text"
                else:
                    def helper():
                        return "second helper text"
                raise ValueError(helper())""", {None}),
    ],
)
def test_the_miner_claims_no_text_a_scope_may_hold_otherwise(code, expected):
    # the cases are written indented after their first line: line them up under it
    first, _, rest = code.partition("\n")
    lines = rest.split("\n")
    cut = len(lines[0]) - len(lines[0].lstrip()) - (4 if first.rstrip().endswith(":") else 0)
    code = "\n".join([first, *(line[cut:] for line in lines)])
    sites = [s for s in all_sites(code, kinds=ALL_KINDS) if s.error_class == "ValueError"]
    assert {s.template.display() if s.template else None for s in sites} == expected


def test_a_thousand_branch_elif_chain_keeps_the_files_sites():
    chain = "".join(f"    {'if' if n == 0 else 'elif'} k == {n}:\n        raise ValueError('branch {n} of the chain')\n"
                    for n in range(1500))
    sites = sites_in_source(f"def f(k):\n{chain}", "pkg/mod.py")
    assert len(sites) == 1500 and sites[-1].template.display() == "branch 1499 of the chain"
    assert sites[3].condition == "k == 3"
