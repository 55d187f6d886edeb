"""Small helpers shared by the browser-test fixtures: free ports and waiting for a server to answer."""

import socket
import time
import urllib.error
import urllib.request


def free_port():
    """A port that was free a moment ago (the servers take ports on the command line)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_http(url, status=200, timeout=30.0, process=None):
    """Polls `url` until it answers `status` (the server's own readiness signal) or times out."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"process exited with {process.returncode} before {url} was ready")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == status:
                    return
                last = response.status
        except urllib.error.HTTPError as error:
            last = error.code
        except OSError as error:
            last = error
        time.sleep(0.05)
    raise TimeoutError(f"{url} not ready after {timeout}s (last: {last})")
