"""Runs one pytest file for CTest, with visible skips.

    run_pytest.py BUILD_PYTHON_DIR TEST_FILE [pytest args...]

BUILD_PYTHON_DIR (build/python) is where CMake assembles the `spillway`
package; it goes first on sys.path and on PYTHONPATH (Dask worker processes
import spillway too). Exits 77 (CTest SKIP_RETURN_CODE) with the reason on
stdout when pytest or the built module is missing, or when every test in the
file skipped (no GPU, no CuPy); otherwise pytest's exit status.
"""
import os
import sys

SKIP = 77


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    build_dir, test_file, extra = os.path.abspath(sys.argv[1]), sys.argv[2], sys.argv[3:]
    sys.path.insert(0, build_dir)
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (build_dir, os.environ.get("PYTHONPATH")) if p)
    try:
        import pytest
    except ImportError:
        print(f"SKIP: pytest is not installed for {sys.executable} (Debian: apt-get install python3-pytest)")
        return SKIP
    try:
        import spillway  # noqa: F401
    except ImportError as e:
        print(f"SKIP: the spillway module is not built in {build_dir} ({e}); build the target spillway_python "
              f"(needs python3-dev and python3-pybind11)")
        return SKIP

    class Outcomes:
        def __init__(self):
            self.passed = self.skipped = self.failed = 0  # test outcomes and module skips

        def pytest_collectreport(self, report):  # a module-level skip
            if report.skipped:
                self.skipped += 1

        def pytest_runtest_logreport(self, report):
            if report.when == "call" and report.passed:
                self.passed += 1
            elif report.skipped:
                self.skipped += 1
            elif report.failed:
                self.failed += 1

    outcomes = Outcomes()
    rc = pytest.main([test_file, "-v", "-rs", "-p", "no:cacheprovider", *extra], plugins=[outcomes])
    # 5: nothing collected (every module skipped at import).
    if rc in (0, 5) and outcomes.passed == 0 and outcomes.failed == 0 and outcomes.skipped > 0:
        print(f"SKIP: everything in {os.path.basename(test_file)} skipped ({outcomes.skipped}; reasons above)")
        return SKIP
    return int(rc)


if __name__ == "__main__":
    sys.exit(main())
