"""How the browser tests drive the GitHub they run against: the Swift simulator (`github-sim`).

SimulatorControl gives `url`, `rate_limit(seconds)`, `reset()` and `hostile_query` (a query whose
results carry HTML and script in their descriptions).
"""

import json
import re
import subprocess
import urllib.request


class SimulatorControl:
    def __init__(self, url, rate_limit, reset, hostile_query, process=None):
        self.url = url
        self._rate_limit = rate_limit  # seconds -> (path, JSON body)
        self._reset = reset
        self.hostile_query = hostile_query
        self._process = process

    @classmethod
    def start(cls, binary, logs):
        """Starts `github-sim --port 0` and reads the port from its banner line
        (`github-sim: N repositories on http://127.0.0.1:PORT`). Its real per-minute budget is raised
        so that only the tests that ask for a rate limit get one."""
        logs.mkdir(parents=True, exist_ok=True)
        process = subprocess.Popen([str(binary), "--port", "0", "--rate-limit", "100000"],
                                   stdout=subprocess.PIPE, stderr=open(logs / "github-sim.log", "wb"), text=True)
        for line in process.stdout:
            match = re.search(r"repositories on (http://\S+)", line)
            if match:
                break
        else:
            raise RuntimeError(f"github-sim exited ({process.wait()}) without saying its address")
        # Secondary rate limit: 429 + Retry-After, which the server turns into error.kind "rateLimited".
        return cls(match.group(1),
                   lambda seconds: ("/_sim/faults", {"secondaryRateLimit": True, "retryAfterSeconds": seconds}),
                   ("/_sim/reset", {}), "alert", process=process)

    def rate_limit(self, seconds):
        """Makes every search answer GitHub's "rate limit exceeded" with Retry-After `seconds`."""
        self._post(*self._rate_limit(seconds))

    def reset(self):
        """Clears every fault."""
        self._post(*self._reset)

    def stop(self):
        if self._process and self._process.poll() is None:
            self._process.terminate()
            self._process.wait(timeout=10)

    def _post(self, path, body):
        request = urllib.request.Request(self.url + path, data=json.dumps(body).encode(), method="POST",
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=5) as response:
            assert response.status < 300, f"simulator control {path} answered {response.status}"
