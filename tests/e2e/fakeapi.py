#!/usr/bin/env python3
"""A minimal fake Kubernetes API server over plain HTTP on loopback, for tests of
drainer's read-only verbs that need no real control plane (test-guard-shared.sh).
It serves one cordoned Node NODE, one claim-holding pod on it (namespace
other-ns) and the ResourceClaim reserved for it (allocated on the node), no
ResourceSlice: lists, and watches that stay open sending nothing. Every request
is appended to --log as one JSON line {method, path, query}. Anything else: 404.
Bounded: exits after --max-seconds.
"""
import argparse
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit


def objects(node):
    pod_uid = "11111111-1111-1111-1111-111111111111"
    return {
        "/api/v1/nodes": ("NodeList", "v1", [{
            "metadata": {"name": node, "uid": "22222222-2222-2222-2222-222222222222", "resourceVersion": "10"},
            "spec": {"unschedulable": True},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]},
        }]),
        "/api/v1/pods": ("PodList", "v1", [{
            "metadata": {"name": "secret-pod", "namespace": "other-ns", "uid": pod_uid, "resourceVersion": "11"},
            "spec": {"nodeName": node, "resourceClaims": [{"name": "gpu", "resourceClaimName": "secret-claim"}],
                     "containers": [{"name": "c", "image": "x"}]},
            "status": {"phase": "Running", "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "secret-claim"}]},
        }]),
        "/apis/resource.k8s.io/v1/resourceclaims": ("ResourceClaimList", "resource.k8s.io/v1", [{
            "metadata": {"name": "secret-claim", "namespace": "other-ns", "uid": "33333333-3333-3333-3333-333333333333",
                         "resourceVersion": "12"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}},
            "status": {
                "allocation": {
                    "devices": {"results": [{"request": "gpu", "driver": "gpu.example.com", "pool": node, "device": "gpu-0"}]},
                    "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                        {"key": "metadata.name", "operator": "In", "values": [node]}]}]},
                },
                "reservedFor": [{"resource": "pods", "name": "secret-pod", "uid": pod_uid}],
            },
        }]),
        "/apis/resource.k8s.io/v1/resourceslices": ("ResourceSliceList", "resource.k8s.io/v1", []),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--node", required=True)
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--max-seconds", type=float, default=120)
    a = ap.parse_args()
    objs = objects(a.node)
    lock = threading.Lock()
    stop = threading.Event()

    class H(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def send_json(self, code, body):
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            u = urlsplit(self.path)
            q = {k: v[0] for k, v in parse_qs(u.query).items()}
            with lock, open(a.log, "a") as f:
                f.write(json.dumps({"method": "GET", "path": u.path, "query": q}) + "\n")
            if u.path not in objs:
                return self.send_json(404, {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                            "reason": "NotFound", "code": 404, "message": "not found"})
            kind, api, items = objs[u.path]
            if q.get("watch") in ("1", "true"):
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                self.wfile.flush()
                stop.wait(min(float(q.get("timeoutSeconds", 60)), a.max_seconds))
                try:
                    self.wfile.write(b"0\r\n\r\n")
                except OSError:
                    pass
                self.close_connection = True
                return
            self.send_json(200, {"kind": kind, "apiVersion": api, "metadata": {"resourceVersion": "100"},
                                 "items": items})

    srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
    srv.daemon_threads = True
    with open(a.port_file, "w") as f:
        f.write(str(srv.server_address[1]))
    threading.Timer(a.max_seconds, lambda: (stop.set(), srv.shutdown())).start()
    srv.serve_forever()
    stop.set()


if __name__ == "__main__":
    sys.exit(main())
