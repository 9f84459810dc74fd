"""A registry that lies (hostile_registry.py, a thread of this process on 127.0.0.1): garbage
for a manifest, a valid manifest for a digest it is not, a layer whose bytes are not its
digest's, a layer that claims 100 GiB. Each pull fails with a clear error and stores
nothing."""
import os

import pytest

from hostile_registry import HostileRegistry, other_digest


@pytest.fixture(scope="module")
def hostile(bb_layout):
    layout, image = bb_layout
    r = HostileRegistry(image, os.path.join(layout, "blobs", "sha256"))
    yield r
    r.close()


def pull(cb, ref, *flags):
    return cb("image", "pull", "--insecure", *flags, ref, timeout=120)


def test_the_hostile_registry_serves_a_good_image_where_it_does_not_lie(fresh_codebox,
                                                                        hostile):
    # Its "liar" repository by tag is an honest answer: the test's other failures are the lies.
    r = pull(fresh_codebox, f"{hostile.addr}/liar:1")
    assert r.returncode == 0, r.stderr
    assert "ready" in r.stdout, r.stdout


def test_garbage_manifest_is_a_clear_error(fresh_codebox, hostile):
    r = pull(fresh_codebox, f"{hostile.addr}/garbage:1")
    assert r.returncode != 0
    assert "manifest" in r.stderr.lower(), r.stderr
    assert "garbage:1" in r.stderr, r.stderr
    assert "\x00" not in r.stderr and "\ufffd" not in r.stderr, repr(r.stderr)
    fresh_codebox.assert_nothing_stored()


@pytest.mark.parametrize("name", ["liar", "liar-hdr"])
def test_manifest_for_another_digest_is_a_digest_mismatch(fresh_codebox, hostile, name):
    asked = other_digest(hostile.digest)
    r = pull(fresh_codebox, f"{hostile.addr}/{name}@{asked}")
    assert r.returncode != 0, r.stdout
    assert "digest mismatch" in r.stderr, r.stderr
    assert asked in r.stderr, r.stderr
    fresh_codebox.assert_nothing_stored()


def test_layer_bytes_not_matching_their_digest_fail_and_store_nothing(fresh_codebox, hostile):
    r = pull(fresh_codebox, f"{hostile.addr}/badblob:1")
    assert r.returncode != 0, r.stdout
    assert "digest" in r.stderr.lower(), r.stderr
    assert hostile.layer in r.stderr or "did not match" in r.stderr, r.stderr
    fresh_codebox.assert_nothing_stored()


def test_layer_claiming_100_gib_is_refused_before_any_blob_is_fetched(fresh_codebox, hostile):
    before = len(hostile.blob_requests())
    r = pull(fresh_codebox, f"{hostile.addr}/huge:1", "--max-size", "1G")
    assert r.returncode != 0, r.stdout
    assert "100.0 GiB of compressed layers" in r.stderr and "--max-size" in r.stderr, r.stderr
    assert hostile.blob_requests()[before:] == []
    fresh_codebox.assert_nothing_stored()


def test_insecure_is_refused_for_a_public_registry(fresh_codebox):
    r = pull(fresh_codebox, "registry.example.com/app:1")
    assert r.returncode != 0
    assert "--insecure" in r.stderr and "registry.example.com" in r.stderr, r.stderr
    fresh_codebox.assert_nothing_stored()
