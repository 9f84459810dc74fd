"""OCI image layouts written by the tests themselves, with the standard library only: each
layer a gzip'd tar (blobs/sha256/<digest>), a config with rootfs.diff_ids and os/architecture,
an image manifest with its mediaTypes, index.json and oci-layout. What skopeo pushes to the
test registries and what `codebox image import` reads.

A layer is made by a function that gets a tarfile.TarFile to add to (see `entry`, `add_tree`);
hostile layers are written the same way, with names, links and modes no well-behaved tool
would write."""
import gzip
import hashlib
import io
import json
import os
import tarfile

MANIFEST = "application/vnd.oci.image.manifest.v1+json"
CONFIG = "application/vnd.oci.image.config.v1+json"
LAYER_GZIP = "application/vnd.oci.image.layer.v1.tar+gzip"
INDEX = "application/vnd.oci.image.index.v1+json"


class _Hashing:
    """A write-only file that hashes and counts what goes through it."""

    def __init__(self, out):
        self.out = out
        self.sha = hashlib.sha256()
        self.size = 0

    def write(self, data):
        self.sha.update(data)
        self.size += len(data)
        return self.out.write(data)

    def flush(self):
        pass


def _write_blob(blobs, data):
    digest = hashlib.sha256(data).hexdigest()
    with open(os.path.join(blobs, digest), "wb") as f:
        f.write(data)
    return f"sha256:{digest}", len(data)


def write_layer(blobs, fill, compresslevel=6):
    """Writes one gzip'd tar layer into `blobs` (blobs/sha256), made by fill(tarfile).
    Returns (descriptor, diff_id): the layer's descriptor and its uncompressed digest."""
    tmp = os.path.join(blobs, ".layer.tmp")
    with open(tmp, "wb") as raw:
        outer = _Hashing(raw)
        with gzip.GzipFile(fileobj=outer, mode="wb", compresslevel=compresslevel, mtime=0) as gz:
            inner = _Hashing(gz)
            with tarfile.open(fileobj=inner, mode="w|", format=tarfile.PAX_FORMAT) as tar:
                fill(tar)
    digest = outer.sha.hexdigest()
    os.rename(tmp, os.path.join(blobs, digest))
    descriptor = {"mediaType": LAYER_GZIP, "digest": f"sha256:{digest}", "size": outer.size}
    return descriptor, f"sha256:{inner.sha.hexdigest()}"


def entry(tar, name, kind=tarfile.REGTYPE, data=b"", mode=0o644, uid=0, gid=0, link="",
          devmajor=0, devminor=0):
    """Adds one entry exactly as given (no checks: hostile names, links and modes go in)."""
    info = tarfile.TarInfo(name)
    info.type = kind
    info.mode = mode
    info.uid, info.gid = uid, gid
    info.uname = info.gname = ""
    info.mtime = 1700000000
    info.linkname = link
    info.devmajor, info.devminor = devmajor, devminor
    if kind == tarfile.REGTYPE:
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    else:
        tar.addfile(info)


def directory(tar, name, mode=0o755, uid=0, gid=0):
    entry(tar, name, tarfile.DIRTYPE, mode=mode, uid=uid, gid=gid)


def add_tree(tar, root):
    """Adds the tree at `root` as the layer's root (names relative to it), owners and modes as
    they are on disk."""
    tar.add(root, arcname=".", recursive=True)


def write_image(directory_path, layers, config=None, tag="latest", compresslevel=6):
    """Writes an OCI layout at `directory_path` holding one linux/amd64 image, tagged `tag` in
    index.json (org.opencontainers.image.ref.name). `layers`: fill functions, bottom first (or
    already written (descriptor, diff_id) pairs). `config`: the image config's "config" part
    (Env, WorkingDir, User...). Returns {"manifest_digest", "config_digest", "layers"}."""
    blobs = os.path.join(directory_path, "blobs", "sha256")
    os.makedirs(blobs, exist_ok=True)
    with open(os.path.join(directory_path, "oci-layout"), "w") as f:
        json.dump({"imageLayoutVersion": "1.0.0"}, f)
    written = [layer if isinstance(layer, tuple) else write_layer(blobs, layer, compresslevel)
               for layer in layers]
    image_config = {
        "architecture": "amd64",
        "os": "linux",
        "config": config or {},
        "rootfs": {"type": "layers", "diff_ids": [diff_id for _, diff_id in written]},
        "history": [{"created_by": "codebox tests/oci"} for _ in written],
    }
    config_digest, config_size = _write_blob(blobs, json.dumps(image_config).encode())
    manifest = {
        "schemaVersion": 2,
        "mediaType": MANIFEST,
        "config": {"mediaType": CONFIG, "digest": config_digest, "size": config_size},
        "layers": [descriptor for descriptor, _ in written],
    }
    manifest_bytes = json.dumps(manifest).encode()
    manifest_digest, manifest_size = _write_blob(blobs, manifest_bytes)
    index = {
        "schemaVersion": 2,
        "mediaType": INDEX,
        "manifests": [{"mediaType": MANIFEST, "digest": manifest_digest, "size": manifest_size,
                       "annotations": {"org.opencontainers.image.ref.name": tag}}],
    }
    with open(os.path.join(directory_path, "index.json"), "w") as f:
        json.dump(index, f)
    return {"manifest_digest": manifest_digest, "config_digest": config_digest,
            "manifest": manifest_bytes, "layers": [d for d, _ in written]}


# The two images of the tests -------------------------------------------------------------

BB_APPLETS = ("sh", "echo", "ls", "id", "cat", "pwd", "env", "true", "sleep", "touch", "stat",
              "uname", "mkdir", "rm", "test")


def busybox_layer(busybox="/bin/busybox"):
    """bin/busybox (static: no libc in the image at all) and a symlink for each applet used."""
    with open(busybox, "rb") as f:
        data = f.read()

    def fill(tar):
        directory(tar, "bin")
        entry(tar, "bin/busybox", data=data, mode=0o755)
        for applet in BB_APPLETS:
            entry(tar, f"bin/{applet}", tarfile.SYMTYPE, link="busybox", mode=0o777)
        for d in ("tmp", "etc", "work"):
            directory(tar, d, mode=0o1777 if d == "tmp" else 0o755)
        entry(tar, "etc/passwd", data=b"root:x:0:0:root:/root:/bin/sh\n")
        entry(tar, "etc/group", data=b"root:x:0:\n")

    return fill


BB_CONFIG = {"Env": ["PATH=/bin"]}

PYAPP_CONFIG = {
    "User": "app",
    "WorkingDir": "/home/app/work",
    "Env": ["PATH=/usr/local/bin:/usr/bin:/bin", "GREETING=hello-from-oci"],
}


def app_user_layer(base_rootfs):
    """/etc/passwd and /etc/group of `base_rootfs` with a user app (1000:1000) added, its home
    /home/app owned by it and an empty /home/app/work."""
    def read(name):
        with open(os.path.join(base_rootfs, "etc", name), "rb") as f:
            return f.read()

    passwd = read("passwd").rstrip(b"\n") + b"\napp:x:1000:1000:app:/home/app:/bin/sh\n"
    group = read("group").rstrip(b"\n") + b"\napp:x:1000:\n"

    def fill(tar):
        directory(tar, "etc")
        entry(tar, "etc/passwd", data=passwd)
        entry(tar, "etc/group", data=group)
        directory(tar, "home")
        directory(tar, "home/app", uid=1000, gid=1000)
        directory(tar, "home/app/work", uid=1000, gid=1000)

    return fill
