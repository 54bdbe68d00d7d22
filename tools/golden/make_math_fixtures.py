#!/usr/bin/python3
"""Writes the golden fixtures of issue 18's elementwise math ops into tests/fixtures/*.bin:
torch.maximum and torch.minimum (broadcast, with exact ties: each input gets half the
gradient there), torch.pow (positive bases with real exponents; negative bases with integer
exponents, whose exponent is a constant so that no NaN gradient log(a < 0) is compared),
torch.floor, torch.ceil, torch.erf, and the comparisons lt, gt and eq as float masks.

Run with Debian's PyTorch (tools/golden/make_fixtures.py describes the format and precision):
    /usr/bin/python3 tools/golden/make_math_fixtures.py
tests/engine/test_golden.c replays them on every device. This script has its own seeded
generator, so the other fixtures stay byte for byte what they were.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_fixtures as mf  # noqa: E402

mf.gen = torch.Generator().manual_seed(20261126)
uniform = mf.uniform


def quarters(shape, lo, hi):
    """Values on a 0.25 grid (exact in float32): ties between the inputs of max and min."""
    return torch.round(uniform(shape, lo, hi) * 4) / 4


def main():
    mf.write("maximum", {"a": quarters((3, 4, 5), -2, 2), "b": quarters((5,), -2, 2)}, {}, lambda a, b: torch.maximum(a, b))
    mf.write("minimum", {"a": quarters((3, 4, 5), -2, 2), "b": quarters((5,), -2, 2)}, {}, lambda a, b: torch.minimum(a, b))
    mf.write("pow", {"a": uniform((4, 6), 0.25, 3), "b": uniform((6,), -3, 3)}, {}, lambda a, b: torch.pow(a, b))
    sign = torch.where(uniform((4, 6)) < 0, -1.0, 1.0).to(torch.float64)
    a = sign * uniform((4, 6), 0.25, 2)
    e = torch.randint(-3, 5, (6,), generator=mf.gen).to(torch.float64)
    mf.write("pow_int", {"a": a}, {}, lambda a: torch.pow(a, e), extra=[("const:b", e)])
    mf.write("floor", {"x": uniform((4, 9), -4, 4)}, {}, lambda x: torch.floor(x))
    mf.write("ceil", {"x": uniform((4, 9), -4, 4)}, {}, lambda x: torch.ceil(x))
    mf.write("erf", {"x": uniform((4, 9), -3, 3)}, {}, lambda x: torch.erf(x))
    # comparisons give a float mask (clnet's boolean) and no gradient: each fixture is the mask
    # of constants a, b (quarters: ties for ==) times an input x, whose gradient is mask * R
    for name, op in (("less", torch.lt), ("greater", torch.gt), ("equal", torch.eq)):
        a, b = quarters((3, 4, 5), -1, 1), quarters((5,), -1, 1)
        mf.write(name, {"x": uniform((3, 4, 5))}, {}, lambda x, a=a, b=b, op=op: op(a, b).to(x.dtype) * x,
                 extra=[("const:a", a), ("const:b", b)])


if __name__ == "__main__":
    main()
