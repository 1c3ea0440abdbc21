"""Padding with numbers: a batch padded to its own longest sequence compiles a graph per length.

When the dimension that varies between a site's graphs is not the batch (dim 0) but a later
one, with the batch size fixed, it is a sequence length: the loader pads each batch to its
longest sequence (transformers' ``DataCollatorWithPadding`` and a tokenizer's
``padding="longest"`` or ``padding=True`` do; so does ``pad_sequence``). The fix is to pad to
fixed sizes, and which sizes is a trade-off between graphs and wasted positions: this module
computes it from the lengths the run actually saw (one per step that ran the site's graph),
for padding to the longest, to multiples of N, and to k buckets.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# Multiples offered (those below the longest length seen).
MULTIPLES = (8, 16, 32, 64, 128)
# Bucket counts offered (those below the number of distinct lengths).
BUCKET_COUNTS = (2, 3, 4)


@dataclass(frozen=True)
class PaddingChoice:
    """One way to pad: its sizes, the graphs it compiles and the positions it adds."""

    label: str
    sizes: tuple[int, ...]
    graphs: int
    # positions added over what the run padded to (each batch's longest), as a share of those
    waste: float

    def record(self) -> dict[str, object]:
        return {
            "choice": self.label,
            "sizes": list(self.sizes),
            "graphs": self.graphs,
            "extra_padding": round(self.waste, 4),
        }


def _padded(lengths: list[int], sizes: tuple[int, ...]) -> int:
    """Positions over all batches when each batch is padded to the smallest size that fits."""
    return sum(min(s for s in sizes if s >= n) for n in lengths)


def _choice(label: str, lengths: list[int], sizes: tuple[int, ...]) -> PaddingChoice:
    used = tuple(sorted({min(s for s in sizes if s >= n) for n in lengths}))
    base = sum(lengths)
    waste = (_padded(lengths, sizes) - base) / base if base else 0.0
    return PaddingChoice(label, used, len(used), waste)


def _best_buckets(lengths: list[int], k: int) -> tuple[int, ...]:
    """The k bucket sizes (each a length seen; the largest is the longest) that pad the
    batches seen the least, by dynamic programming over the distinct lengths."""
    distinct = sorted(set(lengths))
    count = {n: lengths.count(n) for n in distinct}
    m = len(distinct)

    def cost(i: int, j: int) -> int:  # lengths distinct[i..j] padded to distinct[j]
        return sum(count[distinct[t]] * (distinct[j] - distinct[t]) for t in range(i, j + 1))

    # best[j][b]: least cost of padding distinct[0..j] with b buckets, the last at distinct[j]
    best: dict[tuple[int, int], tuple[int, tuple[int, ...]]] = {}
    for j in range(m):
        best[(j, 1)] = (cost(0, j), (distinct[j],))
        for b in range(2, k + 1):
            options = [
                (best[(i, b - 1)][0] + cost(i + 1, j), (*best[(i, b - 1)][1], distinct[j]))
                for i in range(j)
                if (i, b - 1) in best
            ]
            if options:
                best[(j, b)] = min(options)
    return best[(m - 1, min(k, m))][1]


def choices(lengths: list[int]) -> list[PaddingChoice]:
    """The trade-offs for the lengths seen: pad to the longest, to multiples, to k buckets."""
    if not lengths:
        return []
    longest = max(lengths)
    found = [_choice(f"pad every batch to {longest} (the longest seen)", lengths, (longest,))]
    distinct = len(set(lengths))
    for k in BUCKET_COUNTS:
        if k < distinct:
            sizes = _best_buckets(lengths, k)
            found.append(_choice(f"{k} buckets {', '.join(map(str, sizes))}", lengths, sizes))
    for multiple in MULTIPLES:
        if multiple < longest:
            top = math.ceil(longest / multiple) * multiple
            sizes = tuple(range(multiple, top + 1, multiple))
            found.append(_choice(f"multiples of {multiple}", lengths, sizes))
    return found


def advice(lengths: list[int], where: str | None, dim: int, multiple: int | None = None) -> str:
    """The fix text for a sequence length padded per batch, with the trade-offs. ``multiple``:
    the padding already rounds up to multiples of it (pad_to_multiple_of), whose sizes still
    follow the data."""
    distinct = sorted(set(lengths))
    head = (
        _rounded_head(distinct, len(lengths), where, dim, multiple)
        if multiple is not None
        else _longest_head(distinct, len(lengths), where, dim)
    )
    lines = [head]
    for choice in choices(lengths):
        lines.append(
            f"- {choice.label}: {choice.graphs} graph size(s) "
            f"({', '.join(map(str, choice.sizes))}), {choice.waste:.0%} extra padding"
        )
    return "\n".join(lines)


def _rounded_head(
    distinct: list[int], batches: int, where: str | None, dim: int, multiple: int
) -> str:
    return (
        f"Dimension {dim} is the sequence length: each batch is padded to its own longest "
        f"sequence rounded up to a multiple of {multiple} (pad_to_multiple_of={multiple})"
        + (f" at {where}" if where else "")
        + f". Those are not fixed buckets: the sizes follow the data ({len(distinct)} lengths "
        f"in {batches} batches: {', '.join(map(str, distinct))}), a new one whenever the data "
        "brings a longer batch, so their number grows with the data (up to the longest "
        "sequence allowed), each compiling new graphs. Pad to sizes fixed up front instead: "
        'one length (padding="max_length" with max_length=N, N the longest you keep), or a '
        "collate function that pads each batch to the smallest of a few bucket sizes chosen "
        "before training. drop_last does not help: no batch is short. From the lengths this "
        "run saw (extra padding is over what it padded to):"
    )


def _longest_head(distinct: list[int], batches: int, where: str | None, dim: int) -> str:
    return (
        f"Dimension {dim} is the sequence length: each batch is padded to its own longest "
        f'sequence (padding="longest", DataCollatorWithPadding\'s default, or padding=True)'
        + (f" at {where}" if where else "")
        + f", so each new length compiles new graphs ({len(distinct)} lengths in "
        f"{batches} batches: {', '.join(map(str, distinct))}). max_length alone does not "
        'fix it: with padding="longest" (or True) it only truncates, padding="longest" wins. '
        'Pad to fixed sizes instead: the tokenizer\'s padding="max_length" with max_length=N, '
        "the collator's pad_to_multiple_of=N, or a collate function that pads to the smallest "
        "of a few bucket sizes. drop_last does not "
        "help: no batch is short. From the lengths this run saw (extra padding is over what "
        "it padded to):"
    )
