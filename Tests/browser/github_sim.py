"""How the browser tests drive the GitHub they run against: the Swift simulator or github_stub.py.

SimulatorControl hides the difference: `url`, `rate_limit(seconds)`, `reset()` and `hostile_query`
(a query whose results carry HTML and script in their descriptions).
"""

import json
import subprocess
import urllib.request

from support import wait_for_port


class SimulatorControl:
    def __init__(self, url, rate_limit_path, reset_path, hostile_query, process=None, stub=None):
        self.url = url
        self._rate_limit_path = rate_limit_path
        self._reset_path = reset_path
        self.hostile_query = hostile_query
        self._process = process
        self._stub = stub

    @classmethod
    def for_stub(cls, stub):
        return cls(f"http://127.0.0.1:{stub.port}", "/_control/rate-limit?seconds={seconds}",
                   "/_control/reset", "hostile", stub=stub)

    @classmethod
    def start(cls, binary, port, logs):
        logs.mkdir(parents=True, exist_ok=True)
        log = open(logs / f"github-sim-{port}.log", "wb")
        process = subprocess.Popen([str(binary), "--port", str(port)], stdout=log, stderr=subprocess.STDOUT)
        wait_for_port(port, process)
        return cls(f"http://127.0.0.1:{port}", "/_control/rate-limit?seconds={seconds}", "/_control/reset",
                   "hostile", process=process)

    def rate_limit(self, seconds):
        """Makes every search answer GitHub's "rate limit exceeded" for `seconds`."""
        self._post(self._rate_limit_path.format(seconds=seconds))

    def reset(self):
        """Clears every fault."""
        self._post(self._reset_path)

    def stop(self):
        if self._process and self._process.poll() is None:
            self._process.terminate()
            self._process.wait(timeout=10)

    def _post(self, path):
        request = urllib.request.Request(self.url + path, data=json.dumps({}).encode(), method="POST",
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=5) as response:
            assert response.status < 300, f"simulator control {path} answered {response.status}"
