// The verify page: loads verify.wasm (auditor verify compiled to
// WebAssembly), hands it the chosen File and the keys, and shows its
// report. The file is read by the WebAssembly code in slices; nothing is
// sent anywhere. document.body.dataset.state is "loading", "ready",
// "verifying" or "done" (tests wait on it).
"use strict";

(() => {
  const $ = (id) => document.getElementById(id);
  const setState = (s) => { document.body.dataset.state = s; };

  // A page that verifies evidence must not be dressed up by another site.
  if (window.top !== window.self) {
    document.body.textContent = "This page does not run inside a frame: open it directly.";
    return;
  }

  let wasmMemory = null;
  let peakMemory = 0;

  function fmtBytes(n) {
    const u = ["bytes", "KiB", "MiB", "GiB"];
    let i = 0;
    while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
    return (i === 0 ? n : n.toFixed(1)) + " " + u[i];
  }

  async function load() {
    setState("loading");
    const go = new Go();
    let inst;
    try {
      const resp = fetch("verify.wasm");
      try {
        inst = (await WebAssembly.instantiateStreaming(resp, go.importObject)).instance;
      } catch (e) {
        // A static host that serves .wasm with another media type.
        const buf = await (await fetch("verify.wasm")).arrayBuffer();
        inst = (await WebAssembly.instantiate(buf, go.importObject)).instance;
      }
    } catch (e) {
      $("status").textContent = "The verifier could not be loaded: " + e;
      $("verify").textContent = "Unavailable";
      setState("failed");
      return;
    }
    wasmMemory = inst.exports.mem;
    go.run(inst); // defines runsealVerify and runsealCancel, then waits for calls
    $("verify").disabled = false;
    $("verify").textContent = "Verify";
    setState("ready");
  }

  // Loading key files fills their text boxes, so what is checked is shown.
  function keyFile(inputId, areaId, nameTarget) {
    $(inputId).addEventListener("change", async (ev) => {
      const texts = [];
      for (const f of ev.target.files) {
        texts.push((await f.text()).trim());
        if (nameTarget) nameTarget.name = f.name;
      }
      $(areaId).value = texts.join("\n");
    });
  }
  const policyName = { name: "" };
  keyFile("log-key-file", "log-key");
  keyFile("disclosure-key-file", "disclosure-key");
  keyFile("witness-file", "witness");
  keyFile("policy-file", "policy", policyName);
  $("policy").addEventListener("input", () => { policyName.name = ""; });

  function show(res, name) {
    const v = $("verdict");
    v.className = "verdict " + (res.verdict || "usage");
    v.textContent = res.verdict ? name + ": " + res.headline : "Nothing was verified: the keys cannot be used";
    $("sha256-row").hidden = $("sha256-val").hidden = $("report-section").hidden = !res.verdict;
    $("exit").textContent = res.exitCode + " — " + res.exitMeaning;
    $("sha256").textContent = res.sha256 || "(the file was not read to its end)";
    const err = $("error");
    err.hidden = !res.error;
    err.textContent = res.error ? "auditor: " + res.error : "";
    $("report").textContent = res.report || "";
    const j = $("json");
    if (j.href) URL.revokeObjectURL(j.href);
    if (res.json) {
      j.href = URL.createObjectURL(new Blob([res.json], { type: "application/json" }));
      j.download = name.replace(/\.[^.]*$/, "") + ".report.json";
      j.hidden = false;
    } else {
      j.removeAttribute("href");
      j.hidden = true;
    }
    peakMemory = Math.max(peakMemory, wasmMemory ? wasmMemory.buffer.byteLength : 0);
    const m = $("memory");
    m.dataset.wasmBytes = String(peakMemory);
    m.textContent = res.bytes ? "Read " + fmtBytes(res.bytes) + "; the verifier's memory peaked at " + fmtBytes(peakMemory) + "." : "";
    $("result").hidden = false;
    $("result").scrollIntoView({ block: "start" });
  }

  $("form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const file = $("package").files[0];
    if (!file) {
      $("status").textContent = "Choose a package file first.";
      return;
    }
    const q = $("quorum").value.trim();
    const params = {
      file: file,
      name: file.name,
      logKeys: $("log-key").value,
      disclosureKeys: $("disclosure-key").value,
      policy: $("policy").value,
      policyName: policyName.name,
      witnessKeys: $("witness").value,
      quorum: q === "" ? 0 : Number(q),
      onProgress: (read, total) => {
        const p = $("progress");
        p.max = total || 1;
        p.value = read;
        $("status").textContent = "Verifying… " + fmtBytes(read) + " of " + fmtBytes(total);
      },
    };
    setState("verifying");
    $("result").hidden = true;
    $("verify").disabled = true;
    $("cancel").hidden = false;
    $("progress").hidden = false;
    $("progress").value = 0;
    $("status").textContent = "Verifying…";
    const started = performance.now();
    let res;
    try {
      res = await globalThis.runsealVerify(params);
    } catch (e) {
      res = { exitCode: 3, exitMeaning: "no verdict", error: String(e) };
    }
    const secs = (performance.now() - started) / 1000;
    $("status").textContent = res.verdict ? "Done in " + secs.toFixed(1) + " s." : "";
    $("verify").disabled = false;
    $("cancel").hidden = true;
    $("progress").hidden = true;
    show(res, file.name);
    document.body.dataset.seconds = secs.toFixed(3);
    setState("done");
  });
  $("cancel").addEventListener("click", () => globalThis.runsealCancel && globalThis.runsealCancel());

  load();
})();
