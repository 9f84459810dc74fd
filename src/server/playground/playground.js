// The codebox playground: a notebook on one box of this server, a files panel and a chat tab
// over POST /v1/ask. Plain JavaScript, no framework, no build step, nothing fetched but this
// server's API.
//
// Everything a box sends back is hostile: it goes into the page as text (textContent), as an
// <img> of a data: URL, or as HTML inside an iframe with sandbox="" (no script, no same
// origin), never parsed as markup of the page. A page that ran box HTML would hand the token
// to the box.
"use strict";

(() => {
  const TOKEN_KEY = "codebox-token";
  const MAX_TEXT = 1 << 20;  // characters of one output shown; the rest is cut in the page
  const BASE64 = /^[A-Za-z0-9+/=\s]*$/;

  const $ = (id) => document.getElementById(id);
  let box = null;          // the box record of POST /v1/boxes
  let boxReady = Promise.resolve();  // settles when the box being started is there (or not)
  let tokenWaiters = [];   // resolve() of calls waiting for a token

  // ---- DOM helpers: every text goes in as textContent ----
  function el(tag, props = {}, children = []) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(props)) {
      if (key === "text") node.textContent = value;
      else if (key === "class") node.className = value;
      else node.setAttribute(key, value);
    }
    for (const child of children) node.append(child);
    return node;
  }

  function capped(text) {
    return text.length > MAX_TEXT
      ? text.slice(0, MAX_TEXT) + "\n[... " + (text.length - MAX_TEXT) + " more characters not shown]"
      : text;
  }

  let noticeTimer = 0;
  function notice(text, kind = "info") {
    const bar = $("notice");
    bar.textContent = text;
    bar.className = kind;
    bar.hidden = !text;
    clearTimeout(noticeTimer);
    if (kind === "info") noticeTimer = setTimeout(() => { bar.hidden = true; }, 8000);
  }

  // ---- The API: the token, errors as exceptions that say what happened ----
  class ApiError extends Error {
    constructor(status, code, message) {
      super(message);
      this.status = status;
      this.code = code;
    }
  }

  function waitForToken(message) {
    $("token-message").textContent = message;
    $("token-bar").hidden = false;
    $("token-input").focus();
    return new Promise((resolve) => tokenWaiters.push(resolve));
  }

  async function api(method, path, { body, json, accept, raw } = {}) {
    for (;;) {
      const headers = {};
      const token = sessionStorage.getItem(TOKEN_KEY);
      if (token) headers["Authorization"] = "Bearer " + token;
      if (accept) headers["Accept"] = accept;
      let payload = body;
      if (json !== undefined) {
        headers["Content-Type"] = "application/json";
        payload = JSON.stringify(json);
      } else if (body !== undefined) {
        // Never let a file's type (application/x-tar) change what the server does with it.
        headers["Content-Type"] = "application/octet-stream";
      }
      const response = await fetch(path, { method, headers, body: payload });
      if (response.status === 401) {
        const why = await errorOf(response);
        await waitForToken(why.message);
        continue;
      }
      if (raw || response.ok) return response;
      const error = await errorOf(response);
      throw new ApiError(response.status, error.code, error.message);
    }
  }

  async function errorOf(response) {
    try {
      const body = await response.json();
      if (body && body.error) return { code: String(body.error.code), message: String(body.error.message) };
    } catch (e) { /* not the API's JSON */ }
    return { code: "http_" + response.status, message: "HTTP " + response.status };
  }

  // Server-sent events of a fetch response: yields {event, data} with data parsed as JSON.
  async function* events(response) {
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true }).replace(/\r\n/g, "\n");
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        let event = "message";
        const data = [];
        for (const line of block.split("\n")) {
          if (line.startsWith("event:")) event = line.slice(6).trim();
          else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
        }
        if (!data.length) continue;
        let parsed;
        try { parsed = JSON.parse(data.join("\n")); } catch (e) { continue; }
        yield { event, data: parsed };
      }
    }
  }

  // ---- The box ----
  async function startBox() {
    $("isolation").textContent = "starting a box...";
    const response = await api("POST", "/v1/boxes", { json: {} });
    box = await response.json();
    showBox();
    listFiles();
  }

  function showBox() {
    $("isolation").textContent = box ? String(box.driver) : "no box";
    $("isolation").title = box && box.limits ? "limits: " + box.limits.join(", ") : "";
    $("box-image").textContent = box ? "image " + String(box.image) : "";
    $("box-id").textContent = box ? String(box.id) : "";
  }

  // Waits for the box being started, so a cell run at once does not fail for want of it.
  async function ready() {
    try { await boxReady; } catch (e) { /* said in the notice */ }
  }

  function boxPath(suffix) {
    if (!box) throw new ApiError(0, "no_box", "no box yet: press New box");
    return "/v1/boxes/" + encodeURIComponent(box.id) + suffix;
  }

  // A box call that failed because the box is gone (reaped when idle): say so.
  function explain(error) {
    if (error instanceof ApiError && error.status === 404 && error.message.includes("no box")) {
      return error.message + " (press New box for a fresh one)";
    }
    return error.message || String(error);
  }

  // ---- Rendering a cell's output (shared by the notebook and the chat) ----
  class Output {
    constructor(container) {
      this.container = container;
      this.streams = {};
    }
    // A stream's chunks go into one text node (appendData, not a copy of all so far); past
    // MAX_TEXT characters only a count of what is left out grows.
    text(kind, chunk) {
      let pre = this.streams[kind];
      if (!pre || pre !== this.container.lastChild) {
        pre = el("pre", { class: kind });
        pre.append(document.createTextNode(""));
        pre.shown = 0;
        pre.cut = 0;
        this.container.append(pre);
        this.streams[kind] = pre;
      }
      const room = MAX_TEXT - pre.shown;
      pre.firstChild.appendData(chunk.slice(0, Math.max(room, 0)));
      pre.shown += Math.min(chunk.length, Math.max(room, 0));
      if (chunk.length > room) {
        pre.cut += chunk.length - Math.max(room, 0);
        if (!pre.note) pre.append(pre.note = el("span", { class: "note" }));
        pre.note.textContent = "\n[... " + pre.cut + " more characters not shown]";
      }
    }
    result(result) {
      const data = (result && result.data) || {};
      const image = ["image/png", "image/jpeg"].find((m) => typeof data[m] === "string");
      if (image) {
        const b64 = data[image];
        if (!BASE64.test(b64)) return this.note(image + " left out: not base64");
        this.container.append(el("img", { class: "result-image", alt: "chart", src: "data:" + image + ";base64," + b64.replace(/\s/g, "") }));
      } else if (typeof data["image/svg+xml"] === "string") {
        // An SVG as an <img> runs no script.
        this.container.append(el("img", { class: "result-image", alt: "chart", src: "data:image/svg+xml;charset=utf-8," + encodeURIComponent(data["image/svg+xml"]) }));
      } else if (typeof data["text/html"] === "string") {
        // Tables (DataFrames): HTML of the box, only in a frame with every sandbox flag off.
        const frame = el("iframe", { class: "result-html", sandbox: "", title: "HTML output (sandboxed)" });
        frame.srcdoc = data["text/html"];
        this.container.append(frame);
      } else if (typeof data["text/plain"] === "string") {
        this.container.append(el("pre", { class: "result-text", text: capped(data["text/plain"]) }));
      }
    }
    error(error) {
      const text = error.traceback || (String(error.name) + ": " + String(error.value));
      this.container.append(el("pre", { class: "traceback", text: capped(text) }));
    }
    note(text, kind = "note") {
      this.container.append(el("div", { class: kind, text }));
    }
    // The whole result of a cell when it was not streamed (the chat's `result` event).
    execution(e) {
      for (const chunk of (e.logs && e.logs.stdout) || []) this.text("stdout", chunk);
      for (const chunk of (e.logs && e.logs.stderr) || []) this.text("stderr", chunk);
      for (const r of e.results || []) this.result(r);
      this.finish(e);
    }
    finish(e) {
      if (e.error) this.error(e.error);
      const flags = [];
      if (e.timed_out) flags.push("timed out");
      if (e.kernel_restarted) flags.push("kernel restarted: variables lost");
      if (e.out_of_memory) flags.push("out of memory");
      if (e.output_truncated) flags.push("output truncated");
      if (flags.length) this.note(flags.join(", "), "warning");
    }
  }

  // ---- The notebook ----
  function addCell(code = "", after = null) {
    const input = el("textarea", { class: "code", rows: "3", spellcheck: "false", "aria-label": "code" });
    input.value = code;
    const run = el("button", { type: "button", class: "run", text: "Run" });
    const prompt = el("span", { class: "prompt", text: "[ ]" });
    const output = el("div", { class: "output" });
    const status = el("div", { class: "cell-status muted" });
    const cell = el("div", { class: "cell" }, [el("div", { class: "cell-input" }, [prompt, input, run]), output, status]);
    cell.running = false;
    run.addEventListener("click", () => (cell.running ? interrupt() : runCell(cell)));
    input.addEventListener("keydown", (e) => {
      if (e.key === "Enter" && e.shiftKey) {
        e.preventDefault();
        runCell(cell);
        const next = cell.nextElementSibling || addCell("", cell);
        next.querySelector("textarea").focus();
      } else if (e.key === "Tab" && !e.shiftKey) {
        e.preventDefault();
        input.setRangeText("    ", input.selectionStart, input.selectionEnd, "end");
      }
    });
    input.addEventListener("input", () => grow(input));
    if (after) after.after(cell); else $("cells").append(cell);
    grow(input);
    return cell;
  }

  function grow(textarea) {
    textarea.style.height = "auto";
    textarea.style.height = Math.min(textarea.scrollHeight + 2, 600) + "px";
  }

  async function interrupt() {
    await ready();
    try { await api("POST", boxPath("/interrupt")); } catch (e) { notice(explain(e), "error"); }
  }

  async function runCell(cell) {
    if (cell.running) return;
    const code = cell.querySelector("textarea").value;
    const container = cell.querySelector(".output");
    const status = cell.querySelector(".cell-status");
    const button = cell.querySelector("button.run");
    container.replaceChildren();
    status.textContent = "running...";
    cell.classList.add("running");
    cell.running = true;
    button.textContent = "Stop";
    const out = new Output(container);
    const started = performance.now();
    await ready();
    try {
      const response = await api("POST", boxPath("/run_code"), { json: { code }, accept: "text/event-stream" });
      let finished = false;
      for await (const { event, data } of events(response)) {
        if (event === "stdout" || event === "stderr") out.text(event, String(data.text));
        else if (event === "result") out.result(data);
        else if (event === "done") {
          finished = true;
          out.finish(data);
          cell.querySelector(".prompt").textContent = "[" + Number(data.execution_count) + "]";
          status.textContent = Number(data.duration_ms) + " ms in " + String(data.driver);
        } else if (event === "error") {
          finished = true;
          out.note(String(data.error && data.error.message), "error");
          status.textContent = "failed";
        }
      }
      if (!finished) status.textContent = "the stream ended early (" + Math.round(performance.now() - started) + " ms)";
    } catch (e) {
      out.note(explain(e), "error");
      status.textContent = "failed";
    } finally {
      cell.running = false;
      cell.classList.remove("running");
      button.textContent = "Run";
    }
  }

  async function restartKernel() {
    await ready();
    try {
      await api("POST", boxPath("/restart"));
      for (const prompt of document.querySelectorAll(".cell .prompt")) prompt.textContent = "[ ]";
      notice("Kernel restarted: variables are gone, files are kept.");
    } catch (e) {
      notice(explain(e), "error");
    }
  }

  async function newBox() {
    const old = box;
    box = null;
    showBox();
    if (old) {
      try { await api("DELETE", "/v1/boxes/" + encodeURIComponent(old.id)); } catch (e) { /* gone already */ }
    }
    try {
      boxReady = startBox();
      await boxReady;
      notice("A fresh box: variables and files are gone.");
    } catch (e) {
      notice("Could not start a box: " + explain(e), "error");
      $("isolation").textContent = "no box";
    }
  }

  // ---- Files: upload into /data, list and download ----
  async function upload(files) {
    const status = $("upload-status");
    await ready();
    for (const file of files) {
      const path = "/data/" + file.name;
      status.textContent = "uploading " + path + "...";
      try {
        await api("PUT", boxPath("/files?path=" + encodeURIComponent(path)), { body: file });
        status.textContent = "uploaded " + path + " (" + file.size + " bytes)";
      } catch (e) {
        status.textContent = "upload of " + path + " failed: " + explain(e);
        return;
      }
    }
    if ($("list-path").value === "/data") listFiles();
  }

  async function listFiles() {
    const list = $("file-list");
    const dir = $("list-path").value.trim() || "/work";
    try {
      const response = await api("GET", boxPath("/files?list=1&path=" + encodeURIComponent(dir)));
      const body = await response.json();
      const entries = Array.isArray(body.entries) ? body.entries : [];
      list.replaceChildren();
      if (!entries.length) list.append(el("li", { class: "muted", text: "(empty)" }));
      for (const entry of entries) {
        const name = String(entry.name);
        const path = String(entry.path);
        if (entry.type === "dir") {
          const open = el("button", { type: "button", class: "link", text: name + "/" });
          open.addEventListener("click", () => { $("list-path").value = path; listFiles(); });
          list.append(el("li", {}, [open]));
        } else {
          const get = el("button", { type: "button", class: "link", text: name, title: "download " + path });
          get.addEventListener("click", () => download(path, name));
          list.append(el("li", {}, [get, el("span", { class: "muted", text: " " + Number(entry.size) + " B" })]));
        }
      }
    } catch (e) {
      list.replaceChildren(el("li", { class: "error", text: explain(e) }));
    }
  }

  async function download(path, name) {
    try {
      const response = await api("GET", boxPath("/files?path=" + encodeURIComponent(path)));
      // application/octet-stream: the browser saves it and never renders it as a page of ours.
      const blob = new Blob([await response.arrayBuffer()], { type: "application/octet-stream" });
      const url = URL.createObjectURL(blob);
      const link = el("a", { href: url, download: name });
      document.body.append(link);
      link.click();
      link.remove();
      setTimeout(() => URL.revokeObjectURL(url), 60000);
    } catch (e) {
      notice("download of " + path + " failed: " + explain(e), "error");
    }
  }

  // ---- The chat: POST /v1/ask, its steps as they stream ----
  async function ask(task) {
    const log = $("chat-log");
    log.append(el("div", { class: "chat-user", text: task }));
    const turn = el("div", { class: "chat-turn" });
    log.append(turn);
    const send = $("chat-send");
    send.disabled = true;
    let stream = null;  // the model's text of the current turn, as it streams
    let thinking = null;  // the model's thinking of the current turn: progress, not the answer
    const say = (cls, text) => { const d = el("div", { class: cls, text }); turn.append(d); return d; };
    try {
      const response = await api("POST", "/v1/ask", { json: { task }, accept: "text/event-stream" });
      for await (const { event, data } of events(response)) {
        if (event === "box") say("chat-note", "running in a " + String(data.driver) + " box");
        else if (event === "thinking") {
          if (!thinking) thinking = say("chat-note muted chat-thinking", "thinking: ");
          thinking.textContent = capped(thinking.textContent + String(data.text));
        } else if (event === "text") {
          thinking = null;
          if (!stream) stream = say("chat-text", "");
          stream.textContent = capped(stream.textContent + String(data.text));
        } else if (event === "code") {
          stream = null;
          thinking = null;
          turn.append(el("div", { class: "chat-step", text: "step " + Number(data.step) }),
                      el("pre", { class: "chat-code", text: capped(String(data.code)) }));
        } else if (event === "result") {
          const container = el("div", { class: "output chat-output" });
          turn.append(container);
          if (data.result) new Output(container).execution(data.result);
          if (data.error) new Output(container).note(String(data.error), "error");
        } else if (event === "notice") say("chat-note", String(data.text));
        else if (event === "answer") {
          const answer = String(data.text);
          // The streamed words are the answer's start (a call or a fence held back the rest).
          if (stream && answer.trim().startsWith(stream.textContent.trim())) stream.remove();
          stream = null;
          say("chat-answer", answer);
          if (data.stop_reason !== "answer") {
            say("chat-note", "stopped: " + String(data.stop_reason) +
                (data.stop_detail ? " (" + String(data.stop_detail) + ")" : ""));
          }
        } else if (event === "done") {
          say("chat-note muted", String(data.model) + " in " + String(data.driver) + ", " + Number(data.duration_ms) + " ms");
        } else if (event === "error") {
          say("error", String(data.error && data.error.message));
        }
      }
    } catch (e) {
      say("error", explain(e));
    } finally {
      send.disabled = false;
      turn.scrollIntoView({ block: "end" });
    }
  }

  // ---- Wiring ----
  function showTab(name) {
    $("notebook-view").hidden = name !== "notebook";
    $("chat-view").hidden = name !== "chat";
    $("tab-notebook").classList.toggle("active", name === "notebook");
    $("tab-chat").classList.toggle("active", name === "chat");
  }

  function wire() {
    $("tab-notebook").addEventListener("click", () => showTab("notebook"));
    $("tab-chat").addEventListener("click", () => showTab("chat"));
    $("add-cell").addEventListener("click", () => addCell().querySelector("textarea").focus());
    $("restart").addEventListener("click", restartKernel);
    $("new-box").addEventListener("click", newBox);
    $("upload").addEventListener("change", (e) => { upload(Array.from(e.target.files)); e.target.value = ""; });
    $("list-form").addEventListener("submit", (e) => { e.preventDefault(); listFiles(); });
    $("token-form").addEventListener("submit", (e) => {
      e.preventDefault();
      sessionStorage.setItem(TOKEN_KEY, $("token-input").value.trim());
      $("token-input").value = "";
      $("token-bar").hidden = true;
      const waiting = tokenWaiters;
      tokenWaiters = [];
      for (const resolve of waiting) resolve();
    });
    $("chat-form").addEventListener("submit", (e) => {
      e.preventDefault();
      const task = $("chat-input").value.trim();
      if (!task) return;
      $("chat-input").value = "";
      ask(task);
    });
    $("chat-input").addEventListener("keydown", (e) => {
      if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); $("chat-form").requestSubmit(); }
    });
    // The box goes with the page (else it waits for the server's idle timeout).
    window.addEventListener("pagehide", () => {
      if (!box) return;
      const headers = {};
      const token = sessionStorage.getItem(TOKEN_KEY);
      if (token) headers["Authorization"] = "Bearer " + token;
      fetch("/v1/boxes/" + encodeURIComponent(box.id), { method: "DELETE", headers, keepalive: true });
    });
  }

  wire();
  addCell("print('hello from the box')");
  boxReady = startBox();
  boxReady.catch((e) => {
    notice("Could not start a box: " + explain(e), "error");
    $("isolation").textContent = "no box";
  });
})();
