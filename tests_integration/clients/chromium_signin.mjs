// A user in headless Chromium (Debian's package, driven by playwright-core): opens the
// authorization URL (argv[2]), types the user name (argv[4]) into the identity provider's
// login page, presses Allow on serve's consent page, and prints as JSON where the browser
// was finally sent: the client's callback URL (argv[3] its prefix; nothing listens there,
// so the request is answered here), or the text of the page it stopped at.
import { chromium } from "playwright-core";

const [authorizeUrl, callbackPrefix, user] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath: "/usr/bin/chromium",
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"],
});
const result = { callback: null, page: null, blocked: [] };
try {
  const page = await browser.newPage();
  page.on("console", (message) => { if (/Content Security Policy/i.test(message.text())) result.blocked.push(message.text()); });
  let reached;
  const arrived = new Promise((resolve) => { reached = resolve; });
  await page.route(`${callbackPrefix}**`, async (route) => {
    result.callback = route.request().url();
    await route.fulfill({ status: 200, contentType: "text/plain", body: "signed in" });
    reached();
  });
  await page.goto(authorizeUrl);
  await page.fill('input[name="login"]', user);
  await page.click('button[type="submit"]');
  await page.waitForLoadState();
  const allow = page.locator('button[name="decision"][value="approve"]');
  if (await allow.count()) {
    await allow.click();
    await Promise.race([arrived, new Promise((resolve) => setTimeout(resolve, 10000))]);
  }
  if (!result.callback) result.page = await page.content();
} finally {
  await browser.close();
}
console.log(JSON.stringify(result));
