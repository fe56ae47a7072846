#!/usr/bin/python3
"""Writes ONNX's backend node test cases (from the installed `onnx` package) for carve's
conformance runner (onnx_conformance.cpp).

    /usr/bin/python3 generate.py OUT_DIR [--perturb CASE REL]

Debian's python3-onnx ships the case generators but not their data
(onnx/backend/test/data/node), so the cases are made here with
onnx.backend.test.case.node.collect_testcases(). For each case, OUT_DIR/<case>/ holds
model.onnx, in<i>.npy and out<i>.npy (data set 0; node cases have one; in<i>.bf16.npy
for bfloat16, see save()). OUT_DIR/manifest.tsv
has one line per case, tab-separated:

    name  op  domain  opset  kind  compare  input names (,)  output names (,)

kind: "tensor", or why the data is not written ("sequence type", "optional type",
"string type"): the runner reports those cases as failures with that reason, never drops
them. compare: "allclose", or "random" for random ops (shape, dtype and value range only).
--perturb writes only CASE, its first output's first element scaled by 1 + REL: the
tolerance test (tolerance_test.sh) checks that the runner's comparison can fail.
Exit 77 (CTest's skip code) when the onnx package is missing.
"""
import os
import re
import shutil
import sys

try:
    import numpy as np
except ImportError:
    print("generate.py: numpy is not installed (Debian: python3-numpy; scripts/setup.sh)")
    sys.exit(77)

# onnx 1.12's case generators use the aliases numpy 1.24 removed (np.float, np.bool, ...).
for alias, value in (("bool", bool), ("float", float), ("int", int), ("object", object), ("str", str)):
    if alias not in np.__dict__:
        setattr(np, alias, value)

try:
    import onnx
    import onnx.backend.test.case.node as node_cases
except ImportError as e:
    print(f"generate.py: the onnx package is not installed ({e}; Debian: python3-onnx; scripts/setup.sh)")
    sys.exit(77)

# Random ops: their expected outputs come from numpy's generator, so only shape, dtype and
# range can be compared. Dropout with ratio 0 is deterministic and compared exactly.
RANDOM = re.compile(r"^test_(bernoulli|training_dropout(?!_zero_ratio))")


def kind_of(values):
    for v in values:
        if v is None:
            return "optional type"
        if isinstance(v, list):
            return "sequence type"
        if np.asarray(v).dtype.kind in "OSU":
            return "string type"
    return "tensor"


def save(path, value, elem_type):
    # C order: carve reads no Fortran-order .npy. bfloat16 (numpy has none; onnx keeps its
    # bits as uint16) is written as those <u2 bit patterns in NAME.bf16.npy, the name telling
    # the runner to view them as bf16 (runtime/npy.h: bf16_from_u2).
    a = np.array(value, order="C")  # ascontiguousarray would make a 0-d array 1-d
    if elem_type == onnx.TensorProto.BFLOAT16:
        a, path = a.astype("<u2"), path + ".bf16"
    np.save(path + ".npy", a, allow_pickle=False)


def main():
    if len(sys.argv) not in (2, 5) or (len(sys.argv) == 5 and sys.argv[2] != "--perturb"):
        print(__doc__)
        return 2
    out = sys.argv[1]
    perturb = sys.argv[3:5]
    np.random.seed(0)  # the generators draw their inputs at import: fixed data every run
    cases = node_cases.collect_testcases(None)
    if os.path.isdir(out):
        shutil.rmtree(out)
    os.makedirs(out)
    # The op a case tests: its node's op_type; an "_expanded" case (the op's function
    # body, several nodes) counts for the op of the case it expands.
    op_of = {c.name: c.model.graph.node[0].op_type for c in cases if len(c.model.graph.node) == 1}
    seen = {}
    lines = []
    for case in cases:
        # onnx 1.12 defines test_reduce_sum_negative_axes_keepdims_random twice.
        seen[case.name] = seen.get(case.name, 0) + 1
        name = case.name if seen[case.name] == 1 else f"{case.name}_{seen[case.name]}"
        model = case.model
        op = op_of.get(name.removesuffix("_expanded"), model.graph.node[0].op_type)
        domain = model.graph.node[0].domain or "ai.onnx"
        opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
        inputs, outputs = case.data_sets[0]
        if perturb and name != perturb[0]:
            continue
        if perturb:
            outputs = [np.array(o, copy=True) for o in outputs]
            outputs[0].flat[0] *= 1 + float(perturb[1])
        kind = kind_of(list(inputs) + list(outputs))
        in_names = [i.name for i in model.graph.input]
        out_names = [o.name for o in model.graph.output]
        for n in in_names + out_names + [name, op]:
            assert n and not re.search(r"[\t,\n]", n), f"{name}: name {n!r} cannot go in the manifest"
        assert len(in_names) == len(inputs) and len(out_names) == len(outputs), name
        case_dir = os.path.join(out, name)
        os.makedirs(case_dir)
        with open(os.path.join(case_dir, "model.onnx"), "wb") as f:
            f.write(model.SerializeToString())
        if kind == "tensor":
            for prefix, arrays, infos in (("in", inputs, model.graph.input), ("out", outputs, model.graph.output)):
                for i, (a, info) in enumerate(zip(arrays, infos)):
                    save(os.path.join(case_dir, f"{prefix}{i}"), a, info.type.tensor_type.elem_type)
        compare = "random" if RANDOM.match(name) else "allclose"
        lines.append("\t".join([name, op, domain, str(opset), kind, compare, ",".join(in_names), ",".join(out_names)]))
    with open(os.path.join(out, "manifest.tsv"), "w") as f:
        f.write(f"# onnx {onnx.__version__}, numpy {np.__version__}: {len(lines)} node cases\n")
        f.write("\n".join(lines) + "\n")
    print(f"generate.py: {len(lines)} node cases from onnx {onnx.__version__} in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
