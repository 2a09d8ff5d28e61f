"""The vLLM releases the conformance goldens are recorded from (no vLLM import here).

Each release's goldens live in a subfolder named after the release ("0.26", "0.33") of
tests/data/vllm_goldens and tests/data/vllm_plan_goldens; every file also carries the exact
version string in "vllm_version".
"""

from __future__ import annotations

# Exact wheel version -> release folder.
SUPPORTED = {
    "0.26.0": "0.26",
    "0.33.0": "0.33",
}


def release_of(version: str) -> str:
    """The release folder of an installed vLLM version; exits with a clear message otherwise."""
    try:
        return SUPPORTED[version]
    except KeyError:
        known = ", ".join(SUPPORTED)
        raise SystemExit(
            f"vLLM {version} found; the conformance goldens are defined only for vLLM {known}. "
            f"Install one of those in the venv (pip install vllm==0.33.0, for example).")


def installed_release() -> tuple[str, str]:
    """(exact version, release folder) of the vLLM importable here."""
    import vllm

    return vllm.__version__, release_of(vllm.__version__)
