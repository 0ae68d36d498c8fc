"""conftest.pairwise_cover, which picks the combinations of a `pytest.mark.pairwise` test that the
host devices run: every pair of values of two parameters appears in it, and it is smaller than
the product whenever there are three parameters or more."""

import itertools

import pytest

from conftest import pairwise_cover


@pytest.mark.parametrize("sizes", [(3, 2, 2), (2, 2, 2), (3, 3, 3, 2), (4, 3), (5,), (2, 2, 2, 2, 2)])
def test_every_pair_of_values_is_covered(sizes):
    axes = [list(range(n)) for n in sizes]
    chosen = pairwise_cover(list(itertools.product(*axes)))
    for i, j in itertools.combinations(range(len(sizes)), 2):
        for a, b in itertools.product(range(sizes[i]), range(sizes[j])):
            assert any(c[i] == a and c[j] == b for c in chosen), (sizes, i, j, a, b, chosen)
    for i, n in enumerate(sizes):  # one axis alone: every value
        assert {c[i] for c in chosen} == set(range(n))
    product = len(list(itertools.product(*axes)))
    if len(sizes) >= 3:
        assert len(chosen) < product, (sizes, len(chosen), product)
    assert pairwise_cover(list(itertools.product(*axes))) == chosen  # the same set every time


def test_only_combinations_that_exist_are_chosen():
    # Parameters given together (bits, n) = (4, 16) or (8, 8): their pairs are the existing ones.
    combos = [(kernel, bits, n, half) for kernel in "abc" for bits, n in ((4, 16), (8, 8))
              for half in (False, True)]
    chosen = pairwise_cover(combos)
    assert chosen <= set(combos) and len(chosen) < len(combos)
    for c in combos:
        for i, j in itertools.combinations(range(4), 2):
            assert any(d[i] == c[i] and d[j] == c[j] for d in chosen)


def test_three_axes_of_the_attention_tests_halve():
    # The set for dtype x causal x head_dim (3 x 2 x 2) is 6 of the 12 cells.
    axes = [["f32", "f16", "bf16"], [False, True], [64, 128]]
    assert len(pairwise_cover(list(itertools.product(*axes)))) == 6


def test_a_marker_naming_no_parameter_is_a_usage_error(pytester):
    pytester.makeconftest(open(__file__.replace("test_pairwise_cover.py", "conftest.py")).read())
    pytester.makepyfile(test_x="""
import pytest
@pytest.mark.pairwise("dtype", "nope")
@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_y(dtype):
    pass
""")
    r = pytester.runpytest("-p", "no:cacheprovider")
    assert "pytest.mark.pairwise names parameters of the test (dtype), got ['dtype', 'nope']" \
        in r.stdout.str() + r.stderr.str()
