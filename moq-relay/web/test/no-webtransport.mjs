// no-webtransport.mjs: makes a page (web/browser.mjs's, in either browser) one without WebTransport, for the checks of
// the WebSocket (QMux) fallback (page-check.mjs, player-check.mjs, web/driver.mjs).

/** Removes WebTransport and WebTransportError from every document `page` loads, before its scripts run. */
export async function withoutWebTransport(page) {
  await page.addInitScript(() => {
    for (const name of ["WebTransport", "WebTransportError"]) {
      delete globalThis[name];
      if (name in globalThis) Object.defineProperty(globalThis, name, { value: undefined, configurable: true });
    }
  });
}
