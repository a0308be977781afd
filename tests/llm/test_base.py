"""The backend registry: names and "module:attr" specs, resolved lazily."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest

from pipeline.config import BackendConfig, ConfigError
from pipeline.llm.base import BACKENDS, GenerationParams, backend_factory, make_backend
from tests import doubles


def test_every_named_backend_resolves_to_a_factory():
    for kind in BACKENDS:
        assert callable(backend_factory(kind))


def test_unknown_kind_names_the_known_ones():
    with pytest.raises(ConfigError, match="unknown backend 'nope'.*extractive, local, openai.*module:attr"):
        make_backend(BackendConfig(kind="nope"))


def test_missing_attr_of_a_spec_is_one_clear_error():
    with pytest.raises(ConfigError, match="cannot load backend factory 'tests.doubles:no_such_factory'"):
        make_backend(BackendConfig(kind="tests.doubles:no_such_factory"))


def test_module_attr_kind_builds_the_backend_it_names():
    doubles.SCRIPTS["base-test"] = ["hello"]
    backend = make_backend(BackendConfig(kind=doubles.SCRIPTED_KIND, model="base-test"))
    comp = asyncio.run(backend.complete([{"role": "user", "content": "hi"}], GenerationParams()))
    assert comp.text == "hello" and backend.name == "base-test"


def test_building_one_backend_imports_no_other():
    code = (
        "import sys\n"
        "from pipeline.config import BackendConfig\n"
        "from pipeline.llm.base import make_backend\n"
        "make_backend(BackendConfig(kind='extractive'))\n"
        "print(sorted(m for m in ('pipeline.llm.local', 'pipeline.llm.openai_backend', 'torch') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
