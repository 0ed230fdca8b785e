"""Progress lines without a terminal: phases are repeated as "still …", events after the steady phase are not."""

from __future__ import annotations

import time

from cli.progress_lines import PhaseLines


def test_events_while_following_are_not_repeated_as_phases() -> None:
    out: list[str] = []
    lines = PhaseLines(0.01, echo=out.append)
    lines.say("waiting for brokers to register with the KRaft controller: 1")
    time.sleep(0.02)
    lines.tick()
    assert out[-1].startswith("still waiting for brokers")  # a phase that ends: repeated while it lasts
    lines.say("following as the controller (pid 1); stop with SIGTERM or Ctrl-C")
    lines.say("ZK broker 2: cannot connect to 127.0.0.1:9092 (PLAINTEXT): [Errno 111] Connection refused")
    lines.say("unfenced broker 3")
    time.sleep(0.02)
    lines.tick()
    assert out[-1] == "unfenced broker 3"  # each event printed once, nothing "still" about it
    assert not any(line.startswith("still ZK broker") or line.startswith("still unfenced") for line in out)


def test_an_unannounced_phase_is_named_once_it_lasts_then_repeated_as_still() -> None:
    """A one-shot run does not announce phases; one that lasts the interval is named before any
    "still", and one that ends sooner is never printed."""
    out: list[str] = []
    lines = PhaseLines(0.05, echo=out.append, announce=False)
    lines.say("checking eligibility")
    lines.tick()
    assert out == []  # not lasted yet
    lines.say("copying into the log")  # the first phase ended unnamed
    time.sleep(0.06)
    lines.tick()
    assert out == ["copying into the log"]
    lines.tick()
    assert out == ["copying into the log"]  # not due again yet
    time.sleep(0.06)
    lines.tick()
    assert out[-1].startswith("still copying into the log (")
    assert not any("checking eligibility" in line for line in out)


def test_broker_events_during_a_phase_are_said_once_and_the_phase_goes_on():
    """The controller's broker events while the copy runs (seen with real Kafka: "still unfenced
    broker 3 (72s)" for two minutes of copying) are printed as they come; the phase stays the one
    that lasts."""
    out: list[str] = []
    lines = PhaseLines(0.05, echo=out.append)
    lines.say("copying into the log")
    lines.say("unfenced broker 3")
    lines.say("fenced broker 1: no heartbeat within the session")
    time.sleep(0.06)
    lines.tick()
    assert out[:3] == [
        "copying into the log",
        "unfenced broker 3",
        "fenced broker 1: no heartbeat within the session",
    ]
    assert out[-1].startswith("still copying into the log (")
    assert not any(line.startswith(("still unfenced", "still fenced")) for line in out)
