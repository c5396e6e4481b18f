"""A local HTTP server for e2e_images' fetched image URLs: python -m http.server's file serving of DIR on PORT
(127.0.0.1), plus /redirect (a 302 to /pic.png, which the worker must not follow) and /slow (answers after 6 s,
past the suite's --image-url-timeout). Exits when process PARENT does, so no test run leaves it behind.
  python tests/e2e/image_host.py DIR PORT PARENT"""
import functools
import http.server
import os
import sys
import threading
import time


class Handler(http.server.SimpleHTTPRequestHandler):
    def do_GET(self):
        if self.path == "/redirect":
            self.send_response(302)
            self.send_header("Location", "/pic.png")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if self.path == "/slow":
            time.sleep(6)
        return super().do_GET()

    def log_message(self, *args):
        pass


class Server(http.server.ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        pass  # the worker hangs up on bodies past its limit: expected, not worth a traceback


def watch(parent):
    while True:
        try:
            os.kill(parent, 0)
        except OSError:
            os._exit(0)
        time.sleep(0.5)


def main():
    root, port, parent = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    threading.Thread(target=watch, args=(parent,), daemon=True).start()
    server = Server(("127.0.0.1", port), functools.partial(Handler, directory=root))
    server.serve_forever()


if __name__ == "__main__":
    main()
