"""A `$BROWSER` stand-in for OAuth tests: it opens the authorization URL and follows the
redirects back to the client's loopback callback, keeping cookies as a browser does (login
and consent steps of real providers rely on them). When a page holds a consent form (a POST
form with a `decision` button, as `serve --enable-oauth` shows), it presses Allow, as the
user would: the hidden fields are sent back as they are."""

import sys
import urllib.error
import urllib.parse
import urllib.request
from html.parser import HTMLParser
from http.cookiejar import CookieJar


class ConsentForm(HTMLParser):
    def __init__(self):
        super().__init__()
        self.action = None
        self.fields = []
        self.approve = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "form" and (attrs.get("method") or "").lower() == "post":
            self.action = attrs.get("action")
        elif tag == "input" and attrs.get("type") == "hidden" and attrs.get("name"):
            self.fields.append((attrs["name"], attrs.get("value") or ""))
        elif tag == "button" and attrs.get("name") == "decision" and attrs.get("value") == "approve":
            self.approve = ("decision", "approve")


class StopAt(urllib.request.HTTPRedirectHandler):
    """Follows redirects as a browser does, except the one to the client's callback (which
    nothing listens on): that one is recorded."""

    def __init__(self, prefix: str):
        self.prefix, self.reached = prefix, None

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        if newurl.startswith(self.prefix):
            self.reached = newurl
            return None
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def consent_until(authorization_url: str, callback: str) -> str | None:
    """The user's browser at serve's consent page: opens it, presses Allow, and returns the
    callback URL the redirect reached (with the code)."""
    stop = StopAt(callback)
    opener = urllib.request.build_opener(stop)
    page = opener.open(authorization_url, timeout=30).read().decode()
    form = ConsentForm()
    form.feed(page)
    request = urllib.request.Request(urllib.parse.urljoin(authorization_url, form.action),
                                     data=urllib.parse.urlencode(form.fields + [form.approve]).encode())
    try:
        opener.open(request, timeout=30)
    except urllib.error.HTTPError:
        pass
    return stop.reached


def open_and_consent(url: str) -> str:
    """Opens `url`, presses Allow on a consent page if one comes; the last page's text."""
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(CookieJar()))
    with opener.open(url, timeout=30) as response:
        page = response.read().decode("utf-8", "replace")
        where = response.geturl()
    form = ConsentForm()
    form.feed(page)
    if form.action and form.approve:
        body = urllib.parse.urlencode(form.fields + [form.approve]).encode()
        action = urllib.parse.urljoin(where, form.action)
        with opener.open(urllib.request.Request(action, data=body), timeout=30) as response:
            page = response.read().decode("utf-8", "replace")
    return page


if __name__ == "__main__":
    open_and_consent(sys.argv[-1])
