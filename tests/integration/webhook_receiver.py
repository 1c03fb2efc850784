# A local Alertmanager-webhook receiver for the tests: python3 webhook_receiver.py
# PORT FILE appends each POST as one line "RECEIVED_UNIX_SECONDS BODY" (the
# body's newlines flattened), so a test can time alerts.  Answers 200.
import http.server
import sys
import time

port, path = int(sys.argv[1]), sys.argv[2]


class Receiver(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get('Content-Length', 0)))
        with open(path, 'ab') as f:
            f.write(b'%.3f ' % time.time() + body.replace(b'\n', b' ') + b'\n')
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


http.server.HTTPServer(('127.0.0.1', port), Receiver).serve_forever()
