"""A paste that quotes its message (pytest's failure margin, a repr or a JSON string with
its line breaks written as escapes) read back as the program printed it."""

from __future__ import annotations

from errkb.text.printed import PrintedForm, decode_escapes, escaped_literal, printed_forms, pytest_runs

GRAPH_BREAK = ("torch._dynamo.exc.Unsupported: can't handle functions not implemented in python\n"
               "  Explanation: Dynamo can only handle functions defined in python\n"
               "  Hint: Move usage of this function out of `torch.compile` region")


def _pytest(message: str, indent: int = 16) -> str:
    return "\n".join(("E" + " " * (indent - 1) + line).rstrip() for line in message.split("\n"))


def test_pytest_margin_is_the_mark_and_the_indentation_every_line_shares():
    pasted = "\n".join(["    def test_compile(self):", ">       fn(x)", _pytest(GRAPH_BREAK), "",
                        "torch/_dynamo/variables/functions.py:1234: Unsupported"])
    assert pytest_runs(pasted.split("\n")) == [(3, GRAPH_BREAK)]
    assert printed_forms(pasted)[0] == PrintedForm(GRAPH_BREAK, 3, True)  # its lines are the paste's
    # a run taken from its first non-blank line: line for line still
    assert pytest_runs(["E", "E   ", *_pytest(GRAPH_BREAK).split("\n")]) == [(3, GRAPH_BREAK)]


def test_a_blank_line_inside_the_message_keeps_the_run_and_each_run_is_its_own_form():
    message = "RuntimeError: first line\n\n  after a blank line"
    first, second = _pytest("assert 1 == 2", indent=8), _pytest(message, indent=4)
    runs = pytest_runs([*first.split("\n"), "", "tests/x.py:3: AssertionError", *second.split("\n")])
    assert runs == [(1, "assert 1 == 2"), (4, message)]
    # the last run (the exception pytest ends with) is read first
    assert [f.text for f in printed_forms("\n".join([first, "", *second.split("\n")]))][0] == message


def test_lines_that_only_begin_with_E_are_no_margin():
    for text in ("Error: x\nExpected all tensors", "E.g. this\nEOF", "Every error"):
        assert pytest_runs(text.split("\n")) == []
        assert printed_forms(text) == []


def test_a_repr_is_its_class_and_its_decoded_message():
    pasted = "cur_exn = Unsupported('torch.* op returned non-Tensor\\n  Explanation: doesn\\'t trace\\n')"
    assert escaped_literal(pasted) == (1, "Unsupported: torch.* op returned non-Tensor\n  Explanation: doesn't trace\n")


def test_an_apostrophe_in_prose_opens_no_literal_and_the_most_escaped_literal_wins():
    pasted = ("The test doesn't pass: counters [(\"Reconstruction failure\\n  Explanation: Dynamo has no "
              "reconstruction\\n  Hint: remove it\\n\", 1), ('short\\n', 2)]")
    line, message = escaped_literal(pasted)
    assert message == "Reconstruction failure\n  Explanation: Dynamo has no reconstruction\n  Hint: remove it\n"
    assert line == 1


def test_a_literal_the_paste_cuts_off_runs_to_the_end_and_elision_gives_a_cut_form():
    pasted = "x = Unsupported('builtin isinstance() cannot determine type\\n  Explanation: Dynamo doesn\\'t have a rule to det..."
    (whole,) = [f.text for f in printed_forms(pasted) if f.text.endswith("det...")]
    assert whole.startswith("Unsupported: builtin isinstance() cannot determine type\n")
    elided = "y = E('message one two three\\n  Explanation: traced into...o this especially')"
    forms = printed_forms(elided)
    assert all(f.first_line == 1 and not f.line_for_line for f in forms)  # a literal: all from its line
    assert [f.text for f in forms] == ["E: message one two three\n  Explanation: traced into...o this especially",
                     "E: message one two three\n  Explanation: traced into"]


def test_plain_text_and_short_or_unescaped_literals_give_no_form():
    assert printed_forms("RuntimeError: CUDA error: out of memory") == []
    assert printed_forms("KeyError: 'model.layers.0'") == []
    assert printed_forms("x = f('a\\nb')") == []  # a key or a word, not a message


def test_escapes_decode_as_python_writes_them_and_unknown_ones_stay():
    assert decode_escapes("a\\tb\\\\c\\x41\\u00e9\\d\\") == "a\tb\\cA\u00e9\\d\\"
    assert decode_escapes("\\ud800 \\U0010ffff \\x4") == "\ufffd \U0010ffff \\x4"


def test_each_pass_is_linear_on_a_hostile_paste():
    # a million quotes and escapes: one scan each, no regex over the text
    hostile = "'\\n" * 300_000 + "E " + "E\n" * 100_000
    forms = printed_forms(hostile)
    assert len(forms) <= 4
