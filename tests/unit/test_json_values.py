"""What the read path's JSON parser does with integers, pinned: stored values must come back exact.

Payloads are written by the stdlib encoder and read by orjson (infrastructure/ledger/schema.py).
orjson reads an integer beyond 64 bits as a float, so the domain refuses those on the way in
(`domain.codec.ensure_json`). If an orjson upgrade changes either test, revisit that rule.
"""

from __future__ import annotations

import orjson
import pytest
from sessionledger.domain.codec import INT64, ensure_json
from sessionledger.domain.hashing import canonical


@pytest.mark.parametrize("number", [INT64[0], -1, 0, 2**53 + 1, INT64[-1]])
def test_orjson_reads_every_integer_a_value_may_hold_exactly(number):
    document = canonical({"n": number, "in": [number, {"deep": number}]})
    ensure_json(orjson.loads(document), "state")
    assert orjson.loads(document) == {"n": number, "in": [number, {"deep": number}]}
    assert type(orjson.loads(document)["n"]) is int


@pytest.mark.parametrize("number", [INT64[0] - 1, 2**64, 10**30, -(10**30)])
def test_orjson_reads_an_integer_beyond_64_bits_as_a_float_so_writes_refuse_it(number):
    read = orjson.loads(canonical({"n": number}))["n"]
    assert type(read) is float and read == float(number)  # precision lost, silently
    with pytest.raises(ValueError, match=r"\['n'\] is -?\d+, beyond 64 bits"):
        ensure_json({"n": number}, "state")
