"""Build hook for zk2kraft's optional native record packer; all metadata lives in pyproject.toml.

``optional=True``: without a C compiler the install still succeeds and the Python encoders do the work
(same bytes, slower; `tests/test_speedups.py` says so unless ZK2KRAFT_PURE_PYTHON=1).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "migrator.kraft._speedups",
            ["migrator/kraft/_speedups.c"],
            optional=True,
            extra_compile_args=["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter", "-Werror=implicit"],
        )
    ]
)
