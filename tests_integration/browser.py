"""A `$BROWSER` stand-in for OAuth tests: it opens the authorization URL and follows the
redirects back to the relay's loopback callback, as a user's browser would after approving."""

import sys
import urllib.request

if __name__ == "__main__":
    with urllib.request.urlopen(sys.argv[-1], timeout=30) as response:
        response.read()
