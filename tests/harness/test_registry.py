"""The harness registry, the one episode entry point and the one output cutter."""

from __future__ import annotations

import asyncio

import pytest

from pipeline.config import ConfigError, HarnessConfig, SamplingConfig
from pipeline.harness.episode import run_harness
from pipeline.harness.output_cut import cut
from pipeline.harness.registry import HARNESSES, episode_function
from pipeline.harness.root import run_episode
from pipeline.harness.toolloop import run_toolloop_episode


def test_registry_names_each_harness_episode_function():
    assert set(HARNESSES) == {"rlm", "toolloop"}
    assert episode_function("rlm") is run_episode
    assert episode_function("toolloop") is run_toolloop_episode


def test_unknown_harness_names_the_known_ones():
    with pytest.raises(ConfigError, match="unknown harness 'nope'.*rlm, toolloop"):
        asyncio.run(
            run_harness(
                None,
                None,
                None,
                None,
                HarnessConfig(kind="nope"),
                SamplingConfig(),
                trajectory_id="t",
                policy_id="p",
            )
        )


def test_cut_keeps_short_text_and_marks_what_it_drops():
    assert cut("abc", 3) == "abc"
    assert cut("abcdef", 3) == "abc\n[... 3 more characters]"
    # Slack: text a little over the limit (an earlier cut's marker) comes back whole.
    assert cut("abcdef", 3, slack=3) == "abcdef"
    assert cut("abcdefg", 3, slack=3) == "abc\n[... 4 more characters]"
