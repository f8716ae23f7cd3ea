# Sourced by the test scripts: the suite's data files (testdata/ at the repository root) and the
# one rule for a missing one, the same as `opennrt::testdata` in Rust and testdata.py in Python.
#
#   testdata_file REL WHAT   prints the path of REL under testdata/ and returns 0 when it exists;
#                            otherwise says "skipped: WHAT: PATH is missing" and returns 1, or,
#                            under OPENNRT_TEST_STRICT=1 (set by ci/test.sh), fails the script.
testdata_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/testdata"
testdata_file() {
  local path="$testdata_root/$1"
  if [ -e "$path" ]; then
    printf '%s\n' "$path"
    return 0
  fi
  case "${OPENNRT_TEST_STRICT:-}" in
    1 | true | yes)
      echo "$2: $path is missing (OPENNRT_TEST_STRICT=1 makes missing test data an error)" >&2
      exit 1 ;;
  esac
  echo "skipped: $2: $path is missing" >&2
  return 1
}
