"""A small stand-in for GitHub's search API, used by the browser tests when the Swift simulator
(`github-sim`) is not built or lacks a switch a test needs (BROWSER_TEST_GITHUB=stub forces it).

GET /search/repositories answers in GitHub's wire format with deterministic repositories (query
`hostile` returns descriptions that are HTML/script); POST /_control/rate-limit?seconds=N makes every
search answer 403 "rate limit exceeded" for N seconds; POST /_control/reset clears faults.
One thread per request (ThreadingHTTPServer); the fault state is guarded by a lock.
"""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

TOTAL = 95
HOSTILE = [
    '<script>window.__xss = true</script>',
    '<img src=x onerror="window.__xss = true">',
    '"><svg onload="window.__xss = true"></svg>',
]


def repository(query, index):
    hostile = query.strip().lower().startswith("hostile")
    description = HOSTILE[index % len(HOSTILE)] if hostile else f"Repository {index} about {query}"
    name = f"repo-{index}"
    owner = f"owner{index % 7}"
    return {
        "id": 1000 + index,
        "name": name,
        "full_name": f"{owner}/{name}",
        "owner": {"login": owner, "id": 500 + index % 7,
                  "avatar_url": f"https://avatars.example.invalid/u/{500 + index % 7}?v=4"},
        "html_url": f"https://github.com/{owner}/{name}",
        "description": description,
        "language": ["Swift", "Python", None, "C"][index % 4],
        "stargazers_count": 100_000 // (index + 1),
        "forks_count": 5_000 // (index + 1),
        "topics": ["server", "swift"] if index % 3 == 0 else [],
        "updated_at": "2026-11-01T12:00:00Z",
    }


class Stub:
    """Runs the stub on 127.0.0.1:port (0 picks a free port) in a daemon thread."""

    def __init__(self, port=0):
        self.lock = threading.Lock()
        self.limited_until = 0.0
        self.requests = 0
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                url = urlparse(self.path)
                params = parse_qs(url.query)
                with stub.lock:
                    if url.path == "/_control/rate-limit":
                        stub.limited_until = time.time() + float(params.get("seconds", ["60"])[0])
                    elif url.path == "/_control/reset":
                        stub.limited_until = 0.0
                    else:
                        return self.reply(404, {"message": "Not Found"})
                self.reply(204, None)

            def do_GET(self):
                url = urlparse(self.path)
                if url.path != "/search/repositories":
                    return self.reply(404, {"message": "Not Found"})
                with stub.lock:
                    stub.requests += 1
                    limited = stub.limited_until - time.time()
                reset = int(time.time()) + 60
                if limited > 0:
                    reset = int(time.time() + limited) + 1
                    return self.reply(403, {"message": "API rate limit exceeded"}, {
                        "X-RateLimit-Limit": "30", "X-RateLimit-Remaining": "0",
                        "X-RateLimit-Reset": str(reset), "X-RateLimit-Resource": "search",
                        "Retry-After": str(int(limited) + 1)})
                params = parse_qs(url.query)
                query = params.get("q", [""])[0]
                page = int(params.get("page", ["1"])[0])
                per_page = int(params.get("per_page", ["30"])[0])
                start = (page - 1) * per_page
                items = [repository(query, i) for i in range(start, min(TOTAL, start + per_page))]
                headers = {"X-RateLimit-Limit": "30", "X-RateLimit-Remaining": "29",
                           "X-RateLimit-Reset": str(reset), "X-RateLimit-Resource": "search"}
                if start + per_page < TOTAL:
                    base = f"http://{self.headers.get('Host')}/search/repositories"
                    headers["Link"] = f'<{base}?q={query}&page={page + 1}&per_page={per_page}>; rel="next"'
                self.reply(200, {"total_count": TOTAL, "incomplete_results": False, "items": items}, headers)

            def reply(self, status, body, headers=None):
                data = b"" if body is None else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()
