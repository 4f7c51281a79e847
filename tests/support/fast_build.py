"""The build environment of the tests that build anarchon's wheel (test_wheels, test_packaging).

What they check (platform tags, auditwheel, sdist → wheel, installs without
Rust, the extras) does not depend on how hard the compiler optimises, so they
build without optimisation or LTO and with parallel codegen instead of the
release profile's fat LTO and one codegen unit (minutes of CI time: three
cross builds and two sdist builds). The published wheels use the profile as it is.
"""

from __future__ import annotations

import os

FAST_PROFILE = {
    "CARGO_PROFILE_RELEASE_LTO": "off",
    "CARGO_PROFILE_RELEASE_CODEGEN_UNITS": "16",
    "CARGO_PROFILE_RELEASE_OPT_LEVEL": "0",
}


def build_env() -> dict[str, str]:
    """This process's environment with :data:`FAST_PROFILE` on top."""
    return {**os.environ, **FAST_PROFILE}
