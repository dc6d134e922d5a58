// The document page's PDF viewer: pdf.js (npm pdfjs-dist, served from static/vendor/pdfjs)
// draws the pages the reader scrolls to; the server says which pages hold a match of the
// search and where (GET /documents/<id>/hits: whole matched words only).
// PDF JavaScript never runs: only the page canvas is drawn (no annotation or form layer, no
// scripting sandbox), eval is off and the page's CSP forbids it anyway.
// Without JavaScript, or when pdf.js cannot open the file, the server-drawn pages (<noscript>)
// are shown instead.

const ZOOM_STEP = 1.25;
const MIN_SCALE = 0.25;
const MAX_SCALE = 5;
const KEEP_DRAWN = 12; // drawn page canvases kept; farther ones are cleared (memory on phones)
const MAX_CANVAS_PIXELS = 16e6; // device pixels of one page canvas at most
const THUMB_WIDTH = 96; // CSS px
const HITS_WAIT_MS = 1500; // the pages open without the hits after this long
const CSS_PER_POINT = 96 / 72; // 100 % zoom: a PDF point is 1/72 in, a CSS px 1/96 in

const root = document.querySelector("[data-pdf-viewer]");
if (root) {
  start(root).catch((err) => fallBack(root, err));
}

function fallBack(viewer, err) {
  // pdf.js could not be loaded or could not open this file: show the server-drawn pages
  if (viewer.classList.contains("is-ready")) {
    console.error("PDF viewer:", err); // it opened: keep it, and say what broke
    return;
  }
  console.warn("PDF viewer:", err);
  const noscript = document.querySelector("noscript[data-pdf-fallback]");
  if (noscript) {
    const box = document.createElement("div");
    box.innerHTML = noscript.textContent; // the server's own markup, as it would be without JS
    noscript.replaceWith(box);
  }
  viewer.remove();
}

async function start(root) {
  const ds = root.dataset;
  const lib = await import(ds.lib);
  lib.GlobalWorkerOptions.workerSrc = ds.worker;
  const task = lib.getDocument({
    url: ds.src,
    isEvalSupported: false, // (pdf.js 6 has no eval path left; kept for older builds)
    enableXfa: false,
    cMapUrl: ds.assets + "cmaps/",
    cMapPacked: true,
    standardFontDataUrl: ds.assets + "standard_fonts/",
    wasmUrl: ds.assets + "wasm/",
    useWasm: false, // the CSP allows no WebAssembly: the decoders' JavaScript fallbacks draw
    disableAutoFetch: true, // with Range requests, only the pages looked at are fetched
  });
  const hitsRequest = fetch(ds.hits, { credentials: "same-origin" })
    .then((r) => (r.ok ? r.json() : null))
    .catch(() => null);
  const pdf = await task.promise;
  // the hits give every page its size before it is drawn; do not wait long for them (a cold
  // preview child can take seconds): the pages open, and the hits are laid on when they come
  const early = await Promise.race([hitsRequest, new Promise((r) => setTimeout(() => r(undefined), HITS_WAIT_MS))]);
  const first = (await pdf.getPage(1)).getViewport({ scale: 1 });
  const viewer = new Viewer(root, pdf, early || { sizes: [[first.width, first.height]] });
  viewer.open(Number(ds.page) || 1);
  if (early === undefined) viewer.setInfo((await hitsRequest) || { failed: true });
  else if (early === null) viewer.setInfo({ failed: true });
}

// the page's words, in its language (document.html's data-messages): {page}, {pages}, {n} filled in
function say(el, key, vars = {}) {
  el._messages ??= JSON.parse(el.dataset.messages || "{}");
  return (el._messages[key] || key).replace(/\{(\w+)\}/g, (_, name) => String(vars[name] ?? ""));
}

class Viewer {
  constructor(el, pdf, info) {
    this.el = el;
    this.pdf = pdf;
    this.count = pdf.numPages;
    this.q = el.dataset.q || "";
    this.sizes = [];
    this.hits = info.hits || {};
    this.hitPages = Object.keys(this.hits).map(Number).sort((a, b) => a - b);
    this.searched = info.searched ?? null; // null: the hits are not there yet
    this.pagesEl = el.querySelector("[data-pages]");
    this.thumbsEl = el.querySelector("[data-thumbs]");
    this.status = el.querySelector("[data-page-status]");
    this.hitStatus = el.querySelector("[data-hit-status]");
    this.zoomLabel = el.querySelector("[data-zoom-label]");
    this.slots = [];
    this.thumbs = [];
    this.drawn = new Map(); // page -> scale it was drawn at
    this.tasks = new Map(); // page -> pdf.js render task
    this.visible = new Set();
    this.queue = [];
    this.busy = 0;
    this.current = 1;
    this.pinned = null; // [page, scrollTop] after a jump, until the reader scrolls
    this.fit = true;
    const sizes = info.sizes || [];
    for (let n = 1; n <= this.count; n++) this.sizes.push(sizes[n - 1] || sizes[0] || [595, 842]); // A4 at worst
  }

  setInfo(info) {
    // the hits came after the pages opened: sizes, marks, dots, buttons and the count
    if (info.failed) {
      this.searched = -1;
    } else {
      let changed = false;
      (info.sizes || []).forEach((size, i) => {
        const known = this.sizes[i];
        if (i < this.count && !this.drawn.has(i + 1) && (known[0] !== size[0] || known[1] !== size[1])) {
          this.sizes[i] = size;
          changed = true;
        }
      });
      this.hits = info.hits || {};
      this.hitPages = Object.keys(this.hits).map(Number).sort((a, b) => a - b);
      this.searched = info.searched || 0;
      if (changed) this.keepPlace(() => this.layout());
      this.hitPages.forEach((n) => {
        this.slots[n - 1].classList.add("has-hits");
        this.slots[n - 1].setAttribute("aria-label", say(this.el, "page_hits", { page: n }));
        this.thumbs[n - 1].classList.add("has-hits");
        this.thumbs[n - 1].setAttribute("aria-label", say(this.el, "go_to_hits", { page: n }));
        if (this.drawn.has(n)) this.slots[n - 1].querySelector(".pdf-marks")?.replaceWith(this.marks(n));
      });
    }
    // the hits came late: the first one is shown if the reader has not moved since the pages opened
    const untouched = this.pinned && this.pinned[0] === this.current;
    if (untouched && this.hitPages.length) this.revealHit(this.hits[this.current] ? this.current : this.hitPages[0]);
    this.setCurrent(this.current);
    this.showHits();
  }

  open(startPage) {
    this.el.hidden = false;
    this.el.classList.add("is-ready");
    this.build();
    this.scale = this.fitScale();
    this.layout();
    this.bind();
    const start = Math.min(Math.max(1, startPage), this.count);
    if (!this.revealHit(start)) this.goTo(start);
    this.showHits();
  }

  build() {
    const pages = document.createDocumentFragment();
    const thumbs = document.createDocumentFragment();
    for (let n = 1; n <= this.count; n++) {
      const slot = document.createElement("div");
      slot.className = "pdf-slot";
      slot.dataset.page = n;
      slot.setAttribute("role", "img");
      slot.setAttribute("aria-label", say(this.el, this.hits[n] ? "page_hits" : "page", { page: n }));
      if (this.hits[n]) slot.classList.add("has-hits");
      pages.append(slot);
      this.slots.push(slot);

      const thumb = document.createElement("button");
      thumb.type = "button";
      thumb.className = "pdf-thumb";
      thumb.dataset.page = n;
      thumb.setAttribute("aria-label", say(this.el, this.hits[n] ? "go_to_hits" : "go_to", { page: n }));
      const [w, h] = this.sizes[n - 1];
      const box = document.createElement("span");
      box.className = "pdf-thumb-box";
      box.style.aspectRatio = `${w} / ${h}`;
      const label = document.createElement("span");
      label.className = "pdf-thumb-label";
      label.textContent = n;
      thumb.append(box, label);
      if (this.hits[n]) thumb.classList.add("has-hits");
      thumbs.append(thumb);
      this.thumbs.push(thumb);
    }
    this.pagesEl.append(pages);
    this.thumbsEl.append(thumbs);
  }

  fitScale() {
    const style = getComputedStyle(this.pagesEl);
    const room = this.pagesEl.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
    const widest = Math.max(...this.sizes.map((s) => s[0]));
    return Math.max(MIN_SCALE, Math.min(MAX_SCALE, (room - 2) / widest));
  }

  layout() {
    // every page's box at the present scale (drawn or not), so the scroll bar is true
    this.slots.forEach((slot, i) => {
      const [w, h] = this.sizes[i];
      slot.style.width = `${Math.floor(w * this.scale)}px`;
      slot.style.height = `${Math.floor(h * this.scale)}px`;
    });
    this.zoomLabel.textContent = `${Math.round((this.scale / CSS_PER_POINT) * 100)} %`;
  }

  bind() {
    this.pageObserver = new IntersectionObserver((entries) => this.onPages(entries), {
      root: this.pagesEl,
      rootMargin: "300px 0px",
    });
    this.slots.forEach((slot) => this.pageObserver.observe(slot));
    this.thumbObserver = new IntersectionObserver((entries) => this.onThumbs(entries), {
      root: this.thumbsEl,
      rootMargin: "200px",
    });
    this.thumbs.forEach((t) => this.thumbObserver.observe(t));
    let frame = 0;
    this.pagesEl.addEventListener("scroll", () => {
      if (!frame) frame = requestAnimationFrame(() => { frame = 0; this.onScroll(); });
    }, { passive: true });
    this.thumbsEl.addEventListener("click", (evt) => {
      const thumb = evt.target.closest(".pdf-thumb");
      if (thumb) this.goTo(Number(thumb.dataset.page));
    });
    this.el.querySelector("[data-toolbar]").addEventListener("click", (evt) => {
      const button = evt.target.closest("button[data-act]");
      if (button) this.act(button.dataset.act, button);
    });
    document.addEventListener("keydown", (evt) => {
      // n / N: next / previous page with a hit, as n / N step through the text preview's matches
      const el = document.activeElement;
      const typing = el && (el.isContentEditable || ["INPUT", "TEXTAREA", "SELECT"].includes(el.tagName));
      if (typing || evt.altKey || evt.ctrlKey || evt.metaKey || !this.hitPages.length) return;
      if (evt.key === "n") this.act("next-hit");
      else if (evt.key === "N") this.act("prev-hit");
    });
    let width = this.pagesEl.clientWidth;
    new ResizeObserver(() => {
      if (this.fit && Math.abs(this.pagesEl.clientWidth - width) > 8) {
        width = this.pagesEl.clientWidth;
        this.zoomTo(this.fitScale(), true);
      }
    }).observe(this.pagesEl);
  }

  act(name, button) {
    if (name === "next-hit") {
      const next = this.hitPages.find((p) => p > this.current);
      if (next) this.revealHit(next);
    } else if (name === "prev-hit") {
      const prev = [...this.hitPages].reverse().find((p) => p < this.current);
      if (prev) this.revealHit(prev);
    } else if (name === "zoom-in") {
      this.zoomTo(this.scale * ZOOM_STEP, false);
    } else if (name === "zoom-out") {
      this.zoomTo(this.scale / ZOOM_STEP, false);
    } else if (name === "fit") {
      this.zoomTo(this.fitScale(), true);
    } else if (name === "thumbs") {
      const shown = this.el.classList.toggle("thumbs-hidden") === false;
      button.setAttribute("aria-pressed", String(shown));
    }
  }

  zoomTo(scale, fit) {
    scale = Math.max(MIN_SCALE, Math.min(MAX_SCALE, scale));
    this.fit = fit;
    if (Math.abs(scale - this.scale) < 1e-3) return;
    this.keepPlace(() => {
      this.scale = scale;
      this.layout();
    });
    for (const n of [...this.drawn.keys()]) if (!this.visible.has(n)) this.clear(n);
    this.visible.forEach((n) => this.request(n));
  }

  keepPlace(change) {
    // the page in view stays in view, at the same share of its height, across a relayout
    const page = this.current;
    const slot = this.slots[page - 1];
    const within = (this.pagesEl.scrollTop - slot.offsetTop) / Math.max(1, slot.offsetHeight);
    change();
    this.pagesEl.scrollTop = slot.offsetTop + within * slot.offsetHeight;
    this.pinned = [page, this.pagesEl.scrollTop];
  }

  goTo(page) {
    const slot = this.slots[page - 1];
    if (!slot) return;
    this.pagesEl.scrollTop = slot.offsetTop - parseFloat(getComputedStyle(this.pagesEl).paddingTop);
    this.pinned = [page, this.pagesEl.scrollTop];
    this.setCurrent(page);
  }

  revealHit(page) {
    // the page's first hit a third of the way down the pages' view, and that view's part with
    // the hit inside the window (the viewer may begin near the window's bottom edge); false
    // when the page has no hit
    const boxes = this.hits[page];
    const slot = this.slots[page - 1];
    if (!boxes || !boxes.length || !slot) return false;
    const y = slot.offsetTop + Math.min(...boxes.map((b) => b[1])) * slot.offsetHeight;
    this.pagesEl.scrollTop = Math.max(0, y - this.pagesEl.clientHeight / 3);
    this.pinned = [page, this.pagesEl.scrollTop];
    this.setCurrent(page);
    const inWindow = this.pagesEl.getBoundingClientRect().top + (y - this.pagesEl.scrollTop);
    if (inWindow < 0 || inWindow > window.innerHeight * 0.75) {
      window.scrollBy({ top: inWindow - window.innerHeight / 3, behavior: "instant" });
    }
    return true;
  }

  onScroll() {
    const top = this.pagesEl.scrollTop;
    if (this.pinned && Math.abs(top - this.pinned[1]) < 2) return; // our own jump
    this.pinned = null;
    // the page under the upper third of the view (binary search: slots are in order)
    const y = top + this.pagesEl.clientHeight / 3;
    let lo = 0;
    let hi = this.slots.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (this.slots[mid].offsetTop <= y) lo = mid; else hi = mid - 1;
    }
    this.setCurrent(lo + 1);
  }

  setCurrent(page) {
    if (page !== this.current) {
      this.thumbs[this.current - 1]?.removeAttribute("aria-current");
    }
    this.current = page;
    const thumb = this.thumbs[page - 1];
    thumb.setAttribute("aria-current", "page");
    const strip = this.thumbsEl;
    if (strip.offsetParent) { // (shown) keep the current page's thumbnail in sight, without scrolling the page
      const t = thumb.offsetTop; // the strip is positioned: offsets are within it
      const l = thumb.offsetLeft;
      if (t < strip.scrollTop || t + thumb.offsetHeight > strip.scrollTop + strip.clientHeight) {
        strip.scrollTop = t - strip.clientHeight / 2;
      }
      if (l < strip.scrollLeft || l + thumb.offsetWidth > strip.scrollLeft + strip.clientWidth) {
        strip.scrollLeft = l - strip.clientWidth / 2;
      }
    }
    this.status.textContent = say(this.el, "page_of", { page, pages: this.count });
    const prev = this.el.querySelector("[data-act=prev-hit]"); // (no hit buttons without a search)
    const next = this.el.querySelector("[data-act=next-hit]");
    if (prev) prev.disabled = !this.hitPages.some((p) => p < page);
    if (next) next.disabled = !this.hitPages.some((p) => p > page);
  }

  showHits() {
    if (!this.q) return;
    if (this.searched === null) {
      this.hitStatus.textContent = say(this.el, "looking");
      return;
    }
    if (this.searched < 0) {
      this.hitStatus.textContent = say(this.el, "failed");
      return;
    }
    const n = this.hitPages.length;
    let text = n ? say(this.el, n === 1 ? "hits_one" : "hits_many", { n }) : say(this.el, "no_hits");
    if (this.searched < Math.min(this.count, this.sizes.length) && this.searched > 0) {
      text += " " + say(this.el, "searched", { n: this.searched });
    }
    this.hitStatus.textContent = text;
  }

  onPages(entries) {
    for (const entry of entries) {
      const n = Number(entry.target.dataset.page);
      if (entry.isIntersecting) {
        this.visible.add(n);
        this.request(n);
      } else {
        this.visible.delete(n);
      }
    }
    this.evict();
  }

  onThumbs(entries) {
    for (const entry of entries) {
      const thumb = entry.target;
      if (entry.isIntersecting && !thumb.dataset.drawn) {
        thumb.dataset.drawn = "pending";
        this.queue.push({ kind: "thumb", page: Number(thumb.dataset.page) });
      }
    }
    this.pump();
  }

  request(n) {
    if (this.drawn.get(n) === this.scale || this.tasks.has(n)) return;
    if (!this.queue.some((job) => job.kind === "page" && job.page === n)) {
      this.queue.unshift({ kind: "page", page: n });
    }
    this.pump();
  }

  evict() {
    if (this.drawn.size <= KEEP_DRAWN) return;
    const far = [...this.drawn.keys()]
      .filter((n) => !this.visible.has(n))
      .sort((a, b) => Math.abs(b - this.current) - Math.abs(a - this.current));
    while (this.drawn.size > KEEP_DRAWN && far.length) this.clear(far.shift());
  }

  clear(n) {
    this.tasks.get(n)?.cancel();
    this.tasks.delete(n);
    this.drawn.delete(n);
    const slot = this.slots[n - 1];
    slot.replaceChildren();
    delete slot.dataset.drawn;
  }

  pump() {
    while (this.busy < 2 && this.queue.length) {
      // pages in view first, then thumbnails
      let i = this.queue.findIndex((job) => job.kind === "page");
      if (i < 0) i = 0;
      const job = this.queue.splice(i, 1)[0];
      if (job.kind === "page" && !this.visible.has(job.page)) continue;
      this.busy++;
      const done = job.kind === "page" ? this.drawPage(job.page) : this.drawThumb(job.page);
      done.catch((err) => {
        if (err?.name !== "RenderingCancelledException") console.warn("PDF page", job.page, err);
      }).finally(() => { this.busy--; this.pump(); });
    }
  }

  async drawPage(n) {
    const scale = this.scale;
    const page = await this.pdf.getPage(n);
    const viewport = page.getViewport({ scale });
    let ratio = window.devicePixelRatio || 1;
    ratio = Math.min(ratio, Math.sqrt(MAX_CANVAS_PIXELS / (viewport.width * viewport.height)));
    const canvas = document.createElement("canvas");
    canvas.width = Math.floor(viewport.width * ratio);
    canvas.height = Math.floor(viewport.height * ratio);
    canvas.className = "pdf-canvas";
    const task = page.render({
      canvas,
      canvasContext: canvas.getContext("2d", { alpha: false }),
      viewport,
      transform: ratio !== 1 ? [ratio, 0, 0, ratio, 0, 0] : null,
    });
    this.tasks.set(n, task);
    await task.promise;
    this.tasks.delete(n);
    if (scale !== this.scale) { // zoomed meanwhile: draw again at the new scale
      if (this.visible.has(n)) this.request(n);
      return;
    }
    const slot = this.slots[n - 1];
    slot.replaceChildren(canvas, this.marks(n));
    slot.dataset.drawn = "1";
    this.drawn.set(n, scale);
    // the real size of this page (the server's sizes may be missing)
    const [w, h] = [viewport.width / scale, viewport.height / scale];
    const known = this.sizes[n - 1];
    if (Math.abs(known[0] - w) > 1 || Math.abs(known[1] - h) > 1) {
      this.sizes[n - 1] = [w, h];
      slot.style.width = `${Math.floor(viewport.width)}px`;
      slot.style.height = `${Math.floor(viewport.height)}px`;
    }
    page.cleanup();
  }

  marks(n) {
    const layer = document.createElement("div");
    layer.className = "pdf-marks";
    for (const [x0, y0, x1, y1] of this.hits[n] || []) {
      const mark = document.createElement("mark");
      mark.className = "pdf-hit";
      mark.style.left = `${x0 * 100}%`;
      mark.style.top = `${y0 * 100}%`;
      mark.style.width = `${(x1 - x0) * 100}%`;
      mark.style.height = `${(y1 - y0) * 100}%`;
      layer.append(mark);
    }
    return layer;
  }

  async drawThumb(n) {
    const page = await this.pdf.getPage(n);
    const base = page.getViewport({ scale: 1 });
    const ratio = Math.min(2, window.devicePixelRatio || 1);
    const viewport = page.getViewport({ scale: (THUMB_WIDTH / base.width) * ratio });
    const canvas = document.createElement("canvas");
    canvas.width = Math.floor(viewport.width);
    canvas.height = Math.floor(viewport.height);
    await page.render({ canvas, canvasContext: canvas.getContext("2d"), viewport }).promise;
    const thumb = this.thumbs[n - 1];
    thumb.querySelector(".pdf-thumb-box").replaceChildren(canvas);
    thumb.dataset.drawn = "1";
  }
}
