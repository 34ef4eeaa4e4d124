"""Builds the spillway extension through CMake (see pyproject.toml).

The version is read from the top-level CMakeLists.txt project() call, the one
place it is written. SPILLWAY_BUILD_DIR=<dir> reuses an already configured
CMake build folder (CI, tests/install); otherwise a folder under build_temp is
configured with the tests off. CMAKE_ARGS adds arguments to the configure.
"""
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent


def version():
    text = (ROOT / "CMakeLists.txt").read_text()
    m = re.search(r"project\(\s*spillway\s+VERSION\s+([0-9][0-9.]*)", text)
    if not m:
        sys.exit("setup.py: no 'project(spillway VERSION x.y.z' in CMakeLists.txt")
    return m.group(1)


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build_dir = os.environ.get("SPILLWAY_BUILD_DIR")
        if build_dir:
            build_dir = Path(build_dir).resolve()
        else:
            build_dir = Path(self.build_temp).resolve() / "cmake"
            build_dir.mkdir(parents=True, exist_ok=True)
            args = [
                "cmake", "-S", str(ROOT), "-B", str(build_dir),
                "-DCMAKE_BUILD_TYPE=Release",
                "-DSPILLWAY_BUILD_TESTS=OFF",
                "-DSPILLWAY_BUILD_PYTHON=ON",
                f"-DPython3_EXECUTABLE={sys.executable}",
            ]
            if shutil.which("ninja"):
                args += ["-G", "Ninja"]
            args += shlex.split(os.environ.get("CMAKE_ARGS", ""))
            subprocess.check_call(args)
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 2))
        subprocess.check_call(["cmake", "--build", str(build_dir), "--target", "spillway_python", "-j", jobs])
        built = sorted((build_dir / "python" / "spillway").glob("_spillway*.so"))
        if not built:
            sys.exit(f"setup.py: CMake built no _spillway*.so under {build_dir}/python/spillway "
                     "(is pybind11 installed? Debian: python3-pybind11 python3-dev)")
        dest = Path(self.get_ext_fullpath(ext.name))
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(built[-1], dest)


setup(
    version=version(),
    ext_modules=[Extension("spillway._spillway", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
)
