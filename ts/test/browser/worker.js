// The Web Worker: the behaviour suite's provider, served to the page on the
// worker's own message port (`self`), or on shared memory when the page
// sends a SharedArrayBuffer first (worker.js?sharedmemory).
import { messageport, sharedmemory } from "hubwire";
import { behaviourService } from "/dist/test/fixtures/service.js";

if (self.location.search === "?sharedmemory") {
  self.addEventListener("message", (ev) => behaviourService().serveTransport(sharedmemory.connect(ev.data, "acceptor")), { once: true });
} else {
  behaviourService().serveTransport(messageport.connect(self, "page"));
}
