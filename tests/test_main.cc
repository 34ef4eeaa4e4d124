// The doctest main shared by every test binary, plus the skip listener: a
// test case that cannot run here calls SPILLWAY_SKIP_TEST (tests/test_util.h),
// and when every test case that ran was skipped the binary exits with 77,
// which CTest reports as a skip (SKIP_RETURN_CODE), never as a pass. CTest
// runs each test case on its own, so each skipped case shows as skipped.
// A run whose filters match no test case exits 1: CTest registers a case
// under its name cut at the first ';' (a list separator to CMake), and such
// a run used to pass with nothing run.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "test_util.h"

namespace {

int g_started = 0;
int g_skipped = 0;
bool g_all_skipped = false;
bool g_none_matched = false;

void ExitSkippedIfAllSkipped() {
  if (g_none_matched) {
    std::cout << "no test case matches the filters (is a ';' in the test case's name? CTest cuts the name there);"
                 " exit code 1" << std::endl;
    std::fflush(nullptr);
    std::_Exit(1);
  }
  if (!g_all_skipped) return;
  std::cout << "all " << g_skipped << " test case(s) skipped: " << spillway::testing::LastSkipReason()
            << "; exit code 77 (skip)" << std::endl;
  std::fflush(nullptr);
  std::_Exit(77);
}

struct SkipListener : doctest::IReporter {
  explicit SkipListener(const doctest::ContextOptions&) { std::atexit(ExitSkippedIfAllSkipped); }
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats& stats) override {
    g_all_skipped = g_started > 0 && g_started == g_skipped && stats.numAssertsFailed == 0;
    g_none_matched = stats.numTestCases > 0 && stats.numTestCasesPassingFilters == 0;
  }
  void test_case_start(const doctest::TestCaseData&) override {
    ++g_started;
    spillway::testing::CurrentTestSkipped() = false;
  }
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats&) override {
    if (spillway::testing::CurrentTestSkipped()) ++g_skipped;
  }
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override {}
};

}  // namespace

REGISTER_LISTENER("spillway_skip", 1, SkipListener);
