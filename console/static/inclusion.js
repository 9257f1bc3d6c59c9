// The one script of the runseal console: it checks a run's inclusion proof
// in the browser. It recomputes the RFC 6962 / RFC 9162 root from the
// leaf, its index, the tree size and the proof with SHA-256 (SubtleCrypto)
// and compares it with the witnessed checkpoint's root shown on the page.
// The page shows the server's own check without it.
"use strict";

(function () {
  const el = document.getElementById("inclusion-browser");
  if (!el) return;

  function b64(s) {
    const bin = atob(s);
    const out = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
    return out;
  }
  function equal(a, b) {
    if (a.length !== b.length) return false;
    let d = 0;
    for (let i = 0; i < a.length; i++) d |= a[i] ^ b[i];
    return d === 0;
  }
  async function sha256(...parts) {
    let n = 0;
    for (const p of parts) n += p.length;
    const buf = new Uint8Array(n);
    let o = 0;
    for (const p of parts) { buf.set(p, o); o += p.length; }
    return new Uint8Array(await crypto.subtle.digest("SHA-256", buf));
  }
  const LEAF = new Uint8Array([0]), NODE = new Uint8Array([1]);

  // RFC 9162 section 2.1.3.2: verify an inclusion proof.
  async function root(leaf, index, size, proof) {
    if (index >= size) throw new Error("index " + index + " is not below size " + size);
    let fn = index, sn = size - 1n;
    let r = await sha256(LEAF, leaf);
    for (const p of proof) {
      if (p.length !== 32) throw new Error("a proof hash is not 32 bytes");
      if (sn === 0n) throw new Error("the proof is longer than the tree is deep");
      if ((fn & 1n) === 1n || fn === sn) {
        r = await sha256(NODE, p, r);
        if ((fn & 1n) === 0n) {
          while ((fn & 1n) === 0n && fn !== 0n) { fn >>= 1n; sn >>= 1n; }
        }
      } else {
        r = await sha256(NODE, r, p);
      }
      fn >>= 1n; sn >>= 1n;
    }
    if (sn !== 0n) throw new Error("the proof is shorter than the tree is deep");
    return r;
  }

  function show(ok, text) {
    el.textContent = "";
    const s = document.createElement("span");
    s.className = ok ? "pill good" : "pill bad";
    s.textContent = text;
    el.appendChild(s);
  }

  async function check() {
    if (!window.crypto || !crypto.subtle) {
      show(false, "not run: this browser offers SubtleCrypto only on https:// or localhost pages");
      return;
    }
    const d = el.dataset;
    const proof = d.proof.trim() === "" ? [] : d.proof.trim().split(/\s+/).map(b64);
    const got = await root(b64(d.leaf), BigInt(d.index), BigInt(d.size), proof);
    if (equal(got, b64(d.root))) {
      show(true, "verified in this browser: the proof leads to the witnessed root");
    } else {
      show(false, "FAILED in this browser: the proof does not lead to the witnessed root");
    }
  }
  check().catch(function (e) { show(false, "FAILED in this browser: " + e.message); });
})();
