// Drives dpgate's status page (/admin/) in the system's headless Chromium
// through playwright-core, for tests/integration/test_status_page.py.
//
// stdin: {"url": ".../admin/", "admin_token": T, "steps": [...]}; stdout: one JSON object,
// {"results": [one per step], "console_errors": [...], "page_errors": [...],
//  "posts": [paths of the POSTs the page sent]}.
// Steps:
//   {"op": "sign_in", "token": T}      types T into the token form and submits it
//   {"op": "wait_notice", "text": T}  until the page's notice holds T; returns what the page shows
//   {"op": "snapshot", "until_hit": B, "hold": H}
//                                      until 16 rank cells show (and, if B, one with a hit ratio):
//                                      returns the cells, the rows, and the /admin/status answer they
//                                      show; with H, the page's next polls stay unanswered until "release"
//   {"op": "release"}                  answers the held poll; polls flow again
//   {"op": "augment", "top": {...}, "backends": {NAME: {...}}}
//                                      adds these fields to every later /admin/status answer
//                                      (fields another issue adds to the API, before it has them)
//   {"op": "api", "method": M, "path": P, "body": B}
//                                      calls the admin API from outside the page with spec.admin_token
//   {"op": "act", "action": A, "backend": N, "confirm": B}
//                                      clicks A (flip|drain|undrain) on N's row, answers the
//                                      confirmation with B; returns the question and, if confirmed,
//                                      the outcome the page shows
//   {"op": "wait_role", "backend": N, "role": R}   until N's row shows role R
// Chromium: $DPGATE_CHROMIUM, else /usr/bin/chromium (scripts/setup installs it).
// CommonJS, so that NODE_PATH (scripts/test sets it) finds playwright-core.
"use strict";

const { chromium } = require("playwright-core");

const WAIT_MS = 20000;  // an upper bound for each wait, never a measured time

async function readStdin() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  return JSON.parse(Buffer.concat(chunks).toString("utf8"));
}

async function main() {
  const spec = await readStdin();
  const browser = await chromium.launch({
    executablePath: process.env.DPGATE_CHROMIUM || "/usr/bin/chromium",
    // Chromium's sandbox cannot start as root (CI runs as root).
    args: process.getuid && process.getuid() === 0 ? ["--no-sandbox"] : [],
  });
  const out = { results: [], console_errors: [], page_errors: [], posts: [] };
  try {
    const page = await browser.newPage();
    page.setDefaultTimeout(WAIT_MS);
    page.on("console", (m) => {
      // Chromium logs every non-2xx fetch as "Failed to load resource"; the
      // 401 and 409 answers the tests provoke are expected. Anything else,
      // a CSP violation first of all, is reported.
      if (m.type() === "error" && !m.text().startsWith("Failed to load resource")) out.console_errors.push(m.text());
    });
    page.on("pageerror", (e) => out.page_errors.push(String(e)));
    page.on("request", (r) => { if (r.method() === "POST") out.posts.push(new URL(r.url()).pathname); });

    // Every /admin/status answer passes through here, in order. While
    // `frozen`, the next poll is held unanswered: the page asks again only
    // after it has drawn the previous answer, so once a poll is held, the
    // page shows exactly the last answer it was given.
    const answers = [];
    let frozen = false;
    let held = null;
    let onHeld = null;
    let augment = null;
    await page.route("**/admin/status", async (route) => {
      if (frozen) {
        held = route;
        if (onHeld) onHeld();
        return;
      }
      const response = await route.fetch();
      let body = await response.text();
      if (response.status() === 200) {
        const answer = JSON.parse(body);
        if (augment) {
          Object.assign(answer, augment.top || {});
          for (const b of answer.backends) Object.assign(b, (augment.backends || {})[b.name] || {});
          body = JSON.stringify(answer);
        }
        answers.push(answer);
      }
      await route.fulfill({ response, body });
    });

    async function release() {
      frozen = false;
      onHeld = null;
      if (held) await held.continue();
      held = null;
    }

    const response = await page.goto(spec.url);
    out.page = { status: response.status(), headers: await response.allHeaders() };

    for (const step of spec.steps) {
      if (step.op === "sign_in") {
        await page.locator("#token-form").waitFor({ state: "visible" });
        await page.fill("#token", step.token);
        await page.click("#token-form button[type=submit]");
        out.results.push({ op: step.op });
      } else if (step.op === "wait_notice") {
        await page.waitForFunction((text) => document.getElementById("notice").textContent.includes(text),
                                   step.text);
        out.results.push(await page.evaluate(() => ({
          op: "wait_notice",
          notice: document.getElementById("notice").textContent,
          notice_class: document.getElementById("notice").className,
          notice_visible: !document.getElementById("notice").hidden,
          form_visible: !document.getElementById("token-form").hidden,
          status_visible: !document.getElementById("status").hidden,
          stored_token: sessionStorage.getItem("dpgate.admin_token"),
          body_text: document.body.innerText,
        })));
      } else if (step.op === "snapshot") {
        await page.waitForFunction((untilHit) => {
          const cells = document.querySelectorAll("#grid .cell");
          if (cells.length !== 16) return false;
          if (!untilHit) return true;
          return [...document.querySelectorAll('#grid [data-field="prefix_cache_hit_ratio"]')]
            .some((n) => n.dataset.value !== "null");
        }, step.until_hit);
        const heldNow = new Promise((resolve) => { onHeld = resolve; });
        frozen = true;
        await heldNow;
        const shown = await page.evaluate(() => ({
          cells: [...document.querySelectorAll("#grid .cell")].map((cell) => ({
            backend: cell.dataset.backend,
            rank: Number(cell.dataset.rank),
            load: Number(cell.dataset.load),
            background: getComputedStyle(cell).backgroundColor,
            fields: Object.fromEntries([...cell.querySelectorAll("[data-field]")].map(
              (n) => [n.dataset.field, { value: JSON.parse(n.dataset.value), text: n.textContent }])),
          })),
          rows: [...document.querySelectorAll("#backends tbody tr")].map((row) => ({
            backend: row.dataset.backend,
            role: row.querySelector('[data-field="role"]').textContent,
            healthy: row.querySelector('[data-field="healthy"]').textContent,
            drained: row.querySelector('[data-field="drained"]').textContent,
            identity: row.querySelector('[data-field="identity"]').textContent,
            acceptance: row.querySelector('[data-field="acceptance"]').textContent,
            actions: [...row.querySelectorAll("button[data-action]")].map((b) => b.dataset.action),
          })),
          notice_visible: !document.getElementById("notice").hidden,
          roles: document.getElementById("roles").textContent,
          alerts: [...document.getElementById("alerts").children].map((n) => n.textContent),
          flips: [...document.querySelectorAll("#flips li")].map((n) => n.textContent),
          keys_visible: !document.getElementById("keys-section").hidden,
          budgets: document.getElementById("budgets").textContent,
          keys: [...document.querySelectorAll("#keys tbody tr")].map((row) => ({
            key: row.dataset.key,
            cells: [...row.querySelectorAll("td")].map((n) => n.textContent),
          })),
        }));
        out.results.push({ op: "snapshot", shown, answer: answers[answers.length - 1] });
        if (!step.hold) await release();
      } else if (step.op === "augment") {
        augment = step;
        out.results.push({ op: "augment" });
      } else if (step.op === "release") {
        await release();
        out.results.push({ op: "release" });
      } else if (step.op === "api") {
        // The admin API called beside the page (another operator, say).
        const r = await fetch(new URL(step.path, spec.url), {
          method: step.method, body: step.body === undefined ? undefined : JSON.stringify(step.body),
          headers: { "Authorization": "Bearer " + spec.admin_token, "Content-Type": "application/json" } });
        out.results.push({ op: "api", status: r.status, body: await r.json() });
      } else if (step.op === "act") {
        const questions = [];
        const dialog = new Promise((resolve) => page.once("dialog", async (d) => {
          questions.push({ type: d.type(), message: d.message() });
          if (step.confirm) await d.accept(); else await d.dismiss();
          resolve();
        }));
        // A previous action's outcome is cleared, so the wait below sees this one's.
        await page.evaluate(() => { document.getElementById("action-result").hidden = true; });
        await page.locator(`#backends tr[data-backend="${step.backend}"] button[data-action="${step.action}"]`).click();
        await dialog;
        const result = { op: "act", questions };
        if (step.confirm) {
          await page.locator("#action-result").waitFor({ state: "visible" });
          Object.assign(result, await page.evaluate(() => ({
            outcome: document.getElementById("action-result").textContent,
            outcome_class: document.getElementById("action-result").className,
          })));
        }
        out.results.push(result);
      } else if (step.op === "wait_role") {
        const cell = page.locator(`#backends tr[data-backend="${step.backend}"] [data-field="role"]`);
        await page.waitForFunction(([b, r]) => {
          const n = document.querySelector(`#backends tr[data-backend="${b}"] [data-field="role"]`);
          return n && n.textContent === r;
        }, [step.backend, step.role]);
        out.results.push({ op: "wait_role", role: await cell.textContent() });
      } else {
        throw new Error("unknown step " + JSON.stringify(step));
      }
    }
  } finally {
    await browser.close();
  }
  process.stdout.write(JSON.stringify(out) + "\n");
}

main().catch((e) => {
  process.stderr.write(String(e && e.stack ? e.stack : e) + "\n");
  process.exit(1);
});
