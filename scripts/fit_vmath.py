#!/usr/bin/env python3
"""Near-minimax polynomial fits for the JIT's float math (jit/llvm/emit_vmath.cpp), printed
as float constants (lowest power first). Lawson's algorithm (iteratively reweighted least
squares) in double on Chebyshev points; the fit errors printed are in 2^-24 units of the
weighted (relative) error and are far below the float evaluation's rounding.

  python scripts/fit_vmath.py        # needs numpy
"""
import math
from math import erf, erfc

import numpy as np


def minimax(f, a, b, deg, w=None, n=4000, iters=60):
    t = np.cos(np.pi * (np.arange(n) + 0.5) / n)[::-1]
    x = a + (b - a) * (t + 1) / 2
    y = np.array([f(v) for v in x])
    W = np.ones(n) if w is None else np.array([w(v) for v in x])
    A = np.stack([x ** k for k in range(deg + 1)], axis=1)
    lw = np.ones(n) / n
    for _ in range(iters):
        s = np.sqrt(lw) * W
        c, *_ = np.linalg.lstsq(A * s[:, None], y * s, rcond=None)
        e = np.abs((A @ c - y) * W)
        lw = lw * e
        lw /= lw.sum()
    return c, e.max()


def show(name, c, e):
    print(f"// {name}: fit error {e / 2 ** -24:.4f} x 2^-24")
    print("{" + ", ".join("%.9g" % np.float32(v) for v in c) + "}")


def main():
    ln2 = math.log(2)
    show("exp: (e^r - 1 - r) / r^2", *minimax(
        lambda r: (math.expm1(r) - r) / (r * r) if abs(r) > 1e-4 else 0.5 + r / 6 + r * r / 24,
        -ln2 / 2, ln2 / 2, 5, w=lambda r: r * r / math.exp(r)))
    show("log: (log1p(f) - f + f^2/2) / f^3", *minimax(
        lambda f: (math.log1p(f) - f + f * f / 2) / f ** 3 if abs(f) > 1e-3 else 1 / 3 - f / 4 + f * f / 5 - f ** 3 / 6,
        math.sqrt(0.5) - 1, math.sqrt(2) - 1, 8, w=lambda f: abs(f ** 3 / math.log1p(f)) if f != 0 else 0))
    show("tanh: (tanh(x) - x) / x^3 in z = x^2", *minimax(
        lambda z: (math.tanh(math.sqrt(z)) - math.sqrt(z)) / z ** 1.5 if z > 1e-6 else -1 / 3 + 2 * z / 15,
        0, 0.625 ** 2, 5, w=lambda z: z ** 1.5 / math.tanh(math.sqrt(z)) if z > 0 else 0))
    c, e = minimax(lambda z: erf(math.sqrt(z)) / math.sqrt(z) if z > 0 else 2 / math.sqrt(math.pi),
                   0, 0.921875 ** 2, 6, w=lambda z: math.sqrt(math.pi) / 2)
    c[0] -= 1  # erf(x) = x + x * P(x^2): c0 less 1 (emit_vmath.cpp keeps it in double)
    show("erf: erf(x) / x - 1 in z = x^2", c, e)
    lo, hi = 0.921875, 3.9375  # erf rounds to 1 above hi
    c0 = float(np.float32((lo + hi) / 2))
    print(f"// erf centre c0 = {c0!r}")
    show("erf: erf(a) in u = a - c0 on [0.921875, 3.9375] (absolute error)", *minimax(
        lambda u: erf(u + c0), lo - c0, hi - c0, 15, iters=80))
    ta, tb = 1 / (1 + 10.5 / 2), 1 / (1 + 0.921875 / 2)
    t0 = float(np.float32((ta + tb) / 2))
    F = lambda z: math.log(erfc(z)) + z * z
    print(f"// erfc centre t0 = {t0!r}")
    show("erfc: log(erfc(a) / t) + a^2 in u = t - t0", *minimax(
        lambda u: F(2 / (u + t0) - 2) - math.log(u + t0), ta - t0, tb - t0, 9))


if __name__ == "__main__":
    main()
