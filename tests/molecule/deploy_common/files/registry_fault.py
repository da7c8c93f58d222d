#!/usr/bin/env python
"""A registry that fails on demand, in front of the real one (the fault tests' registry faults).

A stand-in, labelled as such: the real registry cannot answer 5xx or vanish in the middle of a
pull on demand, and the other scenarios pull from it at the same time. Every answer it does give
is the real registry's.

  registry_fault.py --listen 127.0.0.1:5998 --upstream http://172.30.99.1:5000 --mode MODE

MODE:
  pass      forward every GET and HEAD to the upstream registry and relay its answer
  503       answer every request 503 Service Unavailable, in the registry API's error format
  vanish    forward, but cut the first blob larger than --cut-bytes after that many bytes (the
            connection closes mid-body), then exit: the registry is gone in the middle of a pull

Docker pulls over plain HTTP from a registry on 127.0.0.0/8 without configuration, so it runs on
the pulling host itself. One line per request goes to stdout. Standard library only: it runs on
a bare systemd test host.
"""
import argparse
import http.client
import json
import os
import sys
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-authorization",
              "proxy-authenticate"}
CHUNK = 64 * 1024


def log(message):
    print(message, flush=True)


class Fault(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "registry-fault"

    def log_message(self, *args):  # pylint: disable=arguments-differ
        pass

    def do_HEAD(self):  # pylint: disable=invalid-name
        self.answer(send_body=False)

    def do_GET(self):  # pylint: disable=invalid-name
        self.answer(send_body=True)

    def answer(self, send_body):
        config = self.server.config
        if config.mode == "503":
            body = json.dumps({"errors": [{"code": "UNAVAILABLE", "message": "registry fault: 503"}]}).encode()
            log("%s %s -> 503 (fault)" % (self.command, self.path))
            self.send_response(503)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if send_body:
                self.wfile.write(body)
            return
        upstream = urllib.parse.urlsplit(config.upstream)
        connection = http.client.HTTPConnection(upstream.hostname, upstream.port or 80, timeout=60)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP and k.lower() != "host"}
        connection.request(self.command, self.path, headers=headers)
        reply = connection.getresponse()
        length = int(reply.getheader("Content-Length") or 0)
        cut = (config.mode == "vanish" and send_body and "/blobs/" in self.path and reply.status == 200
               and length > config.cut_bytes and self.server.take_cut())
        log("%s %s -> %d (%d bytes)%s" % (self.command, self.path, reply.status, length,
                                          " cut after %d bytes, then gone" % config.cut_bytes if cut else ""))
        self.send_response(reply.status)
        for key, value in reply.getheaders():
            if key.lower() not in HOP_BY_HOP:
                self.send_header(key, value)
        self.end_headers()
        sent = 0
        while send_body:
            data = reply.read(CHUNK if not cut else min(CHUNK, config.cut_bytes - sent))
            if not data:
                break
            self.wfile.write(data)
            sent += len(data)
            if cut and sent >= config.cut_bytes:
                self.wfile.flush()
                self.connection.close()
                os._exit(0)  # the registry vanishes: nothing listens on the port any more
        connection.close()


class FaultServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address, config):
        super().__init__(address, Fault)
        self.config = config
        self.cut_taken = False
        self.lock = threading.Lock()

    def take_cut(self):
        with self.lock:
            taken, self.cut_taken = self.cut_taken, True
            return not taken


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--listen", default="127.0.0.1:5998", help="HOST:PORT to listen on")
    parser.add_argument("--upstream", required=True, help="the real registry, http://HOST:PORT")
    parser.add_argument("--mode", choices=["pass", "503", "vanish"], default="pass")
    parser.add_argument("--cut-bytes", type=int, default=1024 * 1024,
                        help="vanish: bytes of the first larger blob sent before the cut")
    args = parser.parse_args()
    host, port = args.listen.rsplit(":", 1)
    server = FaultServer((host, int(port)), args)
    log("registry fault (%s) on %s in front of %s" % (args.mode, args.listen, args.upstream))
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
