"""Config loading: defaults < recipe < overrides, strict about keys, types and files."""

import pytest

from pipeline.config import RECIPES_DIR, ConfigError, PipelineConfig, config_help, load_config


def test_recipe_and_overrides_layer(tmp_path):
    recipe = tmp_path / "r.yaml"
    recipe.write_text("sample: {k: 3}\nfilter: {min_score: 0.5}\n")
    cfg = load_config(recipe, ["sample.k=5", "models.root.kind=openai", "grade.judges=[reference,llm]"])
    assert cfg.sample.k == 5
    assert cfg.filter.min_score == 0.5
    assert cfg.models.root.kind == "openai"
    assert cfg.grade.judges == ["reference", "llm"]
    assert cfg.sample.concurrency == PipelineConfig().sample.concurrency


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("sample: {kk: 3}\n", "unknown key 'sample.kk'"),
        ("sample: {k: three}\n", "sample.k: expected an integer"),
        ("filter: {require_submit: 1}\n", "filter.require_submit: expected true/false"),
        ("models: {root: {concurrency: [1]}}\n", "models.root.concurrency"),
        ("sample: [1, 2]\n", "sample: expected a mapping"),
        ("sample: {k: 3\n", "invalid YAML"),
    ],
)
def test_bad_recipes_name_the_key_and_file(tmp_path, text, fragment):
    recipe = tmp_path / "bad.yaml"
    recipe.write_text(text)
    with pytest.raises(ConfigError) as exc:
        load_config(recipe)
    assert fragment in str(exc.value)
    assert "bad.yaml" in str(exc.value)


def test_missing_recipe_and_bad_override():
    with pytest.raises(ConfigError, match="recipe file not found: nowhere.yaml"):
        load_config("nowhere.yaml")
    with pytest.raises(ConfigError, match="expected key=value"):
        load_config(None, ["sample.k"])
    with pytest.raises(ConfigError, match="unknown key 'nope'"):
        load_config(None, ["nope=1"])


def test_packaged_recipes_load_and_hash_is_stable():
    names = sorted(p.stem for p in RECIPES_DIR.glob("*.yaml"))
    assert {"default", "local", "tiny", "production", "vllm-cpu"} <= set(names)
    for name in names:
        cfg = load_config(name)
        assert cfg.hash() == load_config(name).hash()


def test_default_and_local_recipes_differ_only_in_how_the_root_is_served():
    default, local = load_config("default"), load_config("local")
    assert (default.models.root.kind, default.serve.manage) == ("openai", True)
    assert (local.models.root.kind, local.serve.manage) == ("local", False)
    for section in (
        "rooms",
        "harness",
        "sampling",
        "sample",
        "grade",
        "filter",
        "dataset",
        "train",
        "evaluate",
    ):
        assert getattr(default, section) == getattr(local, section), section
    assert load_config("tiny").hash("sample") != load_config("tiny", ["sample.k=9"]).hash("sample")
    assert load_config("tiny").hash("rooms") == load_config("tiny", ["sample.k=9"]).hash("rooms")


def test_every_field_has_help():
    rows = config_help()
    assert len(rows) > 50
    assert all(text for _, _, text in rows), [k for k, _, t in rows if not t]


def test_cli_exits_nonzero_on_bad_config(tmp_path, capsys):
    from pipeline.cli import main

    assert main(["config", "sample.k=abc"]) == 1
    assert "sample.k" in capsys.readouterr().err
    assert main(["--recipe", str(tmp_path / "missing.yaml"), "config"]) == 1
