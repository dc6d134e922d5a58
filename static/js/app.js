// Trawl's small enhancements: keyboard search, match navigation, copy buttons, htmx messages.
// Loaded with `defer`; everything here is optional (pages work without JavaScript).
(function () {
  "use strict";

  function isTyping(el) {
    if (!el) return false;
    var tag = el.tagName;
    return el.isContentEditable || tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT";
  }

  // -- the page's language: its words come from the server (base.html, data-messages) --------
  // Dates and numbers in the page's language, in the reader's own variant of it when the
  // browser lists one (en-GB: "25 Nov 2026"; en alone would be the American "Nov 25, 2026").
  var lang = document.documentElement.lang || undefined;
  var variants = (navigator.languages || [navigator.language || ""]).filter(function (tag) {
    return lang && tag.split("-")[0].toLowerCase() === lang;
  });
  if (variants.length) lang = variants[0];
  var words = {};
  try { words = JSON.parse(document.body.getAttribute("data-messages") || "{}"); } catch (e) { words = {}; }
  function say(key, fallback, values) {
    var text = words[key] || fallback;
    Object.keys(values || {}).forEach(function (name) {
      text = text.split("%(" + name + ")s").join(String(values[name]));
    });
    return text;
  }
  var numberFormat = new Intl.NumberFormat(lang);

  // -- toasts: short messages from htmx responses --------------------------------------------
  function toast(message, level) {
    var box = document.getElementById("toasts");
    if (!box || !message) return;
    var item = document.createElement("p");
    item.className = "toast alert alert-" + (level || "info");
    item.textContent = message;
    box.appendChild(item);
    setTimeout(function () { item.remove(); }, level === "error" ? 9000 : 5000);
  }

  function errorText(xhr) {
    try {
      var doc = new DOMParser().parseFromString(xhr.responseText || "", "text/html");
      var detail = doc.querySelector("[data-detail]");
      if (detail && detail.textContent.trim()) return detail.textContent.trim();
    } catch (e) { /* fall through to the status line */ }
    return say("server", "The server answered %(status)s", { status: xhr.status + (xhr.statusText ? " " + xhr.statusText : "") });
  }

  // -- image previews the server refused (too large, damaged): show the note, not a broken image
  function noPreview(img) {
    var box = img.closest("figure") || img.parentNode;  // a scan's picture sits in its frame of hit boxes
    var note = box && box.querySelector(".no-preview");
    if (!note) return;
    img.hidden = true;
    if (img.parentNode.classList.contains("scan-frame")) img.parentNode.hidden = true;
    note.hidden = false;
  }
  document.addEventListener("error", function (evt) {
    if (evt.target && evt.target.hasAttribute && evt.target.hasAttribute("data-image-preview")) {
      noPreview(evt.target);
    }
  }, true);  // error events of images do not bubble: listen while they travel down
  document.querySelectorAll("img[data-image-preview]").forEach(function (img) {
    if (img.complete && img.naturalWidth === 0 && img.getAttribute("src")) noPreview(img);
  });

  // A search the server cannot run (a bad query term while typing) answers 400 with the results
  // fragment holding the message: show it in place instead of a toast.
  document.addEventListener("htmx:beforeSwap", function (evt) {
    var target = evt.detail.target;
    if (evt.detail.xhr.status === 400 && target && target.id === "results") {
      evt.detail.shouldSwap = true;
      evt.detail.isError = false;
    }
  });

  // Typing does not fill the history: the first answer of a burst of typing adds one step
  // (Back returns to what was there before), the next keys replace it (the server answers
  // them with HX-Replace-Url). A submitted search, a changed filter, a facet or a page adds
  // a step of its own.
  function isTypingEvent(trigger) {
    return !!(trigger && trigger.type === "input" && trigger.target && trigger.target.id === "q");
  }
  var typingStep = false;  // the address now shown was added by typing
  document.addEventListener("htmx:configRequest", function (evt) {
    if (isTypingEvent(evt.detail.triggeringEvent) && typingStep) {
      evt.detail.headers["X-Trawl-Typing"] = "1";
    }
  });
  document.addEventListener("htmx:afterSwap", function (evt) {
    var config = evt.detail.requestConfig;
    if (evt.detail.target && evt.detail.target.id === "results" && config) {
      typingStep = isTypingEvent(config.triggeringEvent);
    }
  });

  document.addEventListener("htmx:responseError", function (evt) {
    toast(errorText(evt.detail.xhr), "error");
  });
  document.addEventListener("htmx:sendError", function () {
    toast(say("offline", "Cannot reach Trawl. Check your connection and try again."), "error");
  });
  document.addEventListener("trawl:notify", function (evt) {
    toast(evt.detail && evt.detail.message, evt.detail && evt.detail.level);
  });

  // -- phone: "Filters" folds the filters, hints, saved searches and facets away ---------------
  function setFilters(open) {
    var area = document.getElementById("search-area");
    if (!area) return;
    area.classList.toggle("filters-open", open);
    area.querySelectorAll("[data-filters-toggle]").forEach(function (button) {
      button.setAttribute("aria-expanded", open ? "true" : "false");
    });
  }
  document.addEventListener("click", function (evt) {
    var toggle = evt.target.closest && evt.target.closest("[data-filters-toggle]");
    if (!toggle) return;
    evt.preventDefault();  // no #search-area in the address: the class says it is open
    setFilters(!document.getElementById("search-area").classList.contains("filters-open"));
  });

  // The error's "Search syntax" link opens the help beside the box (unfolded on a phone).
  document.addEventListener("click", function (evt) {
    var link = evt.target.closest && evt.target.closest('a[href="#syntax-help"]');
    var help = document.getElementById("syntax-help");
    if (link && help) { setFilters(true); help.open = true; }
  });

  // -- search page: focus keys and arrow navigation --------------------------------------------
  function searchBox() { return document.getElementById("q"); }
  function resultLinks() { return Array.prototype.slice.call(document.querySelectorAll("#results .result-link")); }

  function moveFocus(step) {
    var links = resultLinks();
    if (!links.length) return false;
    var index = links.indexOf(document.activeElement);
    if (index === -1) {
      if (step < 0) return false;
      links[0].focus();
      return true;
    }
    var next = index + step;
    if (next < 0) { searchBox().focus(); return true; }
    links[Math.min(next, links.length - 1)].focus();
    return true;
  }

  document.addEventListener("keydown", function (evt) {
    var box = searchBox();
    var ctrlK = (evt.ctrlKey || evt.metaKey) && !evt.altKey && evt.key.toLowerCase() === "k";
    if (ctrlK || (evt.key === "/" && !isTyping(document.activeElement) && !evt.ctrlKey && !evt.metaKey)) {
      evt.preventDefault();
      if (box) { box.focus(); box.select(); } else { window.location.href = "/"; }
      return;
    }
    if (!box) return;
    var inResults = document.activeElement && document.activeElement.classList.contains("result-link");
    if ((document.activeElement === box || inResults) && (evt.key === "ArrowDown" || evt.key === "ArrowUp")) {
      if (moveFocus(evt.key === "ArrowDown" ? 1 : -1)) evt.preventDefault();
    } else if (inResults && evt.key === "Escape") {
      box.focus();
    }
  });

  document.addEventListener("htmx:afterSettle", function (evt) {
    if (evt.detail.target && evt.detail.target.id === "results") {
      var box = searchBox();
      var q = box ? box.value.trim() : "";
      document.title = (q ? q + " – " : "") + say("searchTitle", "Search – Trawl");
    }
  });

  // -- one state for the filters: the box's `type:` / `source:` terms are the selects' values -
  // (webapp/ui/querybox.py does the same on the server for pages drawn without JavaScript)
  var SELECTS = ["type", "source"];
  function termPattern(field) { return new RegExp("(^|\\s)" + field + ':(?:"([^"]*)"|(\\S+))', "gi"); }
  function termsOf(q, field) {
    var found = [], match, pattern = termPattern(field);
    while ((match = pattern.exec(q)) !== null) found.push(match[2] !== undefined ? match[2] : match[3]);
    return found;
  }
  function withTerm(q, field, value) {
    var rest = q.replace(termPattern(field), " ").split(/\s+/).filter(Boolean).join(" ");
    if (!value) return rest;
    var written = /\s/.test(value) ? '"' + value.replace(/"/g, "") + '"' : value;
    return (rest ? rest + " " : "") + field + ":" + written;
  }
  function selectOf(field) {
    var form = document.getElementById("search-form");
    return form && form.elements.namedItem(field);
  }
  function showTerms() {  // the box was typed in: each select shows its field's one term
    var box = searchBox();
    if (!box) return;
    SELECTS.forEach(function (field) {
      var select = selectOf(field);
      if (!select) return;
      var typed = termsOf(box.value, field);
      var value = typed.length === 1 ? typed[0] : "";
      var option = Array.prototype.find.call(select.options, function (o) {
        return o.value.toLowerCase() === value.toLowerCase();
      });
      if (!option && value) {  // a value the list does not offer (yet): shown as typed
        option = new Option(value, value);
        select.add(option);
      }
      select.value = option ? option.value : "";
    });
  }
  document.addEventListener("input", function (evt) {
    if (evt.target && evt.target.id === "q") showTerms();
  }, true);
  document.addEventListener("change", function (evt) {  // a select was chosen: into the box
    var field = evt.target && evt.target.name;
    var box = searchBox();
    if (!box || SELECTS.indexOf(field) === -1 || evt.target.form !== box.form) return;
    box.value = withTerm(box.value, field, evt.target.value);
  }, true);  // before htmx reads the form

  // -- a session that ended while typing: the login page comes back to the whole search ------
  // The server's redirect names the request that found the session gone (the first key of a
  // word); the box holds what was typed since, so the login's `next` is taken from it once the
  // typing pauses.
  var leaving = null;
  document.addEventListener("htmx:beforeOnLoad", function (evt) {
    var xhr = evt.detail.xhr;
    var target = xhr && xhr.status === 401 && xhr.getResponseHeader("HX-Redirect");
    var box = searchBox();
    if (!target || !box) return;
    evt.preventDefault();
    var go = function () {
      var login = new URL(target, window.location.href);
      var here = new URL(window.location.href);
      here.searchParams.set("q", box.value.trim());
      login.searchParams.set("next", here.pathname + here.search);
      window.location.assign(login.toString());
    };
    clearTimeout(leaving);
    leaving = setTimeout(go, 400);
    box.addEventListener("input", function () { clearTimeout(leaving); leaving = setTimeout(go, 400); });
  });

  // -- document page: next/previous match ------------------------------------------------------
  function setupMatches() {
    var text = document.getElementById("preview-text");
    var nav = document.getElementById("match-nav");
    if (!text || !nav) return;
    var marks = text.querySelectorAll(text.getAttribute("data-marks") || "em");
    var count = document.getElementById("match-count");
    var current = -1;

    function show(index) {
      if (!marks.length) return;
      if (current >= 0) marks[current].classList.remove("current");
      current = (index + marks.length) % marks.length;
      var mark = marks[current];
      mark.classList.add("current");
      mark.scrollIntoView({ block: "center", behavior: "smooth" });
      count.textContent = say("match", "Match %(n)s of %(total)s on this page",
        { n: numberFormat.format(current + 1), total: numberFormat.format(marks.length) });
    }

    document.getElementById("next-match").addEventListener("click", function () { show(current + 1); });
    document.getElementById("prev-match").addEventListener("click", function () { show(current - 1); });
    document.addEventListener("keydown", function (evt) {
      if (isTyping(document.activeElement) || evt.ctrlKey || evt.metaKey || evt.altKey) return;
      if (evt.key === "n") show(current + 1);
      else if (evt.key === "N") show(current - 1);
    });
    if (marks.length) show(0);
  }

  // -- copy buttons ----------------------------------------------------------------------------
  function copyText(text) {
    if (navigator.clipboard && window.isSecureContext) return navigator.clipboard.writeText(text);
    return new Promise(function (resolve, reject) {
      var area = document.createElement("textarea");
      area.value = text;
      area.setAttribute("readonly", "");
      area.style.position = "fixed";
      area.style.opacity = "0";
      document.body.appendChild(area);
      area.select();
      var ok = document.execCommand("copy");
      area.remove();
      if (ok) { resolve(); } else { reject(new Error("copy refused")); }
    });
  }

  document.addEventListener("click", function (evt) {
    var button = evt.target.closest("[data-copy]");
    if (!button) return;
    var source = document.querySelector(button.getAttribute("data-copy"));
    if (!source) return;
    copyText(source.textContent).then(function () {
      var label = button.textContent;
      button.textContent = say("copied", "Copied");
      toast(button.getAttribute("data-copied") || say("pathCopied", "Path copied to the clipboard"), "success");
      setTimeout(function () { button.textContent = label; }, 1500);
    }, function () {
      toast(say("noCopy", "Copying is not allowed here; select the text and copy it by hand."), "error");
    });
  });

  // A button whose work is done ("Clear failed" at 0 failed files) goes away.
  document.addEventListener("htmx:afterRequest", function (evt) {
    var elt = evt.detail.elt;
    if (evt.detail.successful && elt && elt.hasAttribute && elt.hasAttribute("data-hide-after")) {
      elt.hidden = true;
    }
  });

  // -- saved searches: save what the search form holds now (it changes as you type) ------------
  document.addEventListener("submit", function (evt) {
    var save = evt.target.closest && evt.target.closest("form[data-search-form]");
    var search = save && document.querySelector(save.getAttribute("data-search-form"));
    if (!search) return;
    save.querySelectorAll("input[type=hidden]:not([name=csrf_token])").forEach(function (input) {
      var field = search.elements.namedItem(input.name);
      if (field && "value" in field) input.value = field.value;
    });
  }, true);

  // -- times in the browser's time zone (the server writes UTC; the title keeps it) ------------
  // One style for every date: "25 Nov 2026, 21:07 GMT+1" in the page's language (<html lang>,
  // the language the server chose) and the browser's zone; a relative one ("5 minutes ago")
  // keeps its words and shows that in its tooltip.
  var localFormat = new Intl.DateTimeFormat(lang, {
    year: "numeric", month: "short", day: "numeric", hour: "2-digit", minute: "2-digit",
    hour12: false, timeZoneName: "short"
  });
  function localTimes(root) {
    (root || document).querySelectorAll("time[datetime]:not([data-zoned])").forEach(function (el) {
      var when = new Date(el.getAttribute("datetime"));
      if (isNaN(when.getTime())) return;
      if (el.hasAttribute("data-local")) {
        el.textContent = localFormat.format(when);
        el.removeAttribute("data-local");
      } else {
        el.title = localFormat.format(when);
      }
      el.setAttribute("data-zoned", "");
    });
  }
  document.addEventListener("htmx:afterSettle", function (evt) { localTimes(evt.detail.elt); });


  // -- a comic's pages and a presentation's slides: the arrow keys go to the previous / next
  document.addEventListener("keydown", function (evt) {
    if (!document.querySelector("[data-comic-page], [data-slide]")) return;
    var el = document.activeElement;
    if (evt.altKey || evt.ctrlKey || evt.metaKey || evt.shiftKey) return;
    if (el && (el.isContentEditable || ["INPUT", "TEXTAREA", "SELECT"].indexOf(el.tagName) >= 0)) return;
    var rel = evt.key === "ArrowRight" ? "next" : evt.key === "ArrowLeft" ? "prev" : null;
    var link = rel && document.querySelector(".preview-section a[rel='" + rel + "']");
    if (link) { evt.preventDefault(); link.click(); }
  });

  // -- the grid's lightbox: a picture or a video at the size of the screen --------------------
  // A tile is a link to the document page (that is what it does without JavaScript); a click
  // on a picture or a video opens it here, with the previous and next tiles a key away.
  var lightbox = null;
  var shown = -1;
  function tiles() {
    return Array.prototype.slice.call(document.querySelectorAll("#results [data-lightbox]"));
  }
  function makeLightbox() {
    var box = document.createElement("dialog");
    box.className = "lightbox";
    box.setAttribute("aria-label", say("picture", "Picture"));
    box.innerHTML =
      '<div class="lightbox-stage" data-lightbox-stage></div>' +
      '<div class="lightbox-bar">' +
      '<button type="button" data-lightbox-step="-1">←</button>' +
      '<span class="lightbox-title" data-lightbox-title></span>' +
      '<a data-lightbox-open href="#"></a>' +
      '<button type="button" data-lightbox-step="1">→</button>' +
      '<button type="button" data-lightbox-close>✕</button></div>';
    box.querySelector('[data-lightbox-step="-1"]').setAttribute("aria-label", say("previous", "Previous"));
    box.querySelector('[data-lightbox-step="1"]').setAttribute("aria-label", say("next", "Next"));
    box.querySelector("[data-lightbox-close]").setAttribute("aria-label", say("close", "Close"));
    box.querySelector("[data-lightbox-open]").textContent = say("details", "Details");
    box.addEventListener("click", function (evt) {
      var step = evt.target.closest("[data-lightbox-step]");
      if (step) { showTile(shown + parseInt(step.getAttribute("data-lightbox-step"), 10)); return; }
      if (evt.target.closest("[data-lightbox-close]") || evt.target.hasAttribute("data-lightbox-stage")) box.close();
    });
    box.addEventListener("keydown", function (evt) {
      if (evt.key === "ArrowRight") { evt.preventDefault(); showTile(shown + 1); }
      if (evt.key === "ArrowLeft") { evt.preventDefault(); showTile(shown - 1); }
    });
    box.addEventListener("close", function () {
      var stage = box.querySelector("[data-lightbox-stage]");
      stage.textContent = "";  // stops a video
      var all = tiles();
      if (all[shown]) all[shown].focus();
    });
    document.body.appendChild(box);
    return box;
  }
  function showTile(index) {
    var all = tiles();
    if (!all.length) return;
    shown = (index + all.length) % all.length;
    var tile = all[shown];
    var stage = lightbox.querySelector("[data-lightbox-stage]");
    stage.textContent = "";
    var media;
    if (tile.getAttribute("data-lightbox") === "video") {
      media = document.createElement("video");
      media.controls = true;
      media.autoplay = true;
      media.preload = "metadata";
    } else {
      media = document.createElement("img");
      media.alt = tile.getAttribute("data-title") || "";
    }
    media.src = tile.getAttribute("data-src");
    media.setAttribute("data-lightbox-media", "");
    stage.appendChild(media);
    lightbox.querySelector("[data-lightbox-title]").textContent = tile.getAttribute("data-title") || "";
    lightbox.querySelector("[data-lightbox-open]").href = tile.getAttribute("href");
    lightbox.setAttribute("aria-label", tile.getAttribute("data-title") || say("picture", "Picture"));
  }
  document.addEventListener("click", function (evt) {
    var tile = evt.target.closest && evt.target.closest("#results [data-lightbox]");
    if (!tile || evt.button !== 0 || evt.ctrlKey || evt.metaKey || evt.shiftKey || evt.altKey) return;
    if (typeof HTMLDialogElement === "undefined") return;  // the document page, as without JS
    evt.preventDefault();
    lightbox = lightbox || makeLightbox();
    showTile(tiles().indexOf(tile));
    if (!lightbox.open) lightbox.showModal();
  });

  setupMatches();
  localTimes(document);
})();
