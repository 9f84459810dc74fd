"""Three replicas with static peers (`--peers 127.0.0.2:P,127.0.0.3:P,127.0.0.4:P`): a box
made on one node is used through the others (exec, a streamed exec, files), deleted through a
third, and then is `not_found` (not `box_lost`) everywhere; the Python module works against
one replica on a box another replica is then asked about."""
import hashlib
import http.client
import json
import os
import socket
import subprocess
import time

import pytest

from replicas import (BOX, Cluster, call, free_port, node_of, replica_env, stop_process,
                      wait_until)


@pytest.fixture(scope="module")
def cluster(codebox_bin):
    with Cluster(codebox_bin, peers_mode="static") as c:
        yield c


def test_status_and_load_name_the_node_and_its_peers(cluster):
    cluster.wait_peers()
    for node, r in cluster.replicas.items():
        st = r.status()
        assert st["node"] == node, st
        assert isinstance(st["incarnation"], str) and len(st["incarnation"]) == 4, st
        peers = {p["node"]: p for p in st["peers"]}
        assert node not in peers, f"{node} lists itself among its peers: {st['peers']}"
        assert set(peers) == set(cluster.replicas) - {node}, st["peers"]
        for p in peers.values():
            assert p["address"] == f"{r.cluster[p['node']].address}:{cluster.port}", p
            assert p["state"] == "up", p
        load = r.load()
        assert load["node"] == node and load["incarnation"] == st["incarnation"], load
        for key in ("boxes", "max_boxes", "pool_ready", "cpu_pressure", "memory_pressure",
                    "memory_available_bytes", "drivers", "full", "busy", "score"):
            assert key in load, f"/v1/load lacks {key}: {load}"
        assert "jail" in load["drivers"] and load["full"] is False, load


def test_a_node_offers_vm_only_where_a_vm_box_starts(cluster):
    """Without --drivers a node offers vm only when /dev/kvm works: a node that offers it gets
    the vm creates of its peers, so a vm box must start there."""
    load = cluster["n4"].load()
    if "vm" not in load["drivers"]:
        a = cluster["n4"].create({"image": "python", "driver": "vm"}, timeout=300)
        if a.status == 201:
            cluster["n4"].call("DELETE", f"/v1/boxes/{a.json['id']}")
        assert a.status in (400, 503) and "vm" in a.json["error"]["message"], \
            f"n4 does not offer vm ({load['drivers']}), yet: {a}"
        return
    a = cluster["n4"].create({"image": "python", "driver": "vm"}, timeout=300)
    assert a.status == 201, f"n4 offers vm ({load['drivers']}) but a vm box does not start: {a}"
    assert cluster["n4"].call("DELETE", f"/v1/boxes/{a.json['id']}").status == 204


def test_load_needs_the_token(cluster):
    a = cluster["n2"].call("GET", "/v1/load", token=None, timeout=10)
    assert a.status == 401, a


def test_a_box_is_used_through_every_replica(cluster):
    n2, n3, n4 = cluster["n2"], cluster["n3"], cluster["n4"]
    made = n2.create()
    assert made.status == 201, made
    box = made.json["id"]
    assert box.endswith(".n2") and node_of(box) == "n2", box
    assert made.node == "n2", made.headers
    try:
        # exec through n3: forwarded to n2
        a = n3.exec(box, ["python3", "-c", "import socket; print(6 * 7)"])
        assert a.status == 200, a
        assert a.json["exit_code"] == 0 and a.json["stdout"] == "42\n", a
        assert a.node == "n2", a.headers

        # GET through n4, and the box listing of n2 has it
        a = n4.call("GET", f"/v1/boxes/{box}")
        assert a.status == 200 and a.json["id"] == box and a.node == "n2", a
        listed = n2.call("GET", "/v1/boxes").json["boxes"]
        assert box in [b["id"] for b in listed], listed

        # without the token, the replica that receives the request refuses it
        a = n3.call("GET", f"/v1/boxes/{box}", token=None)
        assert a.status == 401, a

        # nor does the forwarding header stand in for a token
        a = n2.call("GET", f"/v1/boxes/{box}", token=None,
                    headers={"X-Codebox-Forwarded-By": "n3"})
        assert a.status == 401, a

        # a streamed exec through n4: events in order, as they come
        script = "for i in 1 2 3 4 5; do echo line$i; sleep 0.5; done; echo end >&2"
        status, headers, events = n4.stream(f"/v1/boxes/{box}/exec",
                                            {"argv": ["sh", "-c", script]}, timeout=60)
        assert status == 200, events
        assert headers.get("x-codebox-node") == "n2", headers
        assert headers.get("content-type", "").startswith("text/event-stream"), headers
        names = [e[1] for e in events]
        assert names[-1] == "done", events
        out = [e for e in events if e[1] == "stdout"]
        text = "".join(e[2]["text"] for e in out)
        assert text == "".join(f"line{i}\n" for i in range(1, 6)), events
        assert "".join(e[2]["text"] for e in events if e[1] == "stderr") == "end\n", events
        done = events[-1]
        # `done` carries no output: it came whole in the events (docs/server.md, Streaming)
        assert done[2]["exit_code"] == 0 and done[2]["stdout"] == "", done
        # incremental: the first line arrives well before the last (2 s of sleeps between)
        first, last = out[0][0], done[0]
        when = [(round(e[0], 2), e[1]) for e in events]
        assert last - first >= 1.5, f"the events came in one burst: {when}"
        times = [e[0] for e in events]
        assert times == sorted(times)

        # files: up through n3, down through n4, byte-exact (every byte value, ~1 MiB)
        blob = bytes(range(256)) * 16 + os.urandom(1 << 20) + b"\x00\r\n\xff"
        a = n3.call("PUT", f"/v1/boxes/{box}/files?path=data/blob.bin", raw_body=blob)
        assert a.status == 204, a
        assert a.node == "n2", a.headers
        a = n4.call("GET", f"/v1/boxes/{box}/files?path=data/blob.bin")
        assert a.status == 200, a
        assert a.node == "n2", a.headers
        assert len(a.body) == len(blob) and a.body == blob, \
            f"{len(a.body)} bytes back of {len(blob)}"
        # and the box itself holds those bytes
        a = n2.exec(box, ["sha256sum", "data/blob.bin"])
        assert a.json["stdout"].split()[0] == hashlib.sha256(blob).hexdigest(), a
        a = n4.call("GET", f"/v1/boxes/{box}/files?path=data/none")
        assert a.status == 404 and a.error_code == "not_found", a
    finally:
        deleted = n4.call("DELETE", f"/v1/boxes/{box}")
    assert deleted.status == 204, deleted
    for r in (n2, n3, n4):
        a = r.call("GET", f"/v1/boxes/{box}")
        assert a.status == 404, (r.node, a)
        assert a.error_code == "not_found", f"through {r.node}: {a} (a deleted box is not lost)"
    a = n3.exec(box, ["true"])
    assert a.status == 404 and a.error_code == "not_found", a


def test_a_box_of_a_peer_is_found_right_after_the_start(codebox_bin):
    """n3 starts, then n2; a box made on n2 at once is used through n3 at once. n3's first
    look at its peers came before n2 listened: the id naming a node n3 does not know must make
    it look again (the spec: box_lost only "after a fresh lookup"), not answer box_lost for a
    box that lives."""
    c = Cluster(codebox_bin, nodes=("n2", "n3"))
    try:
        c["n3"].start().wait_ready()
        c["n2"].start().wait_ready()
        made = c["n2"].create()
        assert made.status == 201, made
        box = made.json["id"]
        a = c["n3"].exec(box, ["echo", "here"])
        assert a.status == 200 and a.json["stdout"] == "here\n", a
        assert c["n3"].call("DELETE", f"/v1/boxes/{box}").status == 204
    finally:
        c.close()


def test_an_id_of_an_unknown_node_is_box_lost(cluster):
    a = cluster["n3"].call("GET", "/v1/boxes/b-0123456789abcdef.nx")
    assert a.status == 404, a
    assert a.error_code == "box_lost", a
    assert "nx" in a.json["error"]["message"], a


def test_an_old_style_id_means_this_node(cluster):
    a = cluster["n3"].call("GET", "/v1/boxes/b-0123456789abcdef")
    assert a.status == 404 and a.error_code == "not_found", a


def test_a_forwarded_request_is_not_forwarded_again(cluster):
    made = cluster["n2"].create()
    assert made.status == 201, made
    box = made.json["id"]
    try:
        a = cluster["n3"].call("GET", f"/v1/boxes/{box}", timeout=30,
                               headers={"X-Codebox-Forwarded-By": "n4"})
        assert a.status != 200, f"n3 forwarded a request that carried X-Codebox-Forwarded-By: {a}"
        assert 400 <= a.status < 600, a
    finally:
        assert cluster["n2"].call("DELETE", f"/v1/boxes/{box}").status == 204


def test_the_python_module_uses_a_replica(cluster):
    import codebox

    base = f"http://{cluster['n3'].address}:{cluster.port}"
    with codebox.SyncCodeBox(server=base, token=cluster.token, **BOX) as box:
        assert box.run("print(6 * 7)").strip() == "42"
        box.files.write("/work/hello.txt", b"from python\x00\xff")
        ids = [b["id"] for b in cluster["n3"].call("GET", "/v1/boxes?scope=node").json["boxes"]]
        assert len(ids) == 1 and ids[0].endswith(".n3"), ids
        # the box the module made answers through another replica
        a = cluster["n2"].exec(ids[0], ["cat", "/work/hello.txt"])
        assert a.status == 200 and a.node == "n3", a
        a = cluster["n4"].call("GET", f"/v1/boxes/{ids[0]}/files?path=/work/hello.txt")
        assert a.body == b"from python\x00\xff", a
    a = cluster["n2"].call("GET", f"/v1/boxes/{ids[0]}")
    assert a.status == 404 and a.error_code == "not_found", a
    assert issubclass(codebox.BoxLostError, codebox.BoxError)


def test_a_bad_node_name_is_refused_at_start(codebox_bin):
    for bad in ("-n2", "n2-", "N2", "n_2", "x" * 64, ""):
        r = subprocess.run([codebox_bin, "serve", "--listen", f"127.0.0.6:{free_port()}",
                            "--node", bad], capture_output=True, text=True, timeout=30,
                           env=replica_env(), stdin=subprocess.DEVNULL)
        assert r.returncode == 2, (bad, r.returncode, r.stderr)
        assert "--node" in r.stderr and "node name" in r.stderr, (bad, r.stderr)


@pytest.mark.parametrize("kubernetes", [False, True])
def test_the_default_node_name(codebox_bin, kubernetes):
    """Without --node: $POD_IP in a Kubernetes pod, else the host name, lower-cased, other
    characters as '-'."""
    env = replica_env()
    if kubernetes:
        env.update(KUBERNETES_SERVICE_HOST="10.0.0.1", POD_IP="10.244.1.7")
        expected = "10.244.1.7"
    else:
        expected = "".join(c if c.isalnum() or c in ".-" else "-"
                           for c in socket.gethostname().lower())
    port = free_port()
    proc = subprocess.Popen([codebox_bin, "serve", "--listen", f"127.0.0.6:{port}"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, text=True)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                a = call("127.0.0.6", port, "GET", "/v1/status", timeout=2)
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, proc.stdout.read()
                time.sleep(0.1)
        assert a.status == 200 and a.json["node"] == expected, a
        assert a.json["peers"] == [], a
    finally:
        stop_process(proc)


@pytest.mark.parametrize("via", ["n2", "n3"])
@pytest.mark.parametrize("events", [True, False], ids=["stream", "plain"])
def test_a_client_that_hangs_up_stops_the_work(cluster, via, events):
    """docs/server.md: a client that goes away mid-request stops the work (the exec's processes
    are killed within about 50 ms). Through n3 the request is forwarded to n2, the box's node:
    the hang-up must reach n2 as well, also while the exec prints nothing."""
    made = cluster["n2"].create()
    assert made.status == 201, made
    box = made.json["id"]
    try:
        script = ("echo start; i=0; while [ $i -lt 120 ]; do sleep 0.25; i=$((i+1)); "
                  "echo $i > /work/tick; done")
        headers = {"Authorization": f"Bearer {cluster.token}",
                   "Content-Type": "application/json"}
        if events:
            headers["Accept"] = "text/event-stream"
        conn = http.client.HTTPConnection(cluster[via].address, cluster.port, timeout=30)
        conn.request("POST", f"/v1/boxes/{box}/exec",
                     body=json.dumps({"argv": ["sh", "-c", script]}), headers=headers)
        if events:  # hang up once the stream is under way
            resp = conn.getresponse()
            deadline = time.monotonic() + 30
            while b"start" not in resp.readline() and time.monotonic() < deadline:
                pass
        else:
            wait_until(lambda: cluster["n2"].exec(box, ["test", "-e", "/work/tick"])
                       .json["exit_code"] == 0, 30, interval=0.1)
        conn.sock.shutdown(socket.SHUT_RDWR)
        conn.close()

        def tick():
            return cluster["n2"].exec(box, ["cat", "/work/tick"]).json["stdout"].strip()
        time.sleep(2)
        first = tick()
        time.sleep(1.5)
        later = tick()
        assert later == first, \
            f"the exec went on after its client (through {via}) hung up: tick {first}, then {later}"
    finally:
        assert cluster["n2"].call("DELETE", f"/v1/boxes/{box}").status == 204


def test_the_cli_uses_a_replica(cluster, codebox_bin):
    """`codebox exec --server` makes a box on a replica (its id has the node), runs, and
    destroys it; nothing is left on the node."""
    env = replica_env()
    env["CODEBOX_TOKEN"] = cluster.token
    r = subprocess.run([codebox_bin, "exec", "--server",
                        f"http://{cluster['n3'].address}:{cluster.port}", "--image", "python",
                        "--", "echo", "hi"], capture_output=True, text=True, timeout=120,
                       env=env, stdin=subprocess.DEVNULL)
    left = cluster["n3"].call("GET", "/v1/boxes").json["boxes"]
    for box in left:
        cluster["n3"].call("DELETE", f"/v1/boxes/{box['id']}")
    assert r.returncode == 0 and r.stdout == "hi\n", (r.returncode, r.stdout, r.stderr)
    assert left == [], f"the CLI left a box on n3: {left}"


def test_a_63_character_node_name_works_with_the_python_module(codebox_bin):
    """The longest node name makes an 82-character id; the Python module takes it."""
    import codebox

    node = ("n" + "0123456789." * 6)[:62] + "z"
    assert len(node) == 63
    port = free_port()
    proc = subprocess.Popen([codebox_bin, "serve", "--listen", f"127.0.0.6:{port}", "--node",
                             node, "--driver", "jail"], env=replica_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, text=True)
    try:
        ready = wait_until(lambda: _answers("127.0.0.6", port), 30, interval=0.1)
        assert ready, proc.stdout.read() if proc.poll() is not None else "not ready"
        with codebox.SyncCodeBox(server=f"http://127.0.0.6:{port}", image="python",
                                 driver="jail") as box:
            assert box.run("print(6 * 7)").strip() == "42"
            ids = [b["id"] for b in call("127.0.0.6", port, "GET", "/v1/boxes").json["boxes"]]
            assert len(ids) == 1 and ids[0].endswith("." + node) and len(ids[0]) == 82, ids
    finally:
        stop_process(proc)


def _answers(address, port):
    try:
        return call(address, port, "GET", "/healthz", timeout=2).status == 200
    except OSError:
        return False


def test_an_mcp_session_is_served_through_any_replica(cluster):
    """An MCP session lives on the node that answered initialize (its Mcp-Session-Id ends in
    .<node>); its later requests may reach any replica, as behind a load balancer."""
    accept = {"Accept": "application/json, text/event-stream"}

    def rpc(node, message, session=None):
        headers = dict(accept)
        if session:
            headers["Mcp-Session-Id"] = session
            headers["MCP-Protocol-Version"] = "2025-06-18"
        return cluster[node].call("POST", "/mcp", message, headers=headers, timeout=120)

    init = rpc("n2", {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                      "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                                 "clientInfo": {"name": "cluster-test", "version": "1"}}})
    assert init.status == 200, init
    session = init.headers.get("mcp-session-id", "")
    assert session.endswith(".n2"), init
    assert rpc("n3", {"jsonrpc": "2.0", "method": "notifications/initialized"},
               session).status == 202
    first = rpc("n3", {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                       "params": {"name": "run_python", "arguments": {"code": "x = 6 * 7"}}},
                session)
    assert first.status == 200 and first.node == "n2", first
    second = rpc("n4", {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                        "params": {"name": "run_python", "arguments": {"code": "print(x)"}}},
                 session)
    assert second.status == 200 and second.node == "n2", second
    assert "42" in json.dumps(second.json["result"]), second  # the same session's variables
    ended = cluster["n4"].call("DELETE", "/mcp", headers={"Mcp-Session-Id": session})
    assert ended.status == 204, ended
    gone = rpc("n3", {"jsonrpc": "2.0", "id": 4, "method": "tools/list"}, session)
    assert gone.status == 404, gone


def test_the_box_list_of_any_replica_shows_every_node_s_boxes(cluster):
    made = [cluster["n2"].create().json["id"], cluster["n3"].create().json["id"]]
    try:
        listed = cluster["n4"].call("GET", "/v1/boxes")
        assert listed.status == 200, listed
        ids = [b["id"] for b in listed.json["boxes"]]
        assert sorted(i for i in ids if i in made) == sorted(made), listed
        assert "unreachable" not in listed.json, listed
        own = cluster["n4"].call("GET", "/v1/boxes?scope=node")
        assert own.status == 200 and all(b["id"].endswith(".n4") for b in own.json["boxes"]), own
        bad = cluster["n4"].call("GET", "/v1/boxes?scope=galaxy")
        assert bad.status == 400 and "scope" in bad.json["error"]["message"], bad
    finally:
        for box in made:
            assert cluster["n4"].call("DELETE", f"/v1/boxes/{box}").status == 204
