"""Hostile layers, imported as OCI layouts written here by hand: names that climb out with
"..", hardlinks to host files, device nodes, a symlink to a host directory followed by a later
layer, setuid files, a layer that expands past --max-size. A refused layer fails the import
with an error that says what, and leaves nothing: no image dir, no .tmp-* dir, no reference
pointer, nothing written outside the tree. Each test has a store of its own."""
import os
import shutil
import stat
import tarfile
import tempfile

import pytest

import ocilayout
from ocilayout import directory, entry


@pytest.fixture
def sentinel():
    """An empty host directory in /tmp that no layer may write into."""
    d = tempfile.mkdtemp(prefix="codebox-oci-sentinel.", dir="/tmp")
    yield d
    assert os.listdir(d) == [], f"a layer wrote into the host's {d}: {os.listdir(d)}"
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def layout_dir(tmp_path):
    return str(tmp_path / "layout")


def base(tar):
    directory(tar, "bin")
    entry(tar, "bin/hello", data=b"hello\n")
    directory(tar, "tmp", mode=0o1777)


def import_layers(cb, path, layers, *flags):
    ocilayout.write_image(path, layers, {"Env": ["PATH=/bin"]}, tag="1")
    return cb("image", "import", "--name", "local/hostile:1", *flags, path)


def rootfs_of(cb):
    link = os.path.join(cb.images, "by-ref", "docker.io%local%hostile:1")
    assert os.path.islink(link), cb.store_entries()
    return os.path.join(os.path.realpath(link), "rootfs")


def refused(cb, r, *words):
    """The import failed, its stderr says `words`, and the store holds nothing."""
    assert r.returncode != 0, r.stdout
    for w in words:
        assert w in r.stderr, (w, r.stderr)
    cb.assert_nothing_stored()


def test_dotdot_entry_is_refused_naming_it(fresh_codebox, layout_dir):
    r = import_layers(fresh_codebox, layout_dir,
                      [base, lambda tar: entry(tar, "../../evil", data=b"evil\n")])
    refused(fresh_codebox, r, "'../../evil'", "layer 2 of 2", "'..' component")
    # ../../ of the staging tree (images/.tmp-ID-PID/rootfs) is images/; and the home itself.
    for path in (os.path.join(fresh_codebox.images, "evil"),
                 os.path.join(fresh_codebox.home, "evil")):
        assert not os.path.lexists(path), path


def test_dotdot_entry_to_a_host_path_is_refused(fresh_codebox, layout_dir, sentinel):
    name = "../" * 24 + sentinel.lstrip("/") + "/evil"
    r = import_layers(fresh_codebox, layout_dir, [lambda tar: entry(tar, name, data=b"x")])
    refused(fresh_codebox, r, "'" + name + "'", "'..' component")


def test_absolute_name_lands_in_the_tree(fresh_codebox, layout_dir, sentinel):
    # A leading "/" is dropped, as tar does: the file is the tree's, not the host's.
    r = import_layers(fresh_codebox, layout_dir,
                      [base, lambda tar: (directory(tar, sentinel),
                                          entry(tar, sentinel + "/abs", data=b"inside\n"))])
    assert r.returncode == 0, r.stderr
    with open(os.path.join(rootfs_of(fresh_codebox), sentinel.lstrip("/"), "abs")) as f:
        assert f.read() == "inside\n"


def test_hardlink_out_of_the_tree_is_refused(fresh_codebox, layout_dir):
    with open("/etc/passwd", "rb") as f:
        before = f.read()
    r = import_layers(fresh_codebox, layout_dir,
                      [base, lambda tar: entry(tar, "bin/passwd", tarfile.LNKTYPE,
                                               link="../../../etc/passwd")])
    refused(fresh_codebox, r, "'bin/passwd'", "hardlink target '../../../etc/passwd'")
    with open("/etc/passwd", "rb") as f:
        assert f.read() == before


def test_hardlink_to_an_absolute_host_path_is_refused(fresh_codebox, layout_dir):
    # /etc/passwd is not in this tree: the link would have to be to the host's.
    r = import_layers(fresh_codebox, layout_dir,
                      [base, lambda tar: entry(tar, "bin/shadow", tarfile.LNKTYPE,
                                               link="/etc/passwd")])
    refused(fresh_codebox, r, "'bin/shadow'", "hardlink target '/etc/passwd' is not in the tree")


def test_device_nodes_are_dropped(fresh_codebox, layout_dir):
    def devices(tar):
        directory(tar, "dev")
        entry(tar, "dev/mem", tarfile.CHRTYPE, mode=0o666, devmajor=1, devminor=1)
        entry(tar, "dev/sda", tarfile.BLKTYPE, mode=0o666, devmajor=8, devminor=0)
        entry(tar, "bin/after-devices", data=b"kept\n")

    r = import_layers(fresh_codebox, layout_dir, [base, devices])
    assert r.returncode == 0, r.stderr
    assert "dropped 2 device nodes" in r.stdout, r.stdout
    rootfs = rootfs_of(fresh_codebox)
    found = []
    for top, dirs, files in os.walk(rootfs):
        for name in dirs + files:
            mode = os.lstat(os.path.join(top, name)).st_mode
            if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
                found.append(os.path.join(top, name))
    assert found == [], found
    assert os.path.isfile(os.path.join(rootfs, "bin", "after-devices"))


@pytest.mark.parametrize("target", ["absolute", "relative"])
def test_symlink_to_a_host_dir_then_a_file_through_it_stays_in_the_tree(
        fresh_codebox, layout_dir, sentinel, target):
    inside = sentinel.lstrip("/")  # tmp/codebox-oci-sentinel.XXX, in the tree too
    link = sentinel if target == "absolute" else "../" * 12 + inside

    def first(tar):
        base(tar)
        directory(tar, inside)
        entry(tar, "escape", tarfile.SYMTYPE, link=link, mode=0o777)

    r = import_layers(fresh_codebox, layout_dir,
                      [first, lambda tar: entry(tar, "escape/pwned", data=b"pwned\n")])
    assert r.returncode == 0, r.stderr
    landed = os.path.join(rootfs_of(fresh_codebox), inside, "pwned")
    with open(landed) as f:
        assert f.read() == "pwned\n"
    # (the sentinel fixture checks that the host's directory stayed empty)


def test_symlink_to_a_host_dir_the_tree_lacks_is_refused(fresh_codebox, layout_dir, sentinel):
    def first(tar):
        base(tar)
        entry(tar, "escape", tarfile.SYMTYPE, link=sentinel, mode=0o777)

    r = import_layers(fresh_codebox, layout_dir,
                      [first, lambda tar: entry(tar, "escape/pwned", data=b"pwned\n")])
    refused(fresh_codebox, r, "'escape/pwned'", "'escape' is a symlink that leads nowhere")


def _suid_layers():
    def fill(tar):
        base(tar)
        entry(tar, "bin/suid", data=b"#!/bin/sh\n", mode=0o4755)
        entry(tar, "bin/sgid", data=b"#!/bin/sh\n", mode=0o2755)
    return [fill]


def test_setuid_bits_are_cleared_by_default(fresh_codebox, layout_dir):
    r = import_layers(fresh_codebox, layout_dir, _suid_layers())
    assert r.returncode == 0, r.stderr
    assert "cleared setuid/setgid bits of 2 files" in r.stdout, r.stdout
    rootfs = rootfs_of(fresh_codebox)
    assert stat.S_IMODE(os.lstat(os.path.join(rootfs, "bin/suid")).st_mode) == 0o755
    assert stat.S_IMODE(os.lstat(os.path.join(rootfs, "bin/sgid")).st_mode) == 0o755


def test_setuid_bits_are_kept_with_keep_setuid(fresh_codebox, layout_dir):
    r = import_layers(fresh_codebox, layout_dir, _suid_layers(), "--keep-setuid")
    assert r.returncode == 0, r.stderr
    assert "cleared" not in r.stdout, r.stdout
    rootfs = rootfs_of(fresh_codebox)
    assert stat.S_IMODE(os.lstat(os.path.join(rootfs, "bin/suid")).st_mode) == 0o4755
    assert stat.S_IMODE(os.lstat(os.path.join(rootfs, "bin/sgid")).st_mode) == 0o2755


def test_layer_past_max_size_is_refused_naming_the_limit(fresh_codebox, layout_dir):
    # 2 MiB of zeros: a few KiB compressed, past 1M only once unpacked.
    r = import_layers(fresh_codebox, layout_dir,
                      [base, lambda tar: entry(tar, "bin/big", data=bytes(2 << 20))],
                      "--max-size", "1M")
    refused(fresh_codebox, r, "'bin/big'", "larger than the limit of 1 MiB (--max-size)")


def test_layers_past_max_size_compressed_are_refused_before_unpacking(fresh_codebox,
                                                                      layout_dir):
    r = import_layers(fresh_codebox, layout_dir,
                      [base, lambda tar: entry(tar, "bin/random", data=os.urandom(2 << 20))],
                      "--max-size", "1M")
    refused(fresh_codebox, r, "compressed", "limit", "(--max-size)")


def test_symlinked_mount_points_and_etc_are_replaced_not_followed(fresh_codebox, layout_dir,
                                                                  sentinel):
    # The drivers mount onto /.codebox and /tmp, and codebox writes /etc/hostname and /etc/hosts:
    # an image that makes them symlinks to host paths must get real directories there instead.
    def layer(tar):
        directory(tar, "bin")
        entry(tar, "bin/busybox", data=open("/bin/busybox", "rb").read(), mode=0o755)
        for applet in ("sh", "cat", "ls"):
            entry(tar, f"bin/{applet}", tarfile.SYMTYPE, link="busybox", mode=0o777)
        entry(tar, ".codebox", tarfile.SYMTYPE, link=sentinel, mode=0o777)
        entry(tar, "tmp", tarfile.SYMTYPE, link=sentinel, mode=0o777)
        entry(tar, "etc", tarfile.SYMTYPE, link=sentinel, mode=0o777)

    with open("/etc/hostname", "rb") as f:
        host_hostname = f.read()
    r = import_layers(fresh_codebox, layout_dir, [layer])
    assert r.returncode == 0, r.stderr
    rootfs = rootfs_of(fresh_codebox)
    for name in (".codebox", "tmp", "etc"):
        assert not os.path.islink(os.path.join(rootfs, name)), name
        assert os.path.isdir(os.path.join(rootfs, name)), name
    with open("/etc/hostname", "rb") as f:
        assert f.read() == host_hostname
    run = fresh_codebox("exec", "--driver", "jail", "--image", "local/hostile:1", "--",
                        "sh", "-c", "cat /etc/hostname; ls -a /tmp")
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[0] == "codebox"
    # (the sentinel fixture checks that nothing was written into the host directory)


def test_the_user_is_resolved_in_the_image_never_the_host(fresh_codebox, layout_dir):
    # /etc/passwd a symlink to the host's: resolved inside the tree it names nothing, so a user
    # the host has (daemon, uid 1, in every Debian /etc/passwd) is not found.
    with open("/etc/passwd") as f:
        assert any(line.startswith("daemon:") for line in f)

    def layer(tar):
        base(tar)
        directory(tar, "etc")
        entry(tar, "etc/passwd", tarfile.SYMTYPE, link="/../../../../etc/passwd", mode=0o777)

    ocilayout.write_image(layout_dir, [layer], {"Env": ["PATH=/bin"], "User": "daemon"}, tag="1")
    r = fresh_codebox("image", "import", "--name", "local/hostile:1", layout_dir)
    refused(fresh_codebox, r, "its User: user 'daemon'", "not in the image's /etc/passwd")
