"""Three replicas that find each other by DNS (`--peers-dns NAME:P`): NAME has the three
addresses as A records on the test's own responder (127.0.0.5:53), which each replica's
private /etc/resolv.conf names; /etc/hosts there does not know NAME. A box made on one node is
used through the others, a streamed exec included, and the replicas' JSON logs are JSON."""
import json

import pytest

from replicas import Cluster, node_of, wait_until


@pytest.fixture(scope="module")
def cluster(codebox_bin, dns_possible):
    c = Cluster(codebox_bin, peers_mode="dns", log_format="json")
    try:
        c.start()
        yield c
    finally:
        c.close()


def test_the_replicas_find_each_other_by_dns(cluster):
    cluster.wait_peers()
    assert cluster.dns.queries > 0, "no replica asked the test's DNS responder"
    for node, r in cluster.replicas.items():
        st = r.status()
        assert st["node"] == node, st
        up = {p["node"]: p["address"] for p in st["peers"] if p["state"] == "up"}
        assert up == {n: f"{cluster[n].address}:{cluster.port}"
                      for n in cluster.replicas if n != node}, st["peers"]


def test_create_exec_and_stream_across_replicas(cluster):
    n2, n3, n4 = cluster["n2"], cluster["n3"], cluster["n4"]
    made = n3.create()
    assert made.status == 201, made
    box = made.json["id"]
    assert node_of(box) == "n3" and made.node == "n3", made
    try:
        a = n2.exec(box, ["python3", "-c", "print(sum(range(10)))"])
        assert a.status == 200 and a.json["stdout"] == "45\n" and a.node == "n3", a
        a = n4.exec(box, ["sh", "-c", "exit 3"])
        assert a.status == 200 and a.json["exit_code"] == 3 and a.node == "n3", a

        script = "for i in 1 2 3 4; do echo tick$i; sleep 0.5; done"
        status, headers, events = n2.stream(f"/v1/boxes/{box}/exec",
                                            {"argv": ["sh", "-c", script]}, timeout=60)
        assert status == 200 and headers.get("x-codebox-node") == "n3", (status, headers, events)
        out = [e for e in events if e[1] == "stdout"]
        assert "".join(e[2]["text"] for e in out) == "tick1\ntick2\ntick3\ntick4\n", events
        assert events[-1][1] == "done" and events[-1][2]["exit_code"] == 0, events
        assert events[-1][0] - out[0][0] >= 1.0, \
            f"not incremental: {[(round(t, 2), n) for t, n, _ in events]}"

        blob = bytes(range(256)) * 64
        a = n4.call("PUT", f"/v1/boxes/{box}/files?path=/tmp/b.bin", raw_body=blob)
        assert a.status == 204, a
        a = n2.call("GET", f"/v1/boxes/{box}/files?path=/tmp/b.bin")
        assert a.status == 200 and a.body == blob, a
    finally:
        deleted = n2.call("DELETE", f"/v1/boxes/{box}")
    assert deleted.status == 204, deleted
    a = n4.call("GET", f"/v1/boxes/{box}")
    assert a.status == 404 and a.error_code == "not_found", a


def test_every_replica_logs_json_lines(cluster):
    for node, r in cluster.replicas.items():
        lines = [line for line in r.log().splitlines()
                 if line.startswith("{")]
        assert lines, f"{node} logged no JSON line:\n{r.log_tail()}"
        for line in lines:
            json.loads(line)


def test_the_peers_follow_the_dns_records(codebox_bin, dns_possible):
    """NAME first lists n2 and n3 only: a box of n4 is box_lost through n2 (n4 is no peer).
    Once the records list n4 too, a request for that box finds it (a fresh lookup when a box's
    node is not known, or the periodic one). A node whose record goes away is no peer any more
    (a Service lists ready pods only)."""
    c = Cluster(codebox_bin, peers_mode="dns", peer_nodes=("n2", "n3"))
    try:
        c.start()
        c.wait_peers(nodes=["n2", "n3"])
        made = c["n4"].create()
        assert made.status == 201 and node_of(made.json["id"]) == "n4", made
        box = made.json["id"]
        a = c["n2"].call("GET", f"/v1/boxes/{box}")
        assert a.status == 404 and a.error_code == "box_lost", a
        assert "n4" in a.json["error"]["message"], a

        c.dns.addresses.append(c["n4"].address)
        found = wait_until(lambda: c["n2"].call("GET", f"/v1/boxes/{box}").status == 200, 10)
        assert found, c["n2"].call("GET", f"/v1/boxes/{box}")
        e = c["n3"].exec(box, ["echo", "found"])
        assert e.status == 200 and e.json["stdout"] == "found\n" and e.node == "n4", e

        c.dns.addresses.remove(c["n3"].address)

        def n3_gone():
            peers = {p["node"]: p["state"] for p in c["n2"].status()["peers"]}
            return peers.get("n3") != "up"
        assert wait_until(n3_gone, 10), c["n2"].status()["peers"]
        assert c["n4"].call("DELETE", f"/v1/boxes/{box}").status == 204
    finally:
        c.close()
