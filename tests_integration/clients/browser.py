"""A `$BROWSER` stand-in for OAuth tests: it opens the authorization URL and follows the
redirects back to the relay's loopback callback, keeping cookies as a browser does (login
and consent steps of real providers rely on them), as a user's browser would after they
approve."""

import sys
import urllib.request
from http.cookiejar import CookieJar

if __name__ == "__main__":
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(CookieJar()))
    with opener.open(sys.argv[-1], timeout=30) as response:
        response.read()
