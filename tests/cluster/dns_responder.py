"""A tiny DNS responder for the cluster tests: UDP on one loopback address, it answers A queries
for one name with a fixed list of IPv4 addresses and NXDOMAIN for every other name (AAAA and
other types of the name: an empty NOERROR answer, so glibc's getaddrinfo goes on with the A
records). Queries are parsed defensively: anything malformed is dropped, nothing it receives
can make it raise. Runs in a thread of the test process (`Responder`), or alone:

    python3 dns_responder.py 127.0.0.5 53 codebox-peers.test 127.0.0.2,127.0.0.3,127.0.0.4
"""
import socket
import struct
import sys
import threading

TYPE_A = 1
CLASS_IN = 1
MAX_LABELS = 64


def parse_question(packet):
    """(id, flags, qname as lower-case str, qtype, qclass, end offset of the question) of a
    query with exactly one question, or None when it is not such a packet."""
    if len(packet) < 12:
        return None
    qid, flags, qdcount, _an, _ns, _ar = struct.unpack("!HHHHHH", packet[:12])
    if flags & 0x8000 or qdcount != 1:  # a response, or not one question
        return None
    if (flags >> 11) & 0xF != 0:  # opcode other than QUERY
        return None
    labels = []
    i = 12
    total = 0
    while True:
        if i >= len(packet) or len(labels) > MAX_LABELS:
            return None
        n = packet[i]
        i += 1
        if n == 0:
            break
        if n & 0xC0:  # compression pointers have no place in a question
            return None
        label = packet[i:i + n]
        if len(label) != n:
            return None
        total += n + 1
        if total > 255:
            return None
        try:
            labels.append(label.decode("ascii").lower())
        except UnicodeDecodeError:
            return None
        i += n
    if i + 4 > len(packet):
        return None
    qtype, qclass = struct.unpack("!HH", packet[i:i + 4])
    return qid, flags, ".".join(labels), qtype, qclass, i + 4


def answer(packet, name, addresses):
    """The response to `packet`, or None to drop it."""
    q = parse_question(packet)
    if q is None:
        return None
    qid, flags, qname, qtype, qclass, end = q
    question = packet[12:end]
    rd = flags & 0x0100
    if qname.rstrip(".") != name:
        header = struct.pack("!HHHHHH", qid, 0x8400 | 0x0080 | rd | 3, 1, 0, 0, 0)  # NXDOMAIN
        return header + question
    records = b""
    count = 0
    if qtype == TYPE_A and qclass == CLASS_IN:
        for a in addresses:
            records += struct.pack("!HHHIH", 0xC00C, TYPE_A, CLASS_IN, 5, 4) + socket.inet_aton(a)
            count += 1
    header = struct.pack("!HHHHHH", qid, 0x8400 | 0x0080 | rd, 1, count, 0, 0)  # AA, RA
    return header + question + records


class Responder:
    """Serves in a daemon thread until close(); `queries` counts the answered ones."""

    def __init__(self, host, port, name, addresses):
        self.name = name.lower().rstrip(".")
        self.addresses = list(addresses)
        self.queries = 0
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, port))
        self.sock.settimeout(0.2)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self):
        while not self._stop.is_set():
            try:
                packet, peer = self.sock.recvfrom(4096)
            except socket.timeout:
                continue
            except OSError:
                return
            try:
                reply = answer(packet, self.name, self.addresses)
                if reply is not None:
                    self.sock.sendto(reply, peer)
                    self.queries += 1
            except Exception:  # noqa: BLE001  (hostile input never stops the responder)
                continue

    def close(self):
        self._stop.set()
        self._thread.join(timeout=5)
        self.sock.close()


if __name__ == "__main__":
    host, port, name, addrs = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4].split(",")
    r = Responder(host, port, name, addrs)
    try:
        r._thread.join()
    except KeyboardInterrupt:
        r.close()
