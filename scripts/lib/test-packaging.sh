#!/usr/bin/env bash
# codebox as a new user meets it, from outside the repository and with a clean environment:
#   1. cmake --install to a temporary prefix: no path of the build or source tree in any
#      installed file, and examples/cpp built against it (find_package) runs a box;
#   2. examples/cpp with codebox as a subdirectory (add_subdirectory + codebox_bundle);
#   3. pip install ./python into a fresh venv with PIP_NO_INDEX=1, and a box from that venv;
#   4. the .deb from cpack installed with apt-get: codebox doctor and codebox run from
#      /usr/bin/codebox; then the package is purged again.
# Needs root (the jail) and the built `python` image. scripts/test runs it after the release
# tests. Usage: sudo scripts/lib/test-packaging.sh
source "$(dirname "$0")/common.sh"
need_root "scripts/lib/test-packaging.sh"

PKG_BUILD="$ROOT/build/package"        # the `package` preset; its prefix is set per step
SUBDIR_BUILD="$ROOT/build/package-subdir"
CLEAN_ENV=(env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin)
tmp=$(mktemp -d /tmp/codebox-packaging.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
jobs=$(nproc)

failed=()
check() {  # check LABEL CMD...: runs one check, remembers a failure, keeps going
  local label=$1; shift
  step "packaging: $label"
  if ! "$@"; then failed+=("$label"); note "FAILED: $label"; fi
}

# Configures build/package for install prefix $1 (compiled into the library as its install
# dirs) and builds what is installed.
build_for_prefix() {
  (cd "$ROOT" && cmake --preset package -DCMAKE_INSTALL_PREFIX="$1" >/dev/null) &&
    cmake --build "$PKG_BUILD" -j "$jobs" | { grep -vE '^\[[0-9]+/[0-9]+\] ' || true; }
}

# No file under $1 may name the source or build tree (it would not be there for a user).
no_build_tree_paths() {
  local hits
  hits=$(grep -rlF -- "$ROOT" "$1" || true)
  if [[ -n $hits ]]; then
    note "files naming $ROOT:"; printf '      %s\n' $hits
    return 1
  fi
  note "no file under $1 names $ROOT"
}

# Runs a program with a clean environment from outside the repository and checks that the
# box printed 2 (examples/cpp prints "result: 2").
runs_a_box() {
  local out
  out=$(cd "$tmp" && "${CLEAN_ENV[@]}" "$@" 2>&1) || { note "$out"; return 1; }
  note "${out//$'\n'/ | }"
  grep -qE '(^|: )2$' <<<"$out"
}

# Built for /usr (as the .deb below is) and installed elsewhere with --prefix: the CLI and a
# find_package consumer find the helpers and recipes where the package is, not where it was
# configured to be.
installed_prefix() {
  local prefix="$tmp/prefix"
  if [[ -e /usr/libexec/codebox ]]; then
    note "/usr/libexec/codebox exists (an installed codebox): it would hide a relocation bug"
    return 1
  fi
  build_for_prefix /usr && cmake --install "$PKG_BUILD" --prefix "$prefix" >/dev/null || return 1
  # For /usr, GNUInstallDirs picks Debian's multiarch lib/x86_64-linux-gnu.
  local libdir
  libdir=$(sed -n 's/^CMAKE_INSTALL_LIBDIR:PATH=//p' "$PKG_BUILD/CMakeCache.txt")
  for f in bin/codebox libexec/codebox/codebox-agent libexec/codebox/codebox-jail \
           libexec/codebox/codebox-vm-keeper share/codebox/images/python/recipe \
           include/codebox/box.h "$libdir/cmake/codebox/codebox-config.cmake" \
           "$libdir/cmake/codebox/codebox-config-version.cmake" "$libdir/pkgconfig/codebox.pc"; do
    [[ -e $prefix/$f ]] || { note "not installed: $prefix/$f"; return 1; }
  done
  no_build_tree_paths "$prefix" || return 1
  runs_a_box "$prefix/bin/codebox" run "print(1+1)" || return 1
  cmake -S "$ROOT/examples/cpp" -B "$tmp/example" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" \
    >/dev/null && cmake --build "$tmp/example" >/dev/null || return 1
  runs_a_box "$tmp/example/hello_box" || return 1
  # pkg-config gives a working compile and link line too. Its program knows only the install
  # dirs compiled in (/usr here), so it is told where this prefix keeps the helpers.
  local flags
  flags=$(PKG_CONFIG_PATH="$prefix/$libdir/pkgconfig" pkg-config --cflags --libs codebox) &&
    g++ -std=c++20 -o "$tmp/hello_pc" "$ROOT/examples/cpp/main.cc" $flags &&
    runs_a_box env CODEBOX_LIBEXEC="$prefix/libexec/codebox" \
      CODEBOX_IMAGES="$prefix/share/codebox/images" "$tmp/hello_pc"
}

subdirectory() {
  cmake -S "$ROOT/examples/cpp" -B "$SUBDIR_BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_EXPORT_COMPILE_COMMANDS=ON -DCODEBOX_SOURCE_DIR="$ROOT" >/dev/null &&
    cmake --build "$SUBDIR_BUILD" -j "$jobs" | { grep -vE '^(\[[0-9]+/[0-9]+\] |ninja: no work)' || true; }
  [[ ${PIPESTATUS[0]} -eq 0 ]] || return 1
  # The consumer sees include/ and not src/ (codebox's private headers).
  local includes
  includes=$(python3 -c 'import json,sys
print(next(c["command"] for c in json.load(open(sys.argv[1])) if c["file"].endswith("examples/cpp/main.cc")))' \
    "$SUBDIR_BUILD/compile_commands.json") || return 1
  if [[ $includes == *"-I$ROOT/src"* || $includes != *"-I$ROOT/include"* ]]; then
    note "hello_box compiles with: $includes (wanted $ROOT/include and not $ROOT/src)"
    return 1
  fi
  note "hello_box's include path: $ROOT/include only"
  runs_a_box "$SUBDIR_BUILD/hello_box"
}

pip_venv() {
  /usr/bin/python3 -m venv "$tmp/venv" || return 1
  PIP_NO_INDEX=1 "$tmp/venv/bin/pip" install -q "$ROOT/python" || return 1
  # What the wheel put there (pip's own direct_url.json records the source dir, as it should).
  no_build_tree_paths "$("$tmp/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])')/codebox" ||
    return 1
  runs_a_box "$tmp/venv/bin/python" -c '
import codebox
with codebox.SyncCodeBox() as box:
    r = box.exec("python3", "-c", "print(1+1)")
    print("driver:", r.driver, "from", codebox.__file__)
    print(r.stdout.strip())'
}

debian_package() {
  if dpkg-query -W -f='${Status}' codebox 2>/dev/null | grep -q 'install ok installed'; then
    note "a codebox package is already installed; not replacing it (skipped)"
    return 0
  fi
  build_for_prefix /usr || return 1
  rm -f "$PKG_BUILD"/codebox_*.deb
  (cd "$PKG_BUILD" && cpack -G DEB >/dev/null) || return 1
  local deb
  deb=$(ls "$PKG_BUILD"/codebox_*.deb) || return 1
  note "$(basename "$deb"): $(dpkg-deb -f "$deb" Depends)"
  dpkg-deb -x "$deb" "$tmp/deb" && no_build_tree_paths "$tmp/deb" || return 1
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$deb" \
    >/dev/null || return 1
  local ok=0
  (cd "$tmp" && "${CLEAN_ENV[@]}" /usr/bin/codebox doctor >"$tmp/doctor.txt" 2>&1) ||
    { cat "$tmp/doctor.txt"; ok=1; }
  [[ $ok -eq 0 ]] && note "codebox doctor: $(grep -m1 'auto picks' "$tmp/doctor.txt")"
  runs_a_box /usr/bin/codebox run "print(1+1)" || ok=1
  DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq codebox >/dev/null || ok=1
  return $ok
}

check "cmake --install + find_package consumer" installed_prefix
check "add_subdirectory consumer" subdirectory
check "pip install ./python in a fresh venv" pip_venv
check ".deb with apt-get" debian_package

if [[ ${#failed[@]} -gt 0 ]]; then
  note "packaging FAILED: ${failed[*]}"
  exit 1
fi
note "packaging: all passed"
