// Passkeys (WebAuthn) for the forms that carry data-ceremony: the form's
// submit asks the server for the ceremony's options (data-begin), lets the
// browser create or use the passkey, and posts the answer in the form's
// credential field. The server checks everything; without this script the
// form posts no credential and is refused.
(function () {
  "use strict";
  function b64urlToBuf(s) {
    s = s.replace(/-/g, "+").replace(/_/g, "/");
    while (s.length % 4) { s += "="; }
    var bin = atob(s), out = new Uint8Array(bin.length);
    for (var i = 0; i < bin.length; i++) { out[i] = bin.charCodeAt(i); }
    return out.buffer;
  }
  function bufToB64url(buf) {
    var bytes = new Uint8Array(buf), bin = "";
    for (var i = 0; i < bytes.length; i++) { bin += String.fromCharCode(bytes[i]); }
    return btoa(bin).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  }
  function creationOptions(pk) {
    pk.challenge = b64urlToBuf(pk.challenge);
    pk.user.id = b64urlToBuf(pk.user.id);
    (pk.excludeCredentials || []).forEach(function (c) { c.id = b64urlToBuf(c.id); });
    return pk;
  }
  function requestOptions(pk) {
    pk.challenge = b64urlToBuf(pk.challenge);
    (pk.allowCredentials || []).forEach(function (c) { c.id = b64urlToBuf(c.id); });
    return pk;
  }
  function encode(cred) {
    var r = cred.response, out = {
      id: cred.id, rawId: bufToB64url(cred.rawId), type: cred.type,
      clientExtensionResults: cred.getClientExtensionResults ? cred.getClientExtensionResults() : {},
      response: { clientDataJSON: bufToB64url(r.clientDataJSON) }
    };
    if (cred.authenticatorAttachment) { out.authenticatorAttachment = cred.authenticatorAttachment; }
    if (r.attestationObject) {
      out.response.attestationObject = bufToB64url(r.attestationObject);
      if (r.getTransports) { out.response.transports = r.getTransports(); }
    } else {
      out.response.authenticatorData = bufToB64url(r.authenticatorData);
      out.response.signature = bufToB64url(r.signature);
      if (r.userHandle) { out.response.userHandle = bufToB64url(r.userHandle); }
    }
    return JSON.stringify(out);
  }
  function run(form) {
    var problem = form.querySelector(".passkey-problem");
    function fail(msg) {
      if (problem) { problem.textContent = msg; problem.hidden = false; }
    }
    if (!window.PublicKeyCredential || !navigator.credentials) {
      fail("This browser does not support passkeys. Use a current browser, or sign in again at your identity provider where that is enough.");
      return;
    }
    var body = new URLSearchParams();
    body.set("csrf", form.elements.csrf.value);
    if (form.elements.label) { body.set("label", form.elements.label.value); }
    var create = form.getAttribute("data-ceremony") === "create";
    fetch(form.getAttribute("data-begin"), { method: "POST", credentials: "same-origin", body: body })
      .then(function (r) {
        return r.json().catch(function () { return { problem: "The server's answer could not be read (status " + r.status + "). Reload the page and try again." }; });
      })
      .then(function (d) {
        if (d.problem) { fail(d.problem); return null; }
        return create ? navigator.credentials.create({ publicKey: creationOptions(d.publicKey) })
          : navigator.credentials.get({ publicKey: requestOptions(d.publicKey) });
      })
      .then(function (cred) {
        if (!cred) { return; }
        form.elements.credential.value = encode(cred);
        form.submit();
      })
      .catch(function (e) {
        fail("The passkey was not " + (create ? "created" : "used") + " (" + (e && e.name ? e.name : "cancelled") + "). Nothing was done; try again.");
      });
  }
  document.querySelectorAll("form[data-ceremony]").forEach(function (form) {
    form.addEventListener("submit", function (ev) {
      ev.preventDefault();
      run(form);
    });
  });
})();
