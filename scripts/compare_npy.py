#!/usr/bin/env python3
"""Compares carve's outputs with reference outputs (numpy only).

  scripts/compare_npy.py ACTUAL_DIR REFERENCE_PREFIX [--tolerance 1e-4]

For every REFERENCE_PREFIX.output.<name>.npy (as scripts/make_onnx_models.py writes
them) reads ACTUAL_DIR/<name>.npy and prints max |actual - ref| / max |ref|. Exits 1 when
an output is missing, has another shape, or exceeds the tolerance.
"""
import argparse
import glob
import os
import sys

import numpy as np
from urllib.parse import quote  # carve run: output_file_name (tools/cli/run_command.h)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("actual_dir")
    parser.add_argument("reference_prefix")
    parser.add_argument("--tolerance", type=float, default=1e-4)
    args = parser.parse_args()
    refs = sorted(glob.glob(args.reference_prefix + ".output.*.npy"))
    if not refs:
        print(f"no reference outputs {args.reference_prefix}.output.*.npy", file=sys.stderr)
        return 1
    ok = True
    for ref_path in refs:
        name = ref_path[len(args.reference_prefix + ".output."):-len(".npy")]
        actual_path = os.path.join(args.actual_dir, quote(name, safe="") + ".npy")
        if not os.path.exists(actual_path):
            print(f"{name}: missing {actual_path}")
            ok = False
            continue
        ref, actual = np.load(ref_path).astype(np.float64), np.load(actual_path).astype(np.float64)
        if ref.shape != actual.shape:
            print(f"{name}: shape {actual.shape}, reference {ref.shape}")
            ok = False
            continue
        scale = np.abs(ref).max() or 1.0
        err = float(np.abs(actual - ref).max() / scale) if ref.size else 0.0
        good = err <= args.tolerance
        ok = ok and good
        print(f"{name}: max rel error {err:.3e} ({'ok' if good else 'FAIL'}, tolerance {args.tolerance:g})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
