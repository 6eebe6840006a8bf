"""The Merkle tree over a session's records: roots, inclusion and consistency proofs (RFC 9162)."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sessionledger.domain.merkle import (
    EMPTY_ROOT,
    MerkleMountainRange,
    MerkleTree,
    leaf_hash,
    node_hash,
    verify_consistency,
    verify_inclusion,
)


def leaves(n: int) -> list[bytes]:
    return [hashlib.sha256(str(i).encode()).digest() for i in range(n)]


def reference_root(data: list[bytes]) -> bytes:
    """RFC 9162's MTH written as the recursion it is defined by."""
    if not data:
        return EMPTY_ROOT
    if len(data) == 1:
        return leaf_hash(data[0])
    k = 1 << ((len(data) - 1).bit_length() - 1)
    return node_hash(reference_root(data[:k]), reference_root(data[k:]))


def flipped(proof: list[bytes], which: int, bit: int) -> list[bytes]:
    """The proof with one bit of one byte flipped (`which` counts bytes across the hashes)."""
    joined = bytearray(b"".join(proof))
    joined[which % len(joined)] ^= 1 << bit
    return [bytes(joined[i : i + 32]) for i in range(0, len(joined), 32)]


sizes = st.integers(min_value=1, max_value=300)


def test_known_roots() -> None:
    assert MerkleTree([]).root() == EMPTY_ROOT == MerkleMountainRange().root()
    assert MerkleTree([b""]).root() == hashlib.sha256(b"\x00").digest()


@given(sizes)
def test_every_root_matches_the_definition(n: int) -> None:
    data = leaves(n)
    tree = MerkleTree(data)
    mountains = MerkleMountainRange()
    for size in range(1, n + 1):
        mountains.append(data[size - 1])
        assert mountains.size == size
        assert tree.root(size) == mountains.root() == reference_root(data[:size])


@settings(max_examples=60)
@given(sizes, st.data())
def test_every_leaf_has_an_inclusion_proof_that_checks(n: int, draw: st.DataObject) -> None:
    data = leaves(n)
    tree = MerkleTree(data)
    size = draw.draw(st.integers(min_value=1, max_value=n))
    root = tree.root(size)
    for index in range(size):
        proof = tree.inclusion_proof(index, size)
        assert len(proof) <= size.bit_length()
        assert verify_inclusion(data[index], index, size, proof, root)
        assert not verify_inclusion(data[index], (index + 1) % size, size, proof, root) or size == 1
        if size > 1:
            assert not verify_inclusion(data[index], index, size, proof, tree.root(size - 1))


@given(sizes, st.data())
def test_no_single_flipped_byte_of_an_inclusion_proof_checks(n: int, draw: st.DataObject) -> None:
    data = leaves(n)
    tree = MerkleTree(data)
    index = draw.draw(st.integers(min_value=0, max_value=n - 1))
    proof = tree.inclusion_proof(index)
    root = tree.root()
    if proof:
        which = draw.draw(st.integers(min_value=0, max_value=32 * len(proof) - 1))
        bit = draw.draw(st.integers(min_value=0, max_value=7))
        assert not verify_inclusion(data[index], index, n, flipped(proof, which, bit), root)
    leaf = bytearray(data[index])
    leaf[draw.draw(st.integers(min_value=0, max_value=31))] ^= 1
    assert not verify_inclusion(bytes(leaf), index, n, proof, root)


@settings(max_examples=60)
@given(sizes, st.data())
def test_every_prefix_has_a_consistency_proof_that_checks(n: int, draw: st.DataObject) -> None:
    data = leaves(n)
    tree = MerkleTree(data)
    root = tree.root()
    for old in range(1, n + 1):
        proof = tree.consistency_proof(old)
        assert len(proof) <= 2 * n.bit_length()
        assert verify_consistency(old, n, tree.root(old), root, proof)
        if proof:
            which = draw.draw(st.integers(min_value=0, max_value=32 * len(proof) - 1))
            assert not verify_consistency(old, n, tree.root(old), root, flipped(proof, which, 0))
    rewritten = MerkleTree([b"x" * 32, *data[1:]])
    if n > 1:
        old = draw.draw(st.integers(min_value=1, max_value=n - 1))
        assert not verify_consistency(old, n, rewritten.root(old), root, tree.consistency_proof(old))


def test_out_of_range_requests_are_refused() -> None:
    tree = MerkleTree(leaves(5))
    with pytest.raises(ValueError):
        tree.inclusion_proof(5)
    with pytest.raises(ValueError):
        tree.root(6)
    with pytest.raises(ValueError):
        tree.consistency_proof(0)
    assert not verify_inclusion(leaves(1)[0], 0, 0, [], EMPTY_ROOT)
