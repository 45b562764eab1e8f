"""sigint_held: Ctrl-C waits for the end of the block, and is not lost."""

from __future__ import annotations

import signal
import threading

import pytest

from fedcluster.engine.interrupts import sigint_held


def test_ctrl_c_inside_the_block_is_raised_when_it_ends(terminal_ctrl_c: None) -> None:
    finished = False
    with pytest.raises(KeyboardInterrupt), sigint_held():
        signal.raise_signal(signal.SIGINT)
        finished = True
    assert finished
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_an_error_in_the_block_wins_over_a_held_ctrl_c(terminal_ctrl_c: None) -> None:
    try:
        with pytest.raises(OSError, match="disk"), sigint_held():
            signal.raise_signal(signal.SIGINT)
            raise OSError("disk full")
    except KeyboardInterrupt:  # reported as a failure, not as pytest's own Ctrl-C
        pytest.fail("the held Ctrl-C replaced the block's error")
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_outside_the_main_thread_the_block_runs_as_it_is() -> None:
    """signal.signal raises ValueError outside the main thread; the block must run all the same."""
    errors: list[BaseException] = []
    ran: list[bool] = []

    def body() -> None:
        try:
            with sigint_held():
                ran.append(True)
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    worker = threading.Thread(target=body)
    worker.start()
    worker.join()
    assert errors == [] and ran == [True]


def test_an_ignored_ctrl_c_stays_ignored() -> None:
    """`nohup fedcluster run ... &` starts with SIGINT ignored: holding it must not turn it into an interrupt."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with sigint_held():
            signal.raise_signal(signal.SIGINT)
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    except KeyboardInterrupt:  # reported as a failure, not as pytest's own Ctrl-C
        pytest.fail("an ignored Ctrl-C became an interrupt")
    finally:
        signal.signal(signal.SIGINT, previous)
