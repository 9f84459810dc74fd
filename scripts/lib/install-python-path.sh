#!/usr/bin/env bash
# Makes `import codebox` work for the machine's python3 interpreters: a .pth file pointing at
# the source package (python/) and the built extension (build/release/python/).
set -euo pipefail
build_dir=$1
root="$(cd "$(dirname "$0")/../.." && pwd)"
if ! ls "$build_dir"/python/_codebox*.so >/dev/null 2>&1; then
  echo "    python module not built (CODEBOX_PYTHON=OFF?); skipping"
  exit 0
fi
# Debian's python3 and, where present, the python3 first on PATH (e.g. pyenv).
for py in /usr/bin/python3 "$(command -v python3 || true)"; do
  [[ -x "$py" ]] || continue
  site=$("$py" -c 'import site,sys; print(site.getsitepackages()[0])' 2>/dev/null) || continue
  mkdir -p "$site"
  printf '%s\n%s\n' "$root/python" "$build_dir/python" > "$site/codebox.pth"
  echo "    $py: import codebox  (via $site/codebox.pth)"
done
