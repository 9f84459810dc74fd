"""A PEP 517 build backend for codebox's Python package, with no dependencies.

It configures the CMake project at the repository root for the interpreter that runs it
(``-DPython3_EXECUTABLE=sys.executable``), builds only what the package needs (``_codebox``
and the helper binaries) and packs a wheel in the bundle layout ``base/paths.h`` looks for::

    codebox/__init__.py ...              the package (python/codebox/)
    codebox/_codebox.<abi>.so            the extension
    codebox/codebox-libexec/<helper>     codebox-agent, codebox-jail, codebox-vm-keeper
    codebox/codebox-images/<recipe>/     the image recipes (images/)

so the installed module finds its helpers and recipes from its own location.

The CMake build dir is ``$CODEBOX_WHEEL_BUILD_DIR``, else ``build/wheel-<python tag>`` under the
repository (kept, so a second install rebuilds little), else a temporary dir where the
checkout is not writable.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import zipfile
from pathlib import Path

NAME = "codebox"
HELPERS = ("codebox-agent", "codebox-jail", "codebox-vm-keeper")
PYTHON_DIR = Path(__file__).resolve().parent.parent
ROOT = PYTHON_DIR.parent


def _version() -> str:
    text = (PYTHON_DIR / "pyproject.toml").read_text()
    match = re.search(r'^version\s*=\s*"([^"]+)"', text, re.MULTILINE)
    if match is None:
        raise RuntimeError(f"{PYTHON_DIR / 'pyproject.toml'}: no version = \"...\" line")
    return match.group(1)


def _tag() -> str:
    py = f"cp{sys.version_info.major}{sys.version_info.minor}"
    plat = re.sub(r"[-.]", "_", sysconfig.get_platform())
    return f"{py}-{py}-{plat}"


def _metadata() -> str:
    summary = "Run untrusted, model-written code in disposable boxes"
    readme = (PYTHON_DIR / "README.md").read_text()
    return (
        f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {_version()}\nSummary: {summary}\n"
        f"Requires-Python: >=3.9\nDescription-Content-Type: text/markdown\n\n{readme}"
    )


def _run(argv: list[str]) -> None:
    print("codebox_build:", " ".join(argv), file=sys.stderr, flush=True)
    try:
        subprocess.run(argv, check=True, stdout=sys.stderr)
    except FileNotFoundError as exc:
        raise RuntimeError(
            f"codebox_build: {argv[0]} not found; install the build tools "
            "(sudo scripts/setup, or the BUILD_PACKAGES of scripts/lib/common.sh)"
        ) from exc


def _build_tree() -> Path:
    if os.environ.get("CODEBOX_WHEEL_BUILD_DIR"):
        build = Path(os.environ["CODEBOX_WHEEL_BUILD_DIR"])
    elif os.access(ROOT, os.W_OK):
        build = ROOT / "build" / f"wheel-{_tag().split('-')[0]}"
    else:  # a checkout this user cannot write to: build in a fresh temporary dir
        build = Path(tempfile.mkdtemp(prefix="codebox-wheel-"))
    if not (ROOT / "CMakeLists.txt").is_file():
        raise RuntimeError(f"codebox_build: {ROOT}/CMakeLists.txt not found; build from the repository")
    generator = ["-G", "Ninja"] if shutil.which("ninja") else []
    _run(
        ["cmake", "-S", str(ROOT), "-B", str(build), *generator,
         "-DCMAKE_BUILD_TYPE=Release", "-DCODEBOX_TESTS=OFF", "-DCODEBOX_INSTALL=OFF",
         "-DCODEBOX_PYTHON=ON", f"-DPython3_EXECUTABLE={sys.executable}"]
    )
    jobs = str(os.cpu_count() or 1)
    _run(["cmake", "--build", str(build), "-j", jobs, "--target", "_codebox", *HELPERS])
    return build


class _Wheel:
    """A wheel being written: every file goes into the zip and into RECORD."""

    def __init__(self, path: Path):
        self.zip = zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED)
        self.record: list[str] = []

    def add(self, arcname: str, data: bytes, executable: bool = False) -> None:
        info = zipfile.ZipInfo(arcname, date_time=(2020, 1, 1, 0, 0, 0))
        info.compress_type = zipfile.ZIP_DEFLATED
        info.external_attr = (0o100755 if executable else 0o100644) << 16
        self.zip.writestr(info, data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        self.record.append(f"{arcname},sha256={digest},{len(data)}")

    def add_file(self, arcname: str, path: Path) -> None:
        self.add(arcname, path.read_bytes(), executable=os.access(path, os.X_OK))

    def close(self, dist_info: str) -> None:
        self.record.append(f"{dist_info}/RECORD,,")
        self.zip.writestr(f"{dist_info}/RECORD", "\n".join(self.record) + "\n")
        self.zip.close()


def get_requires_for_build_wheel(config_settings=None):  # noqa: ARG001 (PEP 517 signature)
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):  # noqa: ARG001
    build = _build_tree()
    extensions = sorted((build / "python").glob("_codebox*.so"))
    if not extensions:
        raise RuntimeError(f"codebox_build: no _codebox*.so in {build / 'python'} after the build")
    version, tag = _version(), _tag()
    dist_info = f"{NAME}-{version}.dist-info"
    filename = f"{NAME}-{version}-{tag}.whl"
    wheel = _Wheel(Path(wheel_directory) / filename)
    for path in sorted((PYTHON_DIR / NAME).rglob("*.py")):
        wheel.add_file(f"{NAME}/{path.relative_to(PYTHON_DIR / NAME)}", path)
    wheel.add_file(f"{NAME}/{extensions[-1].name}", extensions[-1])
    for helper in HELPERS:
        wheel.add_file(f"{NAME}/codebox-libexec/{helper}", build / "bin" / helper)
    for path in sorted((ROOT / "images").rglob("*")):
        if path.is_file():
            wheel.add_file(f"{NAME}/codebox-images/{path.relative_to(ROOT / 'images')}", path)
    wheel.add(f"{dist_info}/METADATA", _metadata().encode())
    wheel.add(
        f"{dist_info}/WHEEL",
        f"Wheel-Version: 1.0\nGenerator: codebox_build\nRoot-Is-Purelib: false\nTag: {tag}\n".encode(),
    )
    wheel.add(f"{dist_info}/top_level.txt", f"{NAME}\n".encode())
    wheel.close(dist_info)
    return filename
