"""errkb.signals: the one way errkb installs and restores signal handlers."""

from __future__ import annotations

import ast
import os
import signal
import threading
from pathlib import Path

import pytest

from errkb import signals
from errkb.errors import Stopped

PACKAGE = Path(__file__).resolve().parents[1] / "errkb"


def test_no_module_but_errkb_signals_installs_a_handler():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == PACKAGE / "signals.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "signal" \
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "signal":
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert found == []


def test_installed_restores_what_it_found():
    before = signal.getsignal(signal.SIGUSR2)
    seen = []
    with signals.installed({signal.SIGUSR2: lambda signum, frame: seen.append(signum)}):
        os.kill(os.getpid(), signal.SIGUSR2)
    assert seen == [signal.SIGUSR2]
    assert signal.getsignal(signal.SIGUSR2) is before


def test_off_the_main_thread_nothing_is_installed():
    before = signal.getsignal(signal.SIGTERM)
    errors = []

    def body():
        try:
            with signals.stop_on_signals():
                assert signal.getsignal(signal.SIGTERM) is before
        except BaseException as e:  # reported to the main thread
            errors.append(e)

    t = threading.Thread(target=body)
    t.start()
    t.join()
    assert errors == []


def test_stop_on_signals_raises_stopped_and_restores():
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(Stopped) as caught, signals.stop_on_signals():
        os.kill(os.getpid(), signal.SIGTERM)
    assert caught.value.exit_code == 128 + signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) is before


def test_signals_held_defers_a_stop_to_the_next_check():
    with signals.signals_held() as stop_if_asked:
        stop_if_asked()  # nothing arrived: free to go on
        os.kill(os.getpid(), signal.SIGINT)  # held back, not raised here
        with pytest.raises(Stopped):
            stop_if_asked()
