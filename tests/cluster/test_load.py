"""A bounded load run across three replicas: 6 client threads make, use and delete 20 boxes,
60 execs in all (and a file up and down each) under a time cap. Box n is created through
replica n mod 3, every other request goes through a replica picked at random (seeded by n).
Every request succeeds, and the boxes spread over the three nodes."""
import random
import threading
import time

import pytest

from replicas import Cluster, node_of

THREADS = 6
BOXES = 20
EXECS_PER_BOX = 3  # 60 execs in all
TIME_CAP_S = 300


@pytest.fixture(scope="module")
def cluster(codebox_bin):
    with Cluster(codebox_bin, peers_mode="static") as c:
        yield c


def test_a_bounded_load_run_succeeds_and_spreads(cluster):
    nodes = list(cluster.replicas)
    deadline = time.monotonic() + TIME_CAP_S
    lock = threading.Lock()
    todo = list(range(BOXES))
    failures, placed, execs, forwarded = [], [], [0], [0]

    def client():
        while time.monotonic() < deadline:
            with lock:
                if not todo:
                    return
                n = todo.pop()
            rng = random.Random(n)
            try:
                a = cluster[nodes[n % len(nodes)]].create(timeout=120)
                if a.status != 201:
                    failures.append(f"create: {a}")
                    continue
                box = a.json["id"]
                with lock:
                    placed.append(node_of(box))
                for i in range(EXECS_PER_BOX):
                    via = cluster[rng.choice(nodes)]
                    e = via.exec(box, ["python3", "-c", f"print({n} * {i})"], timeout=120)
                    if e.status != 200 or e.json["stdout"] != f"{n * i}\n" or \
                            e.node != node_of(box):
                        failures.append(f"exec {box} through {via.node}: {e}")
                    with lock:
                        execs[0] += 1
                        forwarded[0] += via.node != node_of(box)
                data = f"box {n}\n".encode() + bytes(range(256))
                up = cluster[rng.choice(nodes)].call(
                    "PUT", f"/v1/boxes/{box}/files?path=in.bin", raw_body=data, timeout=60)
                down = cluster[rng.choice(nodes)].call(
                    "GET", f"/v1/boxes/{box}/files?path=in.bin", timeout=60)
                if up.status != 204 or down.status != 200 or down.body != data:
                    failures.append(f"files of {box}: {up} {down}")
                d = cluster[rng.choice(nodes)].call("DELETE", f"/v1/boxes/{box}", timeout=60)
                if d.status != 204:
                    failures.append(f"delete {box}: {d}")
            except Exception as e:  # noqa: BLE001  (a failure of the run, reported below)
                failures.append(f"box {n}: {e!r}")

    threads = [threading.Thread(target=client) for _ in range(THREADS)]
    start = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=max(1, deadline - time.monotonic()) + 30)
    took = time.monotonic() - start
    assert not any(t.is_alive() for t in threads), f"the load run passed its {TIME_CAP_S} s cap"
    assert not failures, failures[:10]
    assert execs[0] == BOXES * EXECS_PER_BOX, (execs, todo)
    counts = {n: placed.count(n) for n in nodes}
    print(f"{execs[0]} execs ({forwarded[0]} forwarded) on {BOXES} boxes in {took:.1f} s; "
          f"boxes per node {counts}")
    assert all(counts[n] > 0 for n in nodes), counts
    assert forwarded[0] > 0
    for n in nodes:
        assert cluster[n].load()["boxes"] == 0, f"{n} still holds boxes after the run"
