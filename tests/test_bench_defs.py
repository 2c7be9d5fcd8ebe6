"""Tests of the shipped benchmark models in bench_defs/.

The references (`B_pytorch`) are checked against finite differences, ADBench's published
GMM values and an independent NumPy/SciPy GMM; the other implementations (`B_pytorch_nice`,
the compiler source `B` and its TorchScript) are checked against the references in float64.
The modules are loaded from their files, as the runner's workers do.
"""

import importlib.util
import math
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
import scipy.special
import torch

# torch.jit.script is deprecated upstream but is still one of the runner's tools.
pytestmark = pytest.mark.filterwarnings(
    "ignore:`torch.jit.script` is deprecated:DeprecationWarning"
)

ROOT = Path(__file__).resolve().parents[1]
BENCH_DEFS = ROOT / "bench_defs"
EXPECTED_DIR = Path(__file__).resolve().parent / "data" / "adbench_gmm_expected"

# (module file stem, model name)
MODELS = [
    ("relu3", "vrelu3"),
    ("gelu", "vgelu"),
    ("sqrl", "sqrl"),
    ("sqrl", "vsqrl"),
    ("gmm", "gmm"),
]
MODEL_IDS = [name for _, name in MODELS]

DEFAULT_CONFIG_NAMES = {
    "vrelu3": ["16", "65025", "1048576"],
    "vgelu": ["16", "65025", "1048576"],
    "sqrl": ["4x4", "16x16"],
    "vsqrl": ["10x4x4", "1000x4x4", "1000x16x16"],
}


def load_module(stem: str) -> ModuleType:
    name = f"_bench_defs_{stem}"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, BENCH_DEFS / f"{stem}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def model_fn(stem: str, model: str, suffix: str = ""):
    return getattr(load_module(stem), model + suffix)


def as_args(config) -> tuple:
    return config if isinstance(config, tuple) else (config,)


def configs(stem: str, model: str, seed: int = 0) -> list[tuple]:
    torch.manual_seed(seed)
    return [as_args(c) for c in model_fn(stem, model, "_bench_configs")()]


def diff_args(stem: str, model: str, args: tuple) -> tuple[int, ...]:
    default = tuple(
        i for i, a in enumerate(args) if isinstance(a, torch.Tensor) and a.is_floating_point()
    )
    return getattr(load_module(stem), f"{model}_diff_args", default)


def to_float64(args: tuple) -> tuple:
    return tuple(
        a.to(torch.float64) if isinstance(a, torch.Tensor) and a.is_floating_point() else a
        for a in args
    )


def value_and_grads(fn, args: tuple, diff: tuple[int, ...], seed: int) -> list[torch.Tensor]:
    """The output and the vector-Jacobian product for a seeded random cotangent (all ones
    would hide gradients that are wrong by a permutation or a sign pattern)."""
    args = tuple(a.detach().requires_grad_() if i in diff else a for i, a in enumerate(args))
    out = fn(*args)
    generator = torch.Generator().manual_seed(seed)
    # Drawn in float64 and cast: torch.randn's values for one seed depend on the dtype.
    cotangent = torch.randn(out.shape, generator=generator, dtype=torch.float64).to(out.dtype)
    grads = torch.autograd.grad(out, [args[i] for i in diff], cotangent)
    return [out.detach(), *grads]


def assert_close(got: torch.Tensor, ref: torch.Tensor, rtol: float, atol: float, what: str):
    """The runner's criterion: |got - ref| <= atol * max(1, max|ref|) + rtol * |ref|."""
    assert got.shape == ref.shape, f"{what}: shape {tuple(got.shape)} != {tuple(ref.shape)}"
    assert got.dtype == ref.dtype, f"{what}: dtype {got.dtype} != {ref.dtype}"
    scale = max(1.0, ref.abs().max().item()) if ref.numel() else 1.0
    err = (got - ref).abs()
    bound = atol * scale + rtol * ref.abs()
    assert torch.all(err <= bound), f"{what}: max abs error {err.max().item():.3e}"


def small_inputs(model: str) -> list[tuple]:
    """Small float64 inputs for gradcheck and cross-checks, covering every branch."""
    generator = torch.Generator().manual_seed(1234)

    def rand(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=generator, dtype=torch.float64)

    if model == "vrelu3":
        pieces = torch.tensor([-2.0, -0.3, 0.2, 0.6, 0.95, 1.2, 3.0], dtype=torch.float64)
        return [(pieces,), (1.5 * rand(9),)]
    if model == "vgelu":
        return [(3.0 * rand(9),)]
    if model == "sqrl":
        x = rand(3, 3)
        x = x - x.mean()
        return [(x + 0.4,), (x - 0.4,)]
    if model == "vsqrl":
        x = rand(4, 3, 3)
        x = x - x.mean(dim=(1, 2), keepdim=True)
        shift = torch.tensor([0.5, -0.5, 0.3, -0.7], dtype=torch.float64)
        return [(x + shift[:, None, None],)]
    if model == "gmm":
        gmm_mod = load_module("gmm")
        d, k, n = 3, 4, 5
        small = (
            rand(k),
            rand(k, d),
            0.5 * rand(k, d + d * (d - 1) // 2),
            rand(n, d),
            1.5,
            2.0,
        )
        return [gmm_mod.load_adbench_gmm(gmm_mod.DATA_DIR / "test.txt"), small]
    raise AssertionError(model)


# 1. The references against finite differences.


@pytest.mark.parametrize("stem,model", MODELS, ids=MODEL_IDS)
def test_reference_gradcheck(stem, model):
    reference = model_fn(stem, model, "_pytorch")
    for args in small_inputs(model):
        diff = diff_args(stem, model, args)

        def of_diff_args(*diff_values, args=args, diff=diff):
            full = list(args)
            for i, v in zip(diff, diff_values):
                full[i] = v
            return reference(*full)

        inputs = tuple(args[i].detach().requires_grad_() for i in diff)
        assert torch.autograd.gradcheck(of_diff_args, inputs)


def test_sqrl_inputs_cover_both_branches():
    signs = {bool(x.sum() < 0) for (x,) in small_inputs("sqrl")}
    assert signs == {True, False}
    (x,) = small_inputs("vsqrl")[0]
    assert set((x.sum(dim=(1, 2)) < 0).tolist()) == {True, False}


# 2. The other implementations against the reference, in float64.

# gmm's d20_K50_n2000 config is left out: it takes seconds and has no code path that the
# other gmm configs lack.
SKIP_CROSS_CHECK = {("gmm", 3)}


def implementations(stem: str, model: str) -> dict:
    source = model_fn(stem, model)
    return {
        "pytorch_nice": model_fn(stem, model, "_pytorch_nice"),
        "source": source,
        "torchscript": torch.jit.script(source),
    }


@pytest.mark.parametrize("stem,model", MODELS, ids=MODEL_IDS)
def test_implementations_agree_with_reference(stem, model):
    reference = model_fn(stem, model, "_pytorch")
    cases = [
        to_float64(args)
        for i, args in enumerate(configs(stem, model))
        if (model, i) not in SKIP_CROSS_CHECK
    ]
    cases += small_inputs(model)
    tools = implementations(stem, model)
    for case_index, args in enumerate(cases):
        diff = diff_args(stem, model, args)
        expected = value_and_grads(reference, args, diff, seed=case_index)
        for tool, fn in tools.items():
            got = value_and_grads(fn, args, diff, seed=case_index)
            for j, (g, e) in enumerate(zip(got, expected)):
                what = f"{model} {tool} case {case_index} " + ("value" if j == 0 else f"grad {j}")
                assert_close(g, e, rtol=1e-10, atol=1e-12, what=what)


def test_vrelu3_gradient_at_the_joins_and_far_left():
    # relu3' is 0 at 0, 1 at 1 (the linear piece starts there) and 0 for x < 0; a `where`
    # over a cube of a negative number must not leak a NaN or a nonzero gradient there.
    x = torch.tensor([-1e6, -1.0, 0.0, 1.0], dtype=torch.float64)
    expected = torch.tensor([0.0, 0.0, 0.0, 1.0], dtype=torch.float64)
    reference = model_fn("relu3", "vrelu3", "_pytorch")
    for fn in [reference, *implementations("relu3", "vrelu3").values()]:
        xg = x.clone().requires_grad_()
        (grad,) = torch.autograd.grad(fn(xg).sum(), xg)
        assert torch.equal(grad, expected), fn


# 3. The configs: deterministic under the seed, float32, named.


@pytest.mark.parametrize("stem,model", MODELS, ids=MODEL_IDS)
def test_configs_are_deterministic_float32(stem, model):
    first = configs(stem, model, seed=7)
    second = configs(stem, model, seed=7)
    assert len(first) == len(second) > 0
    for a, b in zip(first, second):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            if isinstance(x, torch.Tensor):
                assert x.dtype == torch.float32
                assert torch.equal(x, y)
            else:
                assert x == y


@pytest.mark.parametrize("model", sorted(DEFAULT_CONFIG_NAMES))
def test_default_config_names(model):
    stem = dict((m, s) for s, m in MODELS)[model]
    assert not hasattr(load_module(stem), f"{model}_config_names")
    names = ["x".join(str(s) for s in args[0].shape) for args in configs(stem, model)]
    assert names == DEFAULT_CONFIG_NAMES[model]


def test_gmm_config_names_describe_the_configs():
    gmm_mod = load_module("gmm")
    all_configs = configs("gmm", "gmm")
    assert len(gmm_mod.gmm_config_names) == len(all_configs)
    assert len(set(gmm_mod.gmm_config_names)) == len(all_configs)
    for name, (alphas, means, icf, x, gamma, m) in zip(gmm_mod.gmm_config_names, all_configs):
        sizes = dict((part[0], int(part[1:])) for part in name.split("_") if part[1:].isdigit())
        d, k, n = sizes["d"], sizes["K"], sizes["n"]
        assert alphas.shape == (k,)
        assert means.shape == (k, d)
        assert icf.shape == (k, d + d * (d - 1) // 2)
        assert x.shape == (n, d)
        assert isinstance(gamma, float) and isinstance(m, float)


# 4. The references never call the code under test.


@pytest.mark.parametrize("stem", sorted({s for s, _ in MODELS}))
def test_references_do_not_call_the_tools(stem, monkeypatch):
    module = load_module(stem)
    models = [m for s, m in MODELS if s == stem]

    def forbidden(*args, **kwargs):
        raise AssertionError("the reference called a tool function")

    for model in models:
        monkeypatch.setattr(module, model, forbidden)
        monkeypatch.setattr(module, f"{model}_pytorch_nice", forbidden)
    for model in models:
        args = to_float64(configs(stem, model)[0])
        value_and_grads(getattr(module, f"{model}_pytorch"), args, diff_args(stem, model, args), 0)


# 5. gmm against ADBench and an independent NumPy/SciPy implementation.


def objective_and_gradient(fn, args: tuple) -> list:
    """Objective and gradient (the objective is a scalar, so this is the whole gradient)."""
    inputs = [a.detach().requires_grad_() for a in args[:3]]
    out = fn(*inputs, *args[3:])
    return [out.item(), *torch.autograd.grad(out, inputs)]


def test_gmm_loader_reads_adbench_layout(tmp_path):
    gmm_mod = load_module("gmm")
    alphas, means, icf, x, gamma, m = gmm_mod.load_adbench_gmm(gmm_mod.DATA_DIR / "test.txt")
    assert alphas.dtype == means.dtype == icf.dtype == x.dtype == torch.float64
    assert alphas.tolist() == [-0.649014, 1.181166, -0.758453]
    assert means[2].tolist() == [0.538817, 0.419195]
    assert icf[1].tolist() == [-1.509405, 0.875874, -0.242790]
    assert x.tolist() == [[1.175171, 2.029160]]
    assert (gamma, m) == (1.0, 0.0)

    # A single row of x stands for N copies of itself.
    lines = (gmm_mod.DATA_DIR / "test.txt").read_text().splitlines()
    lines[0] = "2 3 4"
    replicated = tmp_path / "replicated.txt"
    replicated.write_text("\n".join(lines))
    x4 = gmm_mod.load_adbench_gmm(replicated)[3]
    assert x4.tolist() == [[1.175171, 2.029160]] * 4

    lines[-2] = "1.0 2.0 3.0"
    broken = tmp_path / "broken.txt"
    broken.write_text("\n".join(lines))
    with pytest.raises(ValueError, match="rows of 2 values"):
        gmm_mod.load_adbench_gmm(broken)


def test_gmm_reproduces_adbench_published_values():
    gmm_mod = load_module("gmm")
    args = gmm_mod.load_adbench_gmm(gmm_mod.DATA_DIR / "test.txt")
    value, *grads = objective_and_gradient(gmm_mod.gmm_pytorch, args)
    expected_value = float((EXPECTED_DIR / "test_objective.txt").read_text())
    expected_grad = np.loadtxt(EXPECTED_DIR / "test_gradient.txt")
    # ADBench's gradient order: alphas, means row by row, icf row by row.
    grad = torch.cat([g.reshape(-1) for g in grads]).numpy()
    assert value == pytest.approx(expected_value, rel=1e-12)
    np.testing.assert_allclose(grad, expected_grad, rtol=1e-12, atol=1e-15)


def gmm_numpy(alphas, means, icf, x, wishart_gamma, wishart_m) -> float:
    """The ADBench objective straight from its definition, one component at a time."""
    k, d = means.shape
    n = x.shape[0]
    main = np.empty((n, k))
    prior = 0.0
    for j in range(k):
        q = np.diag(np.exp(icf[j, :d]))
        position = d
        for col in range(d):
            for row in range(col + 1, d):
                q[row, col] = icf[j, position]
                position += 1
        z = (x - means[j]) @ q.T  # row i is Q_j (x_i - mu_j)
        main[:, j] = alphas[j] + icf[j, :d].sum() - 0.5 * np.sum(z**2, axis=1)
        frobenius = np.sum(np.exp(icf[j, :d]) ** 2) + np.sum(icf[j, d:] ** 2)
        prior += 0.5 * wishart_gamma**2 * frobenius - wishart_m * icf[j, :d].sum()
    n_w = d + wishart_m + 1
    log_c = n_w * d * (math.log(wishart_gamma) - 0.5 * math.log(2))
    log_c -= scipy.special.multigammaln(0.5 * n_w, d)
    return (
        -0.5 * n * d * math.log(2 * math.pi)
        + scipy.special.logsumexp(main, axis=1).sum()
        - n * scipy.special.logsumexp(alphas)
        + prior
        - k * log_c
    )


def numpy_args(args: tuple) -> tuple:
    return tuple(a.numpy() if isinstance(a, torch.Tensor) else a for a in args)


@pytest.mark.parametrize(
    "name", ["test.txt", "gmm_d2_K5_n1000.txt", "gmm_d10_K25_n1000.txt", "small-random"]
)
def test_gmm_objective_matches_numpy(name):
    gmm_mod = load_module("gmm")
    if name == "small-random":
        args = small_inputs("gmm")[1]
    else:
        args = gmm_mod.load_adbench_gmm(gmm_mod.DATA_DIR / name)
    got = gmm_mod.gmm_pytorch(*args).item()
    assert got == pytest.approx(gmm_numpy(*numpy_args(args)), rel=1e-12, abs=1e-12)


@pytest.mark.parametrize("name", ["gmm_d2_K5_n1000.txt", "small-random"])
def test_gmm_gradient_matches_numpy_finite_differences(name):
    gmm_mod = load_module("gmm")
    if name == "small-random":
        args = small_inputs("gmm")[1]
    else:
        args = gmm_mod.load_adbench_gmm(gmm_mod.DATA_DIR / name)
    _, *grads = objective_and_gradient(gmm_mod.gmm_pytorch, args)
    base = numpy_args(args)
    h = 1e-5
    for arg in range(3):
        for index in np.ndindex(base[arg].shape):
            plus = [a.copy() if isinstance(a, np.ndarray) else a for a in base]
            minus = [a.copy() if isinstance(a, np.ndarray) else a for a in base]
            plus[arg][index] += h
            minus[arg][index] -= h
            fd = (gmm_numpy(*plus) - gmm_numpy(*minus)) / (2 * h)
            got = grads[arg][index].item()
            assert got == pytest.approx(fd, rel=1e-6, abs=1e-6), (arg, index)
