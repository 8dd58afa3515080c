"""The reader: every input form, and every kind of bad input, with file and position."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from errkb.records.read import InputError, read_records
from tests.support import SEED_FILE, SEED_ID, write_jsonl


def test_seed_file_reads_as_one_record_with_dataset_version():
    (item,) = list(read_records([SEED_FILE]))
    assert item.ok
    assert item.record["id"] == SEED_ID
    assert item.dataset_version == "2026-08-15T22:17:37.221Z"
    assert (item.origin.line, item.origin.column, item.origin.index) == (1, 1, None)


def test_bare_record_array_and_jsonl_forms(tmp_path, seed_wrapper, make_variant):
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps(seed_wrapper["record"], indent=2))
    array = tmp_path / "array.json"
    array.write_text(json.dumps([seed_wrapper, make_variant(1)], indent=1))
    jsonl = write_jsonl(tmp_path / "more.jsonl", [make_variant(2), {"record": make_variant(3), "datasetVersion": "v9"}])

    items = list(read_records([bare, array, jsonl]))
    assert [i.ok for i in items] == [True] * 5
    assert items[0].dataset_version is None
    assert [i.origin.index for i in items[1:3]] == [0, 1]
    assert items[1].dataset_version == "2026-08-15T22:17:37.221Z"
    assert [i.origin.line for i in items[3:]] == [1, 2]
    assert items[4].dataset_version == "v9"


def test_folder_is_read_recursively_in_sorted_order_skipping_hidden(tmp_path, make_variant):
    (tmp_path / "b").mkdir()
    (tmp_path / "a.txt").write_text(json.dumps(make_variant(1)))
    (tmp_path / "b" / "c.data").write_text(json.dumps(make_variant(2)))
    (tmp_path / ".hidden.json").write_text("not json")
    names = [i.origin.file for i in read_records([tmp_path])]
    assert names == [str(tmp_path / "a.txt"), str(tmp_path / "b" / "c.data")]


def _one_error(path):
    (item,) = list(read_records([path]))
    assert item.record is None
    return item.error_line


def test_invalid_json_names_line_and_column(tmp_path):
    p = tmp_path / "bad.json"
    p.write_text('{\n  "id": "x",\n  "repo" "a/b"\n}\n')
    assert _one_error(p) == f"{p}:3:10: invalid JSON: Expecting ':' delimiter"


def test_truncated_file(tmp_path, seed_wrapper):
    p = tmp_path / "cut.json"
    p.write_text(json.dumps(seed_wrapper)[:500])
    line = _one_error(p)
    assert line.startswith(f"{p}:1:501: invalid JSON:")


def test_value_that_is_not_an_object(tmp_path):
    p = tmp_path / "n.jsonl"
    p.write_text('42\n"text"\nnull\n')
    errors = [i.error_line for i in read_records([p])]
    assert errors == [
        f"{p}:1:1: JSON value is a number, not a record object",
        f"{p}:2:1: JSON value is a string, not a record object",
        f"{p}:3:1: JSON value is null, not a record object",
    ]


def test_empty_file(tmp_path):
    p = tmp_path / "empty.json"
    p.write_text("  \n")
    assert _one_error(p) == f"{p}:1:1: empty file, no records"


def test_non_utf8_bytes_are_pointed_at_and_kept_verbatim(tmp_path, seed_wrapper):
    p = tmp_path / "latin1.json"
    raw = json.dumps(seed_wrapper, ensure_ascii=False).replace("Flashinfer", "Fl\u00e4shinfer", 1).encode("latin-1")
    p.write_bytes(raw)
    (item,) = list(read_records([p]))
    assert item.record is None
    col = raw.index(b"\xe4") + 1
    assert item.error_line == f"{p}:1:{col}: invalid UTF-8 byte 0xe4"
    assert item.raw == raw


def test_one_bad_line_of_jsonl_does_not_take_the_rest(tmp_path, make_variant):
    p = tmp_path / "mixed.jsonl"
    p.write_text(json.dumps(make_variant(1)) + "\n{broken\n" + json.dumps(make_variant(2)) + "\n")
    items = list(read_records([p]))
    assert [i.ok for i in items] == [True, False, True]
    assert items[1].raw == b"{broken"
    assert items[1].error_line.startswith(f"{p}:2:2: invalid JSON")


def test_bad_item_in_array_keeps_rest_of_file_verbatim(tmp_path, make_variant):
    p = tmp_path / "arr.json"
    text = "[" + json.dumps(make_variant(1)) + ", {oops}, " + json.dumps(make_variant(2)) + "]"
    p.write_text(text)
    items = list(read_records([p]))
    assert [i.ok for i in items] == [True, False]
    assert items[1].origin.index == 1
    assert items[1].raw.decode().startswith("{oops}") and items[1].raw.decode().endswith("]")


def test_missing_path_is_an_input_error():
    with pytest.raises(InputError, match=r"^/no/such/file\.json: no such file or folder$"):
        list(read_records(["/no/such/file.json"]))


def test_values_split_across_read_chunks(tmp_path, make_variant, monkeypatch):
    import errkb.records.read as records

    monkeypatch.setattr(records, "CHUNK_SIZE", 7)
    p = write_jsonl(tmp_path / "small-chunks.jsonl", [make_variant(i) for i in range(5)])
    items = list(read_records([p]))
    assert [i.ok for i in items] == [True] * 5
    assert [i.origin.line for i in items] == [1, 2, 3, 4, 5]


@pytest.mark.slow
def test_a_100_mb_file_is_streamed_not_read_whole(tmp_path, seed_wrapper):
    import subprocess
    import sys

    big = tmp_path / "big.jsonl"
    line = (json.dumps(seed_wrapper) + "\n").encode()
    with open(big, "wb") as f:
        for _ in range(100 * 2**20 // len(line) + 1):
            f.write(line)
    assert big.stat().st_size > 100 * 2**20
    code = (
        "import resource, sys\n"
        "from errkb.records.read import read_records\n"
        "base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "n = sum(1 for item in read_records([sys.argv[1]]) if item.ok)\n"
        "print(n, (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) // 1024)\n"
    )
    out = subprocess.run([sys.executable, "-c", code, str(big)], capture_output=True, text=True, check=True).stdout
    count, grown_mb = map(int, out.split())
    assert count == 100 * 2**20 // len(line) + 1
    # Streaming holds a chunk or two (1 MB each) and one record, not the file.
    assert grown_mb < 40, f"reading grew memory by {grown_mb} MB"


def test_a_device_fifo_or_dangling_link_inside_a_folder_is_a_reject_not_a_hang(tmp_path, seed_wrapper):
    """A folder walk used to open a symlink to /dev/zero (read forever) or a FIFO (wait
    forever for a writer), and to stop the whole run on a dangling symlink."""
    import os

    folder = tmp_path / "mixed"
    folder.mkdir()
    (folder / "a.json").write_text(json.dumps(seed_wrapper))
    (folder / "zero.json").symlink_to("/dev/zero")
    os.mkfifo(folder / "fifo.json")
    (folder / "gone.json").symlink_to(tmp_path / "nowhere")
    got = [(Path(r.origin.file).name, r.error) for r in read_records([folder])]
    assert got == [("a.json", None),
                   ("fifo.json", "a FIFO inside a folder: not read (name it by itself to read a pipe)"),
                   ("gone.json", "a dangling symlink (No such file or directory): not read"),
                   ("zero.json", "a device inside a folder: not read")]


def test_garbage_without_a_line_to_resume_at_is_one_reject_read_in_bounded_memory(tmp_path, monkeypatch):
    """Past MAX_VALUE_BYTES without a line starting a value, the rest of the file is one
    reject, streamed through and not buffered (200 MB of it took 30 s and twice its size)."""
    from errkb.records import read

    monkeypatch.setattr(read, "MAX_VALUE_BYTES", 2 << 20)
    path = tmp_path / "garbage.jsonl"
    with path.open("w") as f:
        f.write('{"ok": 1}\n')
        for _ in range(40):
            f.write("x" * (1 << 20))
    first, reject = read_records([path])
    assert first.error is None
    assert reject.error_line == (f"{path}:2:1: invalid JSON: a JSON value cannot start with '{'x' * 40}' (no line starts "
                                 "a value in the next 2 MiB: the rest of the file is this reject) (the reject keeps the "
                                 "first 1 MiB of 40 MiB)")
    assert reject.raw == b"x" * (1 << 20)


def test_a_whole_number_written_as_a_decimal_is_read_as_the_integer(tmp_path, seed_wrapper):
    """JSON Schema takes 221.0 as an integer, so the record was stored with it, the line
    checks (E301, E302, E304: `isinstance(x, int)`) skipped it, and the site showed
    "file.py:221.0". A writer that went through a float column (pandas, for a column
    with nulls) writes integers so."""
    from errkb.records.lint import lint_record

    rec = seed_wrapper["record"]
    path = tmp_path / "r.json"
    path.write_text(json.dumps({**seed_wrapper, "record": {**rec, "lineNumber": 221.0, "httpStatus": 404.0}}))
    [item] = read_records([path])
    assert (item.record["lineNumber"], item.record["httpStatus"]) == (221, 404)
    assert type(item.record["lineNumber"]) is int
    assert item.warnings == [f"{path}:1:1: httpStatus 404.0 read as the integer 404",
                             f"{path}:1:1: lineNumber 221.0 read as the integer 221"]
    path.write_text(json.dumps({**rec, "lineNumber": 300.0}))
    [item] = read_records([path])
    assert [f.code for f in lint_record(item.record)] == ["E301"]
    path.write_text(json.dumps({**rec, "lineNumber": 221.5}))
    [item] = read_records([path])
    assert [f.message for f in lint_record(item.record)] == ['/lineNumber: 221.5 is not of type "integer"']
