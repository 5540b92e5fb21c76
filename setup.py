"""The compiled loops (neardup/_kernels.c); everything else is in pyproject.toml.

Plain C over the buffer protocol: building needs a C compiler and Python's headers, not numpy's.
-ffp-contract=off keeps every similarity's floating point in the order the code writes it.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "neardup._kernels",
            sources=["neardup/_kernels.c"],
            extra_compile_args=["-O3", "-ffp-contract=off"],
        )
    ]
)
