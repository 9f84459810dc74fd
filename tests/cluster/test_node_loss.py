"""A replica killed with SIGKILL: its boxes are `box_lost` (naming the node) through the other
replicas, theirs go on; restarted with the same flags it has a new incarnation, so the old ids
stay lost while new boxes on it work, and the killed process's jails and leftovers are gone. A
stream relayed from the killed node ends with an `error` event (box_lost)."""
import subprocess
import threading
import time

import pytest

from replicas import (Cluster, descendants, incarnation_of, node_of, replica_env, still_alive,
                      wait_until)


@pytest.fixture
def cluster(codebox_bin):
    with Cluster(codebox_bin, peers_mode="static") as c:
        yield c


def assert_lost(answer, node, where):
    assert answer.status == 404, f"through {where}: {answer}"
    assert answer.error_code == "box_lost", f"through {where}: {answer}"
    assert node in answer.json["error"]["message"], f"through {where}: {answer}"


def test_a_killed_replica_loses_its_boxes_and_a_restart_starts_clean(cluster, codebox_bin):
    n2, n3, n4 = cluster["n2"], cluster["n3"], cluster["n4"]
    a = n2.create()
    assert a.status == 201 and node_of(a.json["id"]) == "n2", a
    old = a.json["id"]
    a = n3.create()
    assert a.status == 201 and node_of(a.json["id"]) == "n3", a
    kept = a.json["id"]
    # a process that runs in n2's box while n2 dies
    a = n2.call("POST", f"/v1/boxes/{old}/exec",
                {"argv": ["sh", "-c", "sleep 300 >/dev/null 2>&1 &"]})
    assert a.status == 200 and a.json["exit_code"] == 0, a
    old_incarnation = n2.load()["incarnation"]
    assert incarnation_of(old) == old_incarnation, (old, old_incarnation)
    old_pid = n2.pid
    jails = descendants(old_pid)
    assert jails, f"no process under the n2 serve (pid {old_pid}) while it holds a box"

    # a stream through n4 from n2's box, under way when n2 dies
    streamed = {}

    def stream():
        streamed["answer"] = n4.stream(
            f"/v1/boxes/{old}/exec",
            {"argv": ["sh", "-c", "i=0; while [ $i -lt 150 ]; do echo $i; i=$((i+1)); "
                                  "sleep 0.2; done"]}, timeout=60)
    streamer = threading.Thread(target=stream)
    streamer.start()
    time.sleep(1.5)

    n2.kill9()
    streamer.join(timeout=70)
    assert not streamer.is_alive(), "the relayed stream did not end when n2 died"
    status, _, events = streamed["answer"]
    assert status == 200 and [e for e in events if e[1] == "stdout"], events
    assert events[-1][1] == "error", f"the stream did not end with an error event: {events[-3:]}"
    assert events[-1][2]["error"]["code"] == "box_lost", events[-1]
    assert "n2" in events[-1][2]["error"]["message"], events[-1]

    # the box of the dead node is lost, through every replica that is left
    assert_lost(n3.call("GET", f"/v1/boxes/{old}", timeout=30), "n2", "n3")
    assert_lost(n4.exec(old, ["true"], timeout=30), "n2", "n4")
    assert_lost(n4.call("GET", f"/v1/boxes/{old}/files?path=/etc/hostname", timeout=30), "n2",
                "n4")
    # n3's box goes on, through n4
    e = n4.exec(kept, ["python3", "-c", "print('kept')"])
    assert e.status == 200 and e.json["stdout"] == "kept\n" and e.node == "n3", e
    # the peers see n2 down (bounded)
    def n2_down():
        peers = {p["node"]: p for p in n3.status()["peers"]}
        return "n2" not in peers or peers["n2"]["state"] == "down"
    assert wait_until(n2_down, 20), n3.status()["peers"]
    # a list of every node's boxes says whose are missing, and lists the rest
    listed = n3.call("GET", "/v1/boxes", timeout=30)
    assert listed.status == 200, listed
    assert any(u.startswith("n2: ") for u in listed.json.get("unreachable", [])), listed
    assert not any(b["id"].endswith(".n2") for b in listed.json["boxes"]), listed

    # the jails of the killed serve die with it (their supervisors watch the server)
    gone = wait_until(lambda: not still_alive(jails), 30)
    assert gone, f"processes of the killed n2 serve still run: {still_alive(jails)}"

    # restart with the same flags
    n2.start()
    n2.wait_ready()
    cluster.wait_peers()
    new_incarnation = n2.load()["incarnation"]
    assert new_incarnation != old_incarnation, "a restarted replica kept its incarnation"
    for r in (n2, n3, n4):
        assert_lost(r.call("GET", f"/v1/boxes/{old}", timeout=30), "n2", r.node)
    a = n2.create()
    assert a.status == 201, a
    new = a.json["id"]
    assert node_of(new) == "n2" and incarnation_of(new) == new_incarnation, new
    e = n4.exec(new, ["python3", "-c", "print('reborn')"])
    assert e.status == 200 and e.json["stdout"] == "reborn\n" and e.node == "n2", e

    # nothing of the killed process is left for gc (its first box start removed it)
    r = subprocess.run([codebox_bin, "gc", "--dry-run"], capture_output=True, text=True,
                       timeout=120, env=replica_env(), stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    mentions = [line for line in r.stdout.splitlines() if f"{old_pid}-" in line or
                f"/{old_pid}" in line]
    assert not mentions, f"codebox gc --dry-run still finds the killed serve's leftovers: " \
                         f"{mentions}\n{r.stdout}"

    for box, via in ((new, n3), (kept, n2)):
        assert via.call("DELETE", f"/v1/boxes/{box}").status == 204


def test_a_restarted_replica_is_used_again_for_placement(codebox_bin):
    extra = ["--max-boxes", "1"]
    with Cluster(codebox_bin, nodes=("n2", "n3"), extra={"n2": extra, "n3": extra}) as c:
        a = c["n3"].create()
        assert a.status == 201 and node_of(a.json["id"]) == "n3", a
        c["n3"].kill9()
        time.sleep(0.5)
        # n2 holds nothing: a create there stays there
        a = c["n2"].create()
        assert a.status == 201 and node_of(a.json["id"]) == "n2", a
        # n2 full, n3 down: 429, not a forward to a dead node
        b = c["n2"].create(timeout=60)
        assert b.status == 429, f"with its only peer down, a full n2 answered {b}"
        c["n3"].start()
        c["n3"].wait_ready()
        c.wait_peers()
        b = c["n2"].create()
        assert b.status == 201 and node_of(b.json["id"]) == "n3", b
        for box in (a.json["id"], b.json["id"]):
            assert c["n2"].call("DELETE", f"/v1/boxes/{box}").status == 204
