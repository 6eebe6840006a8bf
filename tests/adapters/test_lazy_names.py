"""The packages whose names are imported on first use: found, kept, listed, and nothing else."""

from __future__ import annotations

import subprocess
import sys

import pytest


def test_a_name_is_imported_on_first_use_and_kept_in_its_package():
    code = (
        "import sys, sessionledger.infrastructure as infra\n"
        "assert 'sessionledger.infrastructure.settings' not in sys.modules\n"
        "settings = infra.Settings\n"
        "assert 'sessionledger.infrastructure.settings' in sys.modules\n"
        "assert vars(infra)['Settings'] is settings  # kept: the next lookup is a plain read\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize(
    "package",
    [
        "sessionledger",
        "sessionledger.domain",
        "sessionledger.infrastructure",
        "sessionledger.infrastructure.adk",
        "sessionledger.infrastructure.vectors",
    ],
)
def test_every_listed_name_resolves_and_an_unknown_one_is_an_attribute_error(package):
    module = __import__(package, fromlist=["__all__"])
    assert dir(module) == sorted(module.__all__)
    for name in module.__all__:
        assert getattr(module, name) is not None, name
    with pytest.raises(AttributeError, match=f"module '{package}' has no attribute 'nothing_here'"):
        module.nothing_here  # noqa: B018
