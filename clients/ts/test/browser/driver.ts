/**
 * Runs the test page in headless Chromium (puppeteer-core, /usr/bin/chromium or $CHROMIUM)
 * and returns what it left in window.__shuffledpResult. Chromium is started over a pipe:
 * it ends with this process, even if this process is killed.
 *
 * As a command (for the Python tests): `node driver.js URL [SECONDS]` prints the result.
 */
import { existsSync } from "node:fs";
import { argv } from "node:process";
import { fileURLToPath } from "node:url";
import puppeteer from "puppeteer-core";

/** Where Chromium is expected. */
export const CHROMIUM = process.env.CHROMIUM ?? "/usr/bin/chromium";

/**
 * Whether a browser test may run: true with Chromium present; without it, an error if
 * SHUFFLEDP_REQUIRE_BROWSER=1 (as CI sets), else false (the caller skips, saying why).
 */
export function browserAvailable(): boolean {
  if (existsSync(CHROMIUM)) return true;
  if (process.env.SHUFFLEDP_REQUIRE_BROWSER === "1") {
    throw new Error(`SHUFFLEDP_REQUIRE_BROWSER=1 but there is no Chromium at ${CHROMIUM} (apt-get install -y chromium)`);
  }
  return false;
}

/**
 * Open `url`, wait for the page's result (at most `seconds`), close the browser.
 * `extraArgs` go to Chromium's command line (e.g. `--host-resolver-rules`).
 */
export async function runPage(url: string, seconds = 60, extraArgs: readonly string[] = []): Promise<{ result: Record<string, unknown>; console: string[] }> {
  const browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    pipe: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run", "--disable-crash-reporter", "--disable-breakpad", ...extraArgs],
  });
  const console: string[] = [];
  try {
    const page = await browser.newPage();
    page.on("console", (message) => console.push(`${message.type()}: ${message.text()}`));
    page.on("pageerror", (error) => console.push(`pageerror: ${String(error)}`));
    await page.goto(url, { waitUntil: "load", timeout: seconds * 1000 });
    await page.waitForFunction("globalThis.__shuffledpResult !== undefined", { timeout: seconds * 1000, polling: 50 });
    const result = (await page.evaluate("globalThis.__shuffledpResult")) as Record<string, unknown>;
    return { result, console };
  } finally {
    await browser.close();
  }
}

if (argv[1] !== undefined && fileURLToPath(import.meta.url) === argv[1]) {
  const url = argv[2];
  if (url === undefined) {
    process.stderr.write("usage: node driver.js URL [SECONDS]\n");
    process.exit(2);
  }
  try {
    const outcome = await runPage(url, Number(argv[3] ?? 60));
    process.stdout.write(`${JSON.stringify(outcome)}\n`);
  } catch (exc) {
    process.stderr.write(`driver: ${(exc as Error).stack ?? String(exc)}\n`);
    process.exit(1);
  }
}
