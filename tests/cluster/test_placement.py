"""Placement: a create (or one-shot run) that reaches a full node is placed on a peer that has
room, and a create asking for a driver the node does not offer goes to a peer that offers it.
Three replicas with `--max-boxes 2 --drivers jail`; a two-node cluster (n2 jail, n3 jail,vm)
for the driver. Last, a Python box placed away from the replica it talks to is lost with its
node (BoxLostError)."""
import json
import socket

import pytest

from replicas import BOX, Cluster, node_of


@pytest.fixture(scope="module")
def cluster(codebox_bin):
    extra = ["--max-boxes", "2", "--drivers", "jail"]
    with Cluster(codebox_bin, extra={n: extra for n in ("n2", "n3", "n4")}) as c:
        yield c


def delete_all(cluster, ids):
    for box in ids:
        a = cluster["n3"].call("DELETE", f"/v1/boxes/{box}")
        assert a.status in (204, 404), a


def test_a_full_node_places_creates_on_its_peers(cluster):
    n2 = cluster["n2"]
    made = []
    try:
        for _ in range(2):
            a = n2.create()
            assert a.status == 201 and node_of(a.json["id"]) == "n2" and a.node == "n2", a
            made.append(a.json["id"])
        load = n2.load()
        assert load["full"] is True and load["boxes"] == 2 and load["max_boxes"] == 2, load

        a = n2.create()
        assert a.status == 201, f"a create at full n2 was not placed on a peer: {a}"
        placed = node_of(a.json["id"])
        assert placed in ("n3", "n4") and a.node == placed, a
        made.append(a.json["id"])
        # the placed box works through the node that placed it
        e = n2.exec(a.json["id"], ["python3", "-c", "print('placed')"])
        assert e.status == 200 and e.json["stdout"] == "placed\n" and e.node == placed, e

        # a one-shot run at the full node still answers, from a peer
        r = n2.call("POST", "/v1/run", {"code": "print(6 * 7)", **BOX})
        assert r.status == 200, r
        assert r.json["stdout"] == "42\n" and r.json["exit_code"] == 0, r
        assert r.node in ("n3", "n4"), r.headers
        # and so does a streamed one
        status, _, events = n2.stream("/v1/run", {"code": "print(6 * 7)", **BOX})
        assert status == 200, events
        # The output comes as events; `done` carries none of it (the server keeps none).
        streamed = "".join(e[2]["text"] for e in events if e[1] == "stdout")
        assert events[-1][1] == "done" and streamed == "42\n", events
        # and an MCP session begun at the full node is held by a peer
        init = n2.call("POST", "/mcp", {
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "placement-test", "version": "1"}}},
            headers={"Accept": "application/json, text/event-stream"})
        assert init.status == 200, init
        session = init.headers.get("mcp-session-id", "")
        assert session.rsplit(".", 1)[-1] in ("n3", "n4"), init
        assert n2.call("DELETE", "/mcp", headers={"Mcp-Session-Id": session}).status == 204

        # fill the cluster through n2 (bounded): every node ends with 2, then 429
        for _ in range(6):
            a = n2.create()
            if a.status != 201:
                break
            made.append(a.json["id"])
        assert a.status == 429 and a.error_code == "resource_exhausted", a
        assert a.headers.get("retry-after"), a.headers
        counts = {n: sum(node_of(b) == n for b in made) for n in ("n2", "n3", "n4")}
        assert counts == {"n2": 2, "n3": 2, "n4": 2}, counts
        r = n2.call("POST", "/v1/run", {"code": "print(1)", **BOX})
        assert r.status == 429, f"a run with every node full: {r}"
        for node in ("n2", "n3", "n4"):
            assert cluster[node].load()["full"] is True
    finally:
        delete_all(cluster, made)


def raw_creates(cluster, node, count):
    """`count` POST /v1/boxes sent to `node` as nearly at once as this process can: the
    connections are opened first, then every request goes out in one send each. Returns the
    answers (status, id or None, body)."""
    body = json.dumps(BOX).encode()
    request = (f"POST /v1/boxes HTTP/1.1\r\nHost: {cluster[node].address}:{cluster.port}\r\n"
               f"Authorization: Bearer {cluster.token}\r\nContent-Type: application/json\r\n"
               f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode() + body
    socks = [socket.create_connection((cluster[node].address, cluster.port), timeout=60)
             for _ in range(count)]
    try:
        for s in socks:
            s.sendall(request)
        answers = []
        for s in socks:
            data = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
            head, _, rest = data.partition(b"\r\n\r\n")
            status = int(head.split()[1])
            box = json.loads(rest).get("id") if status == 201 else None
            answers.append((status, box, rest[:300]))
        return answers
    finally:
        for s in socks:
            s.close()


def test_concurrent_creates_at_a_node_with_one_slot_left_are_placed_not_refused(cluster):
    """Two creates at once at n2, which has room for one more box, n3 and n4 empty: both get a
    box (one on n2, one placed on a peer); neither may be refused with 429 while the peers have
    room: the placement decision (n2 not full yet) and the local admission (now full) must not
    race. Forty rounds."""
    n2 = cluster["n2"]
    refused, made = [], []
    try:
        a = n2.create()
        assert a.status == 201 and node_of(a.json["id"]) == "n2", a
        first = a.json["id"]
        for _ in range(40):
            answers = raw_creates(cluster, "n2", 2)
            refused += [x for x in answers if x[0] != 201]
            boxes = [x[1] for x in answers if x[0] == 201]
            delete_all(cluster, boxes)
            made += boxes
        assert not refused, f"{len(refused)} of 80 creates refused while peers had room: " \
                            f"{refused[:3]}; placed on {[node_of(b) for b in made]}"
    finally:
        delete_all(cluster, [first])


def test_a_driver_no_node_offers_is_refused_naming_it(cluster):
    a = cluster["n2"].create({"image": "python", "driver": "vm"}, timeout=120)
    assert a.status in (400, 503), a
    assert "vm" in a.json["error"]["message"], a
    for node in ("n2", "n3", "n4"):
        assert cluster[node].load()["boxes"] == 0


def test_a_create_goes_to_a_node_that_offers_its_driver(codebox_bin):
    with Cluster(codebox_bin, nodes=("n2", "n3"),
                extra={"n2": ["--drivers", "jail"], "n3": ["--drivers", "jail,vm"]}) as c:
        assert c["n2"].load()["drivers"] == ["jail"]
        assert sorted(c["n3"].load()["drivers"]) == ["jail", "vm"]
        a = c["n2"].create({"image": "python", "driver": "vm"}, timeout=300)
        # Placement is decided before the box starts: the answer comes from n3 whether or not
        # a vm box can start on this host (without kvm it cannot, and fails fast).
        assert a.node == "n3", f"a vm create at n2 (jail only) was not placed on n3: {a}"
        if a.status == 201:
            box = a.json["id"]
            assert node_of(box) == "n3", box
            e = c["n2"].exec(box, ["uname", "-s"])
            assert e.status == 200 and e.json["stdout"] == "Linux\n", e
            assert c["n2"].call("DELETE", f"/v1/boxes/{box}").status == 204
        else:
            print(f"a vm box does not start on this host; placed on n3 all the same: {a}")
            assert 400 <= a.status < 600 and a.error_code, a
        # a jail create at n2 stays on n2
        a = c["n2"].create()
        assert a.status == 201 and node_of(a.json["id"]) == "n2", a
        assert c["n2"].call("DELETE", f"/v1/boxes/{a.json['id']}").status == 204


def test_a_python_box_placed_on_a_peer_is_lost_with_it(cluster):
    import codebox

    n2 = cluster["n2"]
    made = []
    try:
        for _ in range(2):
            a = n2.create()
            assert a.status == 201 and node_of(a.json["id"]) == "n2", a
            made.append(a.json["id"])
        def own_boxes(n):  # only the node's own: a plain GET /v1/boxes lists every node's
            return {b["id"] for b in cluster[n].call("GET", "/v1/boxes?scope=node").json["boxes"]}

        before = {n: own_boxes(n) for n in ("n3", "n4")}
        base = f"http://{n2.address}:{cluster.port}"
        box = codebox.SyncCodeBox(server=base, token=cluster.token, **BOX)
        box.start()
        try:
            assert box.run("print('via n2')").strip() == "via n2"
            now = {n: own_boxes(n) for n in ("n3", "n4")}
            new = {n: now[n] - before[n] for n in now}
            holder = [n for n in new if new[n]]
            assert len(holder) == 1 and len(new[holder[0]]) == 1, new
            cluster[holder[0]].kill9()
            with pytest.raises(codebox.BoxLostError) as lost:
                box.run("print(1)")
            assert lost.value.code == "box_lost", lost.value
            assert holder[0] in str(lost.value), lost.value
            assert isinstance(lost.value, codebox.BoxError)
        finally:
            try:
                box.close()
            except codebox.BoxError:
                pass
    finally:
        for b in made:
            n2.call("DELETE", f"/v1/boxes/{b}")
