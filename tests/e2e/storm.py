#!/usr/bin/env python3
"""Connection storms against an HTTP endpoint on loopback (used by
test-metrics-storm.sh). Opens raw TCP connections from a given loopback source
address and behaves badly on them, then reports, as one JSON line, how many the
server closed and how long that took. Bounded: at most --max-seconds, then it
closes what is left and reports it as still open.

kinds:
  short     connect, close at once (in waves of 100)
  idle      connect, send nothing, hold
  half      send half a request, hold
  big       send a 100 KiB header line; read the answer's status line
  slow      send half a request, then one byte a second (never idle)
  closing   hold n connections for 0.5 s and close them, then 40 half requests
            each closed as soon as sent (reports only how long it took)
"""
import argparse
import errno
import json
import selectors
import socket
import sys
import time


def connect(src, host, port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setblocking(False)
    s.bind((src, 0))
    try:
        s.connect((host, port))
    except BlockingIOError:
        pass
    return s


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kind", choices=["short", "idle", "half", "big", "slow", "closing"])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--src", default="127.0.0.2")
    ap.add_argument("-n", type=int, default=100)
    ap.add_argument("--max-seconds", type=float, default=40)
    a = ap.parse_args()
    for addr in (a.src, a.host):
        if not addr.startswith("127."):
            sys.exit("storm.py only targets and binds loopback addresses")

    t0 = time.monotonic()
    result = {"kind": a.kind, "n": a.n, "src": a.src}

    if a.kind == "short":
        done = 0
        while done < a.n:
            wave = [connect(a.src, a.host, a.port) for _ in range(min(100, a.n - done))]
            sel = selectors.DefaultSelector()
            for s in wave:
                sel.register(s, selectors.EVENT_WRITE)
            left, end = len(wave), time.monotonic() + 5
            while left and time.monotonic() < end:
                for key, _ in sel.select(0.5):
                    sel.unregister(key.fileobj)
                    left -= 1
            for s in wave:
                s.close()
            done += len(wave)
        result["seconds"] = round(time.monotonic() - t0, 3)
        print(json.dumps(result))
        return

    if a.kind == "closing":
        held = [connect(a.src, a.host, a.port) for _ in range(a.n)]
        time.sleep(0.5)
        for s in held:
            s.close()
        for _ in range(40):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((a.src, 0))
            s.settimeout(2)
            try:
                s.connect((a.host, a.port))
                s.send(b"GET /metrics HTTP/1.1\r\n")
            except OSError:
                pass  # turned away at the limit: fine
            s.close()
        result["seconds"] = round(time.monotonic() - t0, 3)
        print(json.dumps(result))
        return

    socks = [connect(a.src, a.host, a.port) for _ in range(a.n)]
    pending = {s: b"" for s in socks}  # what is still to be sent
    header = b"GET /metrics HTTP/1.1\r\nHost: storm\r\nX-Storm: "
    for s in socks:
        if a.kind in ("half", "slow"):
            pending[s] = header
        elif a.kind == "big":
            pending[s] = header + b"a" * (100 * 1024) + b"\r\n\r\n"
    open_ = set(socks)
    first = {}
    closed_at = []
    sel = selectors.DefaultSelector()
    for s in socks:
        sel.register(s, selectors.EVENT_READ | selectors.EVENT_WRITE)
    next_drip = time.monotonic() + 1
    while open_ and time.monotonic() - t0 < a.max_seconds:
        for key, ev in sel.select(0.2):
            s = key.fileobj
            if ev & selectors.EVENT_WRITE:
                if pending[s]:
                    try:
                        k = s.send(pending[s])
                        pending[s] = pending[s][k:]
                    except BlockingIOError:
                        pass
                    except OSError:
                        pending[s] = b""
                if not pending[s]:
                    sel.modify(s, selectors.EVENT_READ)
            if ev & selectors.EVENT_READ:
                try:
                    data = s.recv(65536)
                except BlockingIOError:
                    continue
                except OSError as e:
                    data = b"" if e.errno in (errno.ECONNRESET, errno.EPIPE, errno.ECONNREFUSED) else None
                    if data is None:
                        raise
                if data:
                    first.setdefault(s, data[:12].decode("latin-1"))
                    continue
                sel.unregister(s)
                open_.discard(s)
                closed_at.append(time.monotonic() - t0)
                s.close()
        if a.kind == "slow" and time.monotonic() >= next_drip:
            next_drip += 1
            for s in open_:
                try:
                    s.send(b"a")
                except OSError:
                    pass
    for s in open_:
        s.close()
    answers = {}
    for v in first.values():
        answers[v] = answers.get(v, 0) + 1
    result.update(
        closed_by_server=len(closed_at),
        still_open=len(open_),
        last_closed_after=round(max(closed_at), 3) if closed_at else None,
        answers=answers,
    )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
