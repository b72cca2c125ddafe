"""A new user's inputs to every entry point (issue 55): the generated, labelled corpus of
``tests/_inputs_corpus.py`` through the library's readers and the ``volary`` commands; every
invalid input refused cleanly, every valid one read back as written."""

from __future__ import annotations

import pytest

from _inputs_corpus import API, BAD_OUTCOMES, Case, classify_cli, corpus, run


def _check(doc: dict) -> None:
    bad = {k: n for k, n in doc["outcomes"].items() if k in BAD_OUTCOMES}
    kinds = [f"{k['entry']} [{k['kind']}] {k['outcome']}: {k['example']} -> {k['detail'][:120]}"
             for k in doc["failure_kinds"]]  # fmt: skip
    assert not bad, "\n".join([str(bad), *kinds])


def test_a_short_sweep_over_every_entry_point_finds_no_bad_outcome(tmp_path):
    """128 library inputs (8 per reader, 16 readers) and 2 command lines: no traceback,
    hang, memory blow-up, silent acceptance or refused valid input (about 13 s here)."""
    doc = run(128, 2, tmp_path, seed=7)
    for entry in API:  # both labels reached every reader, so the sweep can fail either way
        counts = doc["per_entry"][entry]
        assert counts.get("clean", 0) + counts.get("wrong", 0) > 0, entry
        assert sum(counts.values()) - counts.get("clean", 0) - counts.get("wrong", 0) > 0, entry
    _check(doc)


def test_the_corpus_is_the_same_for_the_same_seed():
    a, b = corpus(24, 7, seed=3), corpus(24, 7, seed=3)
    assert [(c.entry, c.kind, c.label, c.data, c.special, c.args) for c in a] == [
        (c.entry, c.kind, c.label, c.data, c.special, c.args) for c in b
    ]
    assert {c.entry for c in a} >= set(API)
    assert any(c.valid for c in a) and any(not c.valid for c in a)


@pytest.mark.parametrize(
    ("valid", "rc", "text", "outcome"),
    [
        (False, 2, "error: --to: expected a finite number, got nan\n", "clean"),
        (False, 2, "Usage: volary fly\n Error: Invalid value for '--to'\n", "clean"),
        (False, 0, "final position [m]: [nan, 0, 1]\n", "wrong"),
        (False, 1, "error: bad\n", "unclean"),
        (False, 2, "error: one\nerror: two\n", "unclean"),
        (False, 1, "Traceback (most recent call last):\nValueError: x\n", "traceback"),
        (False, None, "", "hang"),
        (False, 1, "MemoryError\n", "memory"),
        (False, -9, "", "memory"),
        (True, 0, "wrote out/fly.csv\n", "valid"),
        (True, 2, "error: --to: expected ...\n", "refused_valid"),
    ],
)
def test_a_command_is_classified_by_its_exit_status_and_output(valid, rc, text, outcome):
    case = Case("volary fly", "cli", "valid" if valid else "--to nan")
    assert classify_cli(case, rc, text)[0] == outcome


def test_a_command_killed_at_the_deadline_after_starting_the_work_accepted_its_input():
    case = Case("volary serve", "cli", "--ticks -1", started="volary serve: tcp")
    assert classify_cli(case, None, "volary serve: tcp://127.0.0.1:5555 ...\n")[0] == "wrong"


@pytest.mark.slow
def test_the_full_corpus(tmp_path):
    """The issue's run: 1,600 library inputs and 70 command lines (about 15 minutes here)."""
    doc = run(1600, 70, tmp_path, seed=0)
    assert doc["inputs"] == 1670
    _check(doc)
