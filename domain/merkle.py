"""A Merkle tree over a session's records, so one record's place and an old head's consistency
with a new one are proved with a handful of hashes instead of the whole session.

The tree is RFC 9162's (Certificate Transparency 2.0, section 2.1): a leaf hashes as
`sha256(0x00 || data)`, an inner node as `sha256(0x01 || left || right)` (the prefixes keep a leaf
from passing for a node), and a tree of `n` leaves splits at the largest power of two below `n`.
Its root is the one a Merkle mountain range gives when its peaks (the perfect subtrees, largest
first) are folded from the right, so `MerkleMountainRange` keeps a growing ledger's root with one
hash per set bit of its size, append-only; `MerkleTree` keeps every level of a session in hand to
give proofs. A session's leaves are its records' row hashes (32 bytes each), by position.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence

EMPTY_ROOT = hashlib.sha256(b"").digest()
"""The root of a tree without leaves (RFC 9162: the hash of the empty string)."""


def leaf_hash(data: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


class MerkleMountainRange:
    """The root of an append-only sequence of leaves, kept in O(log n) hashes (the peaks)."""

    def __init__(self) -> None:
        self.size = 0
        self._peaks: list[bytes] = []  # perfect subtrees, largest first, one per set bit of size

    def append(self, data: bytes) -> None:
        self.extend((data,))

    @classmethod
    def resumed(cls, size: int, peaks: Sequence[bytes]) -> MerkleMountainRange:
        """The range of `size` leaves whose `peaks` were kept (a digest keeps them): appending to it
        hashes only the new leaves. `ValueError` unless there is one peak per set bit of `size`."""
        if size < 0 or len(peaks) != size.bit_count():
            raise ValueError(f"{len(peaks)} peaks cannot be those of {size} leaves")
        mountains = cls()
        mountains.size = size
        mountains._peaks = list(peaks)
        return mountains

    @property
    def peaks(self) -> tuple[bytes, ...]:
        """The perfect subtrees' roots, largest first: all that appending needs of the leaves so far."""
        return tuple(self._peaks)

    def extend(self, leaves: Iterable[bytes]) -> MerkleMountainRange:
        """Append each leaf in turn, the hashes written out (`leaf_hash`, `node_hash`): a digest
        hashes every record of the ledger through here, `verify --since` every new one."""
        sha256, peaks, size = hashlib.sha256, self._peaks, self.size
        for data in leaves:
            peak = sha256(b"\x00" + data).digest()
            merges = size
            while merges & 1:  # each trailing one bit is a peak of the same height: merge with it
                peak = sha256(b"\x01" + peaks.pop() + peak).digest()
                merges >>= 1
            peaks.append(peak)
            size += 1
        self.size = size
        return self

    def root(self) -> bytes:
        if not self._peaks:
            return EMPTY_ROOT
        root = self._peaks[-1]
        for peak in reversed(self._peaks[:-1]):
            root = node_hash(peak, root)
        return root


class MerkleTree:
    """Every level of the tree over `leaves`: roots of any prefix, inclusion and consistency proofs
    (RFC 9162 2.1.3.1 and 2.1.4.1), each in O(log² n) hashes at most, none recomputed from leaves."""

    def __init__(self, leaves: Sequence[bytes]) -> None:
        level = [leaf_hash(data) for data in leaves]
        self.size = len(level)
        self._levels = [level]  # _levels[h][i]: the perfect subtree of leaves i*2^h .. (i+1)*2^h - 1
        while len(level) > 1:
            level = [node_hash(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
            self._levels.append(level)

    def root(self, size: int | None = None) -> bytes:
        """The root of the first `size` leaves (all of them by default)."""
        size = self.size if size is None else size
        self._check_size(size)
        return EMPTY_ROOT if size == 0 else self._hash(0, size)

    def inclusion_proof(self, index: int, size: int | None = None) -> list[bytes]:
        """The audit path of leaf `index` in the tree of the first `size` leaves."""
        size = self.size if size is None else size
        self._check_size(size)
        if not 0 <= index < size:
            raise ValueError(f"leaf {index} is outside a tree of {size}")
        path: list[bytes] = []
        start, end = 0, size
        while end - start > 1:
            k = _split(end - start)
            if index < start + k:
                path.append(self._hash(start + k, end))
                end = start + k
            else:
                path.append(self._hash(start, start + k))
                start += k
        return path[::-1]

    def consistency_proof(self, old_size: int, size: int | None = None) -> list[bytes]:
        """The proof that the tree of `old_size` leaves is a prefix of the tree of `size`."""
        size = self.size if size is None else size
        self._check_size(size)
        if not 0 < old_size <= size:
            raise ValueError(f"no consistency proof from {old_size} leaves to {size}")
        proof: list[bytes] = []
        start, end, whole = 0, size, True
        while old_size - start != end - start:
            k = _split(end - start)
            if old_size - start <= k:
                proof.append(self._hash(start + k, end))
                end = start + k
            else:
                proof.append(self._hash(start, start + k))
                start += k
                whole = False
        if not whole:
            proof.append(self._hash(start, end))
        return proof[::-1]

    def _hash(self, start: int, end: int) -> bytes:
        """The tree hash of leaves start..end-1, where `start` is aligned as the tree's recursion
        leaves it: a perfect subtree is read off its level, the rest is split once more."""
        width = end - start
        if width & (width - 1) == 0:
            height = width.bit_length() - 1
            return self._levels[height][start >> height]
        k = _split(width)
        return node_hash(self._hash(start, start + k), self._hash(start + k, end))

    def _check_size(self, size: int) -> None:
        if not 0 <= size <= self.size:
            raise ValueError(f"a tree of {size} leaves is not a prefix of {self.size}")


def _split(width: int) -> int:
    """The largest power of two below `width` (> 1): where RFC 9162 splits a tree."""
    return 1 << ((width - 1).bit_length() - 1)


def verify_inclusion(data: bytes, index: int, size: int, proof: Sequence[bytes], root: bytes) -> bool:
    """Whether `data` is leaf `index` of the tree of `size` leaves whose root is `root` (RFC 9162
    2.1.3.2)."""
    if not 0 <= index < size:
        return False
    fn, sn = index, size - 1
    result = leaf_hash(data)
    for sibling in proof:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            result = node_hash(sibling, result)
            if not fn & 1:
                while fn and not fn & 1:
                    fn >>= 1
                    sn >>= 1
        else:
            result = node_hash(result, sibling)
        fn >>= 1
        sn >>= 1
    return sn == 0 and result == root


def verify_consistency(
    old_size: int, size: int, old_root: bytes, root: bytes, proof: Sequence[bytes]
) -> bool:
    """Whether the tree of `old_size` leaves with `old_root` is a prefix of the tree of `size`
    leaves with `root` (RFC 9162 2.1.4.2)."""
    if not 0 < old_size <= size:
        return False
    if old_size == size:
        return not proof and old_root == root
    path = list(proof)
    if old_size & (old_size - 1) == 0:
        path.insert(0, old_root)
    if not path:
        return False
    fn, sn = old_size - 1, size - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            if not fn & 1:
                while fn and not fn & 1:
                    fn >>= 1
                    sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1
        sn >>= 1
    return sn == 0 and fr == old_root and sr == root
