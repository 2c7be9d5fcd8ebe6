"""gmm: the Gaussian mixture model objective of ADBench, in ADBench's sign convention.

Inputs: alphas (K), means (K, D), icf (K, D + D(D-1)/2), x (N, D), and the Wishart prior's
wishart_gamma and wishart_m (plain floats). For each component k, with q_k = icf[k, :D] and
l_k = icf[k, D:]:

    Q_k = diag(exp(q_k)) + L_k      (L_k strictly lower triangular, filled column by
                                     column from l_k)
    main[i, k] = alpha_k + sum(q_k) - 0.5 * || Q_k (x_i - mu_k) ||^2
    obj = -(N D / 2) log(2 pi) + sum_i logsumexp_k main[i, k] - N logsumexp(alpha)
          + sum_k [ 0.5 gamma^2 (||exp(q_k)||^2 + ||l_k||^2) - m sum(q_k) ] - K C
    C = n_w D (log gamma - 0.5 log 2) - log Gamma_D(n_w / 2),   n_w = D + m + 1

The gradient is taken with respect to alphas, means and icf; x, gamma and m are data.

The configs are three ADBench input files (shipped in data/adbench_gmm/, see the README
there) and one larger random instance. load_adbench_gmm reads an ADBench file.

A benchmark definition in kscperf's plain naming convention: imports torch, never kscperf.
"""

import math
from collections.abc import Iterator
from pathlib import Path

import torch

GmmArgs = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, float, float]

DATA_DIR = Path(__file__).resolve().parent / "data" / "adbench_gmm"

gmm_config_names = ["test_d2_K3_n1", "d2_K5_n1000", "d10_K25_n1000", "d20_K50_n2000"]

gmm_diff_args = (0, 1, 2)

_ADBENCH_FILES = ("test.txt", "gmm_d2_K5_n1000.txt", "gmm_d10_K25_n1000.txt")


def load_adbench_gmm(path: str | Path) -> GmmArgs:
    """Read an ADBench GMM input file.

    Returns (alphas, means, icf, x, wishart_gamma, wishart_m): float64 tensors and two
    floats. The file is whitespace separated: `D K N`, K alphas, K means of D values, K icf
    rows of D + D(D-1)/2 values, the points, then `gamma m`. The points are either N rows
    of D values or a single row that stands for N copies of itself.
    """
    tokens = Path(path).read_text().split()
    d, k, n = (int(t) for t in tokens[:3])
    icf_size = d + d * (d - 1) // 2
    values = [float(t) for t in tokens[3:]]
    sizes = (k, k * d, k * icf_size)
    head = sum(sizes)
    n_x = len(values) - head - 2
    if n_x == n * d:
        x_rows = n
    elif n_x == d:
        x_rows = 1
    else:
        raise ValueError(
            f"{path}: expected {n} or 1 rows of {d} values for x, found {n_x} values"
        )
    data = torch.tensor(values, dtype=torch.float64)
    alphas, means, icf, x = torch.split(data[: head + n_x], (*sizes, n_x))
    x = x.reshape(x_rows, d).expand(n, d).clone()
    wishart_gamma, wishart_m = values[-2], values[-1]
    return (
        alphas.clone(),
        means.reshape(k, d).clone(),
        icf.reshape(k, icf_size).clone(),
        x,
        wishart_gamma,
        wishart_m,
    )


def gmm_bench_configs() -> Iterator[GmmArgs]:
    for name in _ADBENCH_FILES:
        alphas, means, icf, x, gamma, m = load_adbench_gmm(DATA_DIR / name)
        yield alphas.float(), means.float(), icf.float(), x.float(), gamma, m
    d, k, n = 20, 50, 2000
    # icf is scaled by 0.1 so that Q_k stays close to the identity: ||Q_k (x_i - mu_k)||^2
    # is then of order D instead of growing with the 190 off-diagonal entries of L_k.
    yield (
        torch.randn(k),
        torch.randn(k, d),
        0.1 * torch.randn(k, d + d * (d - 1) // 2),
        torch.randn(n, d),
        1.0,
        0.0,
    )


def gmm_pytorch(
    alphas: torch.Tensor,
    means: torch.Tensor,
    icf: torch.Tensor,
    x: torch.Tensor,
    wishart_gamma: float,
    wishart_m: float,
) -> torch.Tensor:
    n, d = x.shape
    k = alphas.shape[0]
    log_diag = icf[:, :d]
    lower_values = icf[:, d:]
    diag = log_diag.exp()

    # Strictly lower (row, col) positions in column-major order are the upper triangle's
    # row-major positions with row and col swapped.
    upper_rows, upper_cols = torch.triu_indices(d, d, offset=1, device=icf.device)
    flat_positions = upper_cols * d + upper_rows
    q = torch.zeros(k, d * d, dtype=icf.dtype, device=icf.device)
    q = q.index_copy(1, flat_positions, lower_values).reshape(k, d, d)
    q = q + torch.diag_embed(diag)

    centred = x.unsqueeze(0) - means.unsqueeze(1)  # (K, N, D)
    sq_norms = torch.bmm(centred, q.transpose(1, 2)).square().sum(dim=2)  # (K, N)
    main = (alphas + log_diag.sum(dim=1)).unsqueeze(1) - 0.5 * sq_norms
    log_likelihood = (
        -0.5 * n * d * math.log(2.0 * math.pi)
        + torch.logsumexp(main, dim=0).sum()
        - n * torch.logsumexp(alphas, dim=0)
    )

    n_w = d + wishart_m + 1.0
    # multigammaln of a 0-dim tensor in icf's dtype: a float64 constant would promote a
    # float32 objective (0-dim itself) to float64.
    half_n_w = torch.full((), 0.5 * n_w, dtype=icf.dtype, device=icf.device)
    log_c = n_w * d * (math.log(wishart_gamma) - 0.5 * math.log(2.0))
    log_c = log_c - torch.special.multigammaln(half_n_w, d)
    log_prior = (
        0.5 * wishart_gamma**2 * (diag.square().sum() + lower_values.square().sum())
        - wishart_m * log_diag.sum()
        - k * log_c
    )
    return log_likelihood + log_prior


def _lower_from_columns(values: torch.Tensor, d: int) -> torch.Tensor:
    """The strictly lower triangular D x D matrix whose columns, top to bottom and left to
    right, hold `values` in order."""
    columns = []
    start = 0
    for col in range(d):
        length = d - 1 - col
        above_and_on_diagonal = values.new_zeros(col + 1)
        columns.append(torch.cat([above_and_on_diagonal, values[start : start + length]]))
        start += length
    return torch.stack(columns, dim=1)


def gmm_pytorch_nice(
    alphas: torch.Tensor,
    means: torch.Tensor,
    icf: torch.Tensor,
    x: torch.Tensor,
    wishart_gamma: float,
    wishart_m: float,
) -> torch.Tensor:
    n, d = x.shape
    k = alphas.shape[0]

    log_likelihoods = []  # one (N,) tensor per component
    log_prior = torch.zeros((), dtype=icf.dtype, device=icf.device)
    for j in range(k):
        log_diag = icf[j, :d]
        lower_values = icf[j, d:]
        q = torch.diag(torch.exp(log_diag)) + _lower_from_columns(lower_values, d)
        z = (x - means[j]) @ q.T  # row i is Q_j (x_i - mu_j)
        log_likelihoods.append(alphas[j] + torch.sum(log_diag) - 0.5 * torch.sum(z**2, dim=1))

        frobenius = torch.sum(torch.exp(log_diag) ** 2) + torch.sum(lower_values**2)
        log_prior = log_prior + 0.5 * wishart_gamma**2 * frobenius - wishart_m * torch.sum(log_diag)

    log_likelihood = (
        -n * d / 2 * math.log(2 * math.pi)
        + torch.sum(torch.logsumexp(torch.stack(log_likelihoods, dim=1), dim=1))
        - n * torch.logsumexp(alphas, dim=0)
    )
    n_w = d + wishart_m + 1
    log_multigamma = torch.special.multigammaln(torch.tensor(n_w / 2, dtype=torch.float64), d)
    c = n_w * d * (math.log(wishart_gamma) - 0.5 * math.log(2)) - float(log_multigamma)
    return log_likelihood + log_prior - k * c


def gmm(
    alphas: torch.Tensor,
    means: torch.Tensor,
    icf: torch.Tensor,
    x: torch.Tensor,
    wishart_gamma: float,
    wishart_m: float,
) -> torch.Tensor:
    n = x.shape[0]
    d = x.shape[1]
    k = alphas.shape[0]
    log_diag = icf[:, :d]
    lower_values = icf[:, d:]
    diag = torch.exp(log_diag)

    upper = torch.triu_indices(d, d, 1, device=icf.device)
    lower = torch.zeros(k, d, d, dtype=icf.dtype, device=icf.device)
    lower[:, upper[1], upper[0]] = lower_values

    # Q_k (x_i - mu_k) = exp(q_k) * (x_i - mu_k) + L_k (x_i - mu_k), no dense diagonal.
    centred = x.unsqueeze(0) - means.unsqueeze(1)
    qx = diag.unsqueeze(1) * centred + torch.einsum("kij,knj->kni", lower, centred)
    main = (alphas + torch.sum(log_diag, 1)).unsqueeze(1) - 0.5 * torch.sum(qx * qx, 2)
    log_likelihood = (
        -0.5 * n * d * math.log(2.0 * math.pi)
        + torch.sum(torch.logsumexp(main, 0))
        - n * torch.logsumexp(alphas, 0)
    )

    n_w = d + wishart_m + 1.0
    half_n_w = torch.full((), 0.5 * n_w, dtype=icf.dtype, device=icf.device)
    c = n_w * d * (math.log(wishart_gamma) - 0.5 * math.log(2.0))
    c = c - torch.special.multigammaln(half_n_w, d)
    frobenius = torch.sum(diag * diag) + torch.sum(lower_values * lower_values)
    log_prior = (
        0.5 * wishart_gamma * wishart_gamma * frobenius
        - wishart_m * torch.sum(log_diag)
        - k * c
    )
    return log_likelihood + log_prior
