"""A stand-in debuginfod for the server's tests: the HTTP protocol's
/buildid/HEX/executable for the ELF files given as HEX=PATH, 404 for the
rest, every request logged (one path per line) after DELAY seconds.

  debuginfod_standin.py PORT DELAY LOG [HEX=PATH ...]
"""
import http.server
import sys
import time

port, delay, log = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
files = dict(a.split("=", 1) for a in sys.argv[4:])


class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        time.sleep(delay)
        with open(log, "a") as f:
            f.write(self.path + "\n")
        parts = self.path.split("/")
        path = files.get(parts[2]) if len(parts) == 4 and parts[3] == "executable" else None
        data = open(path, "rb").read() if path else b""
        self.send_response(200 if path else 404)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *a):
        pass


http.server.ThreadingHTTPServer(("127.0.0.1", port), H).serve_forever()
