"""Packaging hook, nothing else (the configuration is in pyproject.toml).

The runtime-verification fixtures live once, at the repository's fixtures/,
and ship inside the wheel as the package `torchlint.verify.fixtures`
(pyproject.toml maps the directory with `package-dir` and lists its files in
`package-data`). `packages.find` cannot add a package that lives outside
`torchlint/`, so build_py adds it here."""

from setuptools import setup
from setuptools.command.build_py import build_py

FIXTURES_PACKAGE = "torchlint.verify.fixtures"


class BuildPyWithFixtures(build_py):
    def finalize_options(self) -> None:
        super().finalize_options()
        if FIXTURES_PACKAGE not in self.packages:
            self.packages.append(FIXTURES_PACKAGE)
        self.package_dir[FIXTURES_PACKAGE] = "fixtures"


setup(cmdclass={"build_py": BuildPyWithFixtures})
