#!/usr/bin/python3
"""Stand-in for the on-call end of Alertmanager: a webhook receiver that records every notification (stdlib only).

Alertmanager's webhook_config POSTs ``{"version": "4", "status", "receiver", "groupLabels", "alerts": [{"status",
"labels", "annotations", "startsAt", "endsAt", ...}], ...}`` (Alertmanager 0.25 docs, "webhook_config"). Each
alert of each notification is kept, numbered in arrival order, as ``{"n", "received_at", "status", "alertname",
"node", "labels", "startsAt"}``; ``GET /alerts?since=N`` returns those numbered above N (``GET /alerts/count`` the
highest number), so a test reads what arrived after a point in time. Also appended to ``--log`` as JSON lines.

CLI: ``alert_receiver.py [--bind 127.0.0.1] [--port 9095] [--log FILE]``
"""

import argparse
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

LOCK = threading.Lock()
RECEIVED = []


def record(payload, log=None, now=None):
    """Flatten one webhook notification into RECEIVED; returns the new entries."""
    now = time.time() if now is None else now
    added = []
    with LOCK:
        for alert in payload.get("alerts") or []:
            labels = alert.get("labels") or {}
            entry = {"n": len(RECEIVED) + 1, "received_at": now, "status": alert.get("status"),
                     "alertname": labels.get("alertname", ""), "node": labels.get("node", ""), "labels": labels,
                     "startsAt": alert.get("startsAt")}
            RECEIVED.append(entry)
            added.append(entry)
        if log and added:
            with open(log, "a") as fh:
                for entry in added:
                    fh.write(json.dumps(entry) + "\n")
    return added


class Handler(BaseHTTPRequestHandler):
    log_file = None

    def _send(self, code, body):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):  # noqa: N802 - http.server's name
        if urlparse(self.path).path != "/alerts":
            return self._send(404, {"error": "POST /alerts"})
        try:
            payload = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        except ValueError:
            return self._send(400, {"error": "not JSON"})
        self._send(200, {"recorded": len(record(payload, self.log_file))})

    def do_GET(self):  # noqa: N802
        url = urlparse(self.path)
        with LOCK:
            if url.path == "/alerts/count":
                return self._send(200, {"count": len(RECEIVED)})
            if url.path == "/alerts":
                since = int((parse_qs(url.query).get("since") or ["0"])[0])
                return self._send(200, [e for e in RECEIVED if e["n"] > since])
        self._send(404, {"error": "GET /alerts or /alerts/count"})

    def log_message(self, *args):
        pass


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bind", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=9095)
    ap.add_argument("--log", default=None)
    args = ap.parse_args(argv)
    Handler.log_file = args.log
    ThreadingHTTPServer((args.bind, args.port), Handler).serve_forever()


if __name__ == "__main__":
    main()
