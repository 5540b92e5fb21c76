"""Where numba keeps the compiled kernels: beside the modules when that folder is writable, else
in the user's cache folder. A user with neither (a service account without a home, with neardup
installed read-only) would get an import error; such a user gets a folder under the temporary
directory instead. This runs before numba is first imported."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def _writable(folder: Path) -> bool:
    """Whether ``folder`` can be written, or created where it does not exist yet."""
    while not os.path.exists(folder):  # False too where it may not even be looked at
        if folder.parent == folder:
            return False
        folder = folder.parent
    return os.access(folder, os.W_OK)


if "NUMBA_CACHE_DIR" not in os.environ and not (
    _writable(Path(__file__).parent / "__pycache__")
    or _writable(Path(os.path.expanduser("~")) / ".cache")
):
    os.environ["NUMBA_CACHE_DIR"] = os.path.join(
        tempfile.gettempdir(), f"neardup-numba-{os.getuid()}"
    )
