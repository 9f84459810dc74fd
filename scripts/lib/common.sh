# Shared by scripts/setup and scripts/test: logging, step times and the package lists.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD_DIR="$ROOT/build/release"
CODEBOX="$BUILD_DIR/bin/codebox"

# The Debian packages that building and running codebox needs: what scripts/setup installs.
BUILD_PACKAGES=(
  build-essential cmake ninja-build pkg-config git ca-certificates
  libgtest-dev libgmock-dev nlohmann-json3-dev libseccomp-dev libcurl4-openssl-dev
  libssl-dev                            # a box's secrets: the egress proxy's TLS (OpenSSL 3)
  pybind11-dev python3-dev              # the Python module
  debootstrap                           # image builder
  erofs-utils qemu-system-x86 cpio kmod # vm driver
  ccache                                # the release, package, sanitizer and wheel builds share objects
  libedit-dev                           # codebox repl: line editing and history (BSD licence)
  libboost-dev                          # codebox serve: Boost.Beast/Asio HTTP (header-only)
  libarchive-dev                        # codebox serve: directories as tar (files API)
  zlib1g-dev                            # codebox serve: E2B's gzip uploads
  skopeo                                # codebox image pull/import: registries, archives, digests
)
# What only the tests and benchmarks use: scripts/test installs these too (scripts/setup
# --for-tests without running anything).
TEST_PACKAGES=(
  python3-pytest
  python3-venv                          # scripts/lib/test-packaging.sh: pip install into a venv
  clang libclang-rt-14-dev              # libFuzzer for the fuzz targets
  bubblewrap hyperfine                  # benchmark baselines
  tmux                                  # tests/cli: codebox repl driven in a real terminal
  python3-ipython                       # bench_kernel: the host baselines (import IPython, run_cell)
  iproute2 openssl python3-pip          # tests/net: namespaces, the test CA, the index checked with pip
  chromium chromium-driver python3-selenium  # tests/web: the playground in a real browser
  docker-registry busybox-static        # tests/oci: a loopback registry, a libc-free image
  yamllint python3-kubernetes           # tests/deploy: the Kubernetes manifests, offline
)
# tests/deploy also renders deploy/kubernetes with `kubectl kustomize`. A machine that already
# has a kubectl (the Kubernetes project's own package, say) keeps it: Debian's
# kubernetes-client would conflict with it over /usr/bin/kubectl.
if ! command -v kubectl >/dev/null 2>&1; then
  TEST_PACKAGES+=(kubernetes-client)
fi
# tests/mcp drives the MCP server with the official TypeScript SDK, which needs Node.js and npm.
# A machine that already has a Node.js with npm (NodeSource's, say) keeps it: Debian's npm
# package would conflict with it.
if ! command -v npm >/dev/null 2>&1; then
  TEST_PACKAGES+=(nodejs npm)
fi

# The same sources are compiled for several builds (release, package, the add_subdirectory
# consumer, the wheel); ccache makes the repeats cheap. CMake reads this variable at configure.
# Called again by build_preset: on a fresh machine ccache arrives with install_packages.
# Paths relative to the checkout (CCACHE_BASEDIR, and no working directory in the hash), so that
# a fresh clone elsewhere (CI's) finds the objects an earlier build of the same sources made.
use_ccache() {
  if command -v ccache >/dev/null 2>&1; then
    export CMAKE_CXX_COMPILER_LAUNCHER=ccache
    export CCACHE_BASEDIR="$ROOT" CCACHE_NOHASHDIR=1
  fi
}
use_ccache

# step NAME starts a step (and ends the one before); step_times prints how long each took.
STEP_NAMES=()
STEP_STARTS=()
step() {
  STEP_NAMES+=("$*")
  STEP_STARTS+=("$SECONDS")
  printf '\n==> %s\n' "$*"
}
step_times() {  # step_times TITLE: a table of the steps so far, the last one ending now
  printf '\n==> %s\n' "$1"
  local i end took
  for i in "${!STEP_NAMES[@]}"; do
    end=${STEP_STARTS[i + 1]:-$SECONDS}
    took=$((end - STEP_STARTS[i]))
    printf '    %-64s %4d:%02d\n' "${STEP_NAMES[$i]}" $((took / 60)) $((took % 60))
  done
  took=$((SECONDS - ${STEP_STARTS[0]:-$SECONDS}))
  printf '    %-64s %4d:%02d\n' "total" $((took / 60)) $((took % 60))
}
note() { printf '    %s\n' "$*"; }

need_root() {
  if [[ $(id -u) -ne 0 ]]; then
    echo "codebox: $1 needs root (apt-get, debootstrap); run it with sudo" >&2
    exit 1
  fi
}

install_packages() {  # install_packages LABEL PACKAGE...: the missing ones, from apt
  local label=$1; shift
  step "Debian packages ($label)"
  local missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  if [[ ${#missing[@]} -eq 0 ]]; then
    note "all $# present"
    return
  fi
  note "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# The npm packages the tests use (tests/mcp: the MCP SDK; tests/e2b: E2B's SDKs; js: the Node
# package's TypeScript and the openai package of its example test), versions pinned by each
# lock file, from the npm registry npm is configured with; again only when a lock file changed.
npm_ci() {  # npm_ci AREA: AREA's npm packages, unless its lock file has not changed since
  local dir="$ROOT/$1"
  step "npm packages ($1)"
  if [[ -f "$dir/node_modules/.package-lock.json" && \
        "$dir/node_modules/.package-lock.json" -nt "$dir/package-lock.json" ]]; then
    note "up to date"
    return
  fi
  npm ci --prefix "$dir" --no-audit --no-fund --loglevel=error >/dev/null
  note "installed $(ls "$dir/node_modules" | wc -l) packages"
}

install_node_packages() {
  local area
  for area in tests/mcp tests/e2b js; do npm_ci "$area"; done
  # E2B's SDKs need Node.js 20.18 or newer (Debian 12's own is 18): say so, and the E2B test
  # skips naming it.
  local version
  version=$(node -p 'process.versions.node' 2>/dev/null || echo none)
  if ! node -e 'const [a,b]=process.versions.node.split(".").map(Number);process.exit(a>20||(a==20&&b>=18)?0:1)' 2>/dev/null; then
    note "Node.js $version is older than 20.18, which E2B's SDKs need: tests/e2b will skip." \
         "Install Node.js 20.18 or newer (e.g. from nodejs.org) to run it."
  fi
}

# The Node package (js/: TypeScript, its compiler from npm) built into js/dist, where a Node.js
# of 20.4 or newer and npm are at hand; otherwise a note, and nothing else depends on it.
build_node_package() {
  if ! node -e 'const [a,b]=process.versions.node.split(".").map(Number);process.exit(a>20||(a==20&&b>=4)?0:1)' 2>/dev/null || \
     ! command -v npm >/dev/null; then
    step "node package (js/)"
    note "skipped: it needs Node.js 20.4 or newer and npm ($(node --version 2>/dev/null || echo 'no node'))"
    return
  fi
  npm_ci js
  step "node package (js/)"
  npm --prefix "$ROOT/js" run --silent build >/dev/null
  note "built js/dist: npm install $ROOT/js in a project (docs/node.md)"
}

build_preset() {  # build_preset NAME [targets...]
  local preset=$1; shift
  step "build ($preset)"
  use_ccache
  # Configured every time (a few seconds): a preset's changed flags, and packages installed
  # since the last run (zlib for a test, say), reach the build; no test is quietly left unbuilt.
  cmake --preset "$preset" -S "$ROOT" >/dev/null
  local jobs
  jobs=$(nproc)
  local targets=()
  [[ $# -gt 0 ]] && targets=(--target "$@")
  # grep hides ninja's progress lines; with pipefail the build's own status decides.
  cmake --build "$ROOT/build/$preset" -j "$jobs" "${targets[@]}" 2>&1 |
    { grep -vE '^\[[0-9]+/[0-9]+\] (Building|Linking)' || true; }
}
