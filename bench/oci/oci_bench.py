"""OCI images against recipe images, in one run (issue 15's benchmark):

* pull + unpack time and image size of an OCI image holding the python recipe's tree (pushed to
  a loopback docker-registry), against `codebox image build python` of the same content;
  and the no-op second pull;
* box start to result (`codebox exec -- true`, `codebox run "print(1)"`) from the OCI image
  against the recipe image, alternating, medians and ratios: they should not differ.

Usage (root; the python image built in /var/lib/codebox; skopeo and docker-registry installed,
as scripts/setup does): sudo python3 bench/oci/oci_bench.py [--runs 15] [--codebox BIN]
Everything listens on 127.0.0.1; temp stores are removed at the end.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "oci"))
import ocilayout  # noqa: E402
import registry  # noqa: E402

SYSTEM_STORE = "/var/lib/codebox"


def timed(argv, env, timeout=900):
    start = time.perf_counter()
    r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout)
    elapsed = time.perf_counter() - start
    if r.returncode != 0:
        sys.exit(f"failed ({r.returncode}): {' '.join(argv)}\n{r.stdout}\n{r.stderr}")
    return elapsed, r


def image_size(home, name_or_ref):
    for entry in os.listdir(os.path.join(home, "images")):
        manifest = os.path.join(home, "images", entry, "manifest.json")
        if os.path.isfile(manifest):
            m = json.load(open(manifest))
            if m.get("name") == name_or_ref or m.get("reference") == name_or_ref:
                return m["size_bytes"]
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--codebox", default=str(REPO / "build" / "release" / "bin" / "codebox"))
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("run as root (pull and build need it)")
    problem = registry.why_not_possible()
    if problem:
        sys.exit(problem)
    link = os.path.join(SYSTEM_STORE, "images", "by-name", "python")
    rootfs = os.path.join(os.path.realpath(link), "rootfs")
    if not os.path.isfile(os.path.join(rootfs, "usr", "bin", "python3")):
        sys.exit("build the python image first: codebox image build python")

    work = tempfile.mkdtemp(prefix="codebox-oci-bench.", dir="/var/tmp")
    os.chmod(work, 0o755)  # the store below it is read by box root, an id of its own
    reg = None
    try:
        layout = os.path.join(work, "layout")
        t0 = time.perf_counter()
        ocilayout.write_image(layout, [lambda tar: ocilayout.add_tree(tar, rootfs)],
                              {"Env": ["PATH=/usr/local/bin:/usr/bin:/bin"]}, tag="1",
                              compresslevel=1)
        layout_s = time.perf_counter() - t0
        reg = registry.Registry(work, "registry")
        registry.push(layout, "1", reg, "pybench")
        ref = f"{reg.addr}/pybench:1"
        canonical = ref

        home = os.path.join(work, "home")
        env = dict(os.environ, CODEBOX_HOME=home)
        pull_s, _ = timed([args.codebox, "image", "pull", "--insecure", ref], env)
        again_s, _ = timed([args.codebox, "image", "pull", "--insecure", ref], env)
        build_s, _ = timed([args.codebox, "image", "build", "python"], env, timeout=1800)
        oci_size = image_size(home, canonical)
        recipe_size = image_size(home, "python")
        layer_bytes = sum(os.path.getsize(os.path.join(layout, "blobs", "sha256", f))
                          for f in os.listdir(os.path.join(layout, "blobs", "sha256")))

        # Warm both (the first box of an image pays for nothing else here, but keep it fair).
        for image in ("python", ref):
            timed([args.codebox, "exec", "--driver", "jail", "--image", image, "--", "true"], env)
        starts = {("python", "exec"): [], (ref, "exec"): [], ("python", "run"): [],
                  (ref, "run"): []}
        for _ in range(args.runs):
            for image in ("python", ref):
                s, _ = timed([args.codebox, "exec", "--local", "--driver", "jail", "--image",
                              image, "--", "true"], env)
                starts[(image, "exec")].append(s)
                s, r = timed([args.codebox, "run", "--local", "--driver", "jail", "--image",
                              image, "print(1)"], env)
                assert r.stdout.strip() == "1", r.stdout
                starts[(image, "run")].append(s)

        print(f"OCI layout of the python recipe tree written in {layout_s:.1f} s "
              f"({layer_bytes / 2**20:.0f} MiB of blobs, gzip -1); pushed to {reg.addr}")
        print(f"{'':38} {'OCI pull':>10} {'recipe build':>13} {'ratio':>7}")
        print(f"{'time to a usable image (s)':38} {pull_s:10.1f} {build_s:13.1f} "
              f"{pull_s / build_s:7.2f}")
        print(f"{'image size (MiB)':38} {oci_size / 2**20:10.0f} {recipe_size / 2**20:13.0f} "
              f"{oci_size / max(recipe_size, 1):7.2f}")
        print(f"{'second pull of the same tag (s)':38} {again_s:10.2f}")
        print(f"\nbox start to result, jail, median of {args.runs} (ms):")
        print(f"{'':38} {'OCI image':>10} {'recipe':>13} {'ratio':>7}")
        for what, label in (("exec", "codebox exec -- true"), ("run", "codebox run 'print(1)'")):
            o = statistics.median(starts[(ref, what)]) * 1000
            p = statistics.median(starts[("python", what)]) * 1000
            print(f"{label:38} {o:10.1f} {p:13.1f} {o / p:7.2f}")
    finally:
        if reg is not None:
            reg.close()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
