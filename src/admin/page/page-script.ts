/**
 * The inspector's only script, inlined in every page. A button with `data-action` POSTs JSON to
 * `<data-api>/<action>` (with `X-Durable-Admin: 1`, which an action signed in by cookie needs) with its
 * `data-body` merged with the fields of its form (fields marked
 * `data-json` are parsed as JSON), then reloads and shows what was recorded. A live run's page reloads
 * when the run changes (every 1.5 s it asks the API), so a resumed run is seen finishing.
 */
export const PAGE_SCRIPT = `(function () {
  var body = document.body, flashEl = document.getElementById('flash');
  function flash(text, bad) { flashEl.textContent = text; flashEl.className = bad ? 'err' : 'ok'; }
  var saved = sessionStorage.getItem('durable-flash');
  if (saved) { sessionStorage.removeItem('durable-flash'); flash(saved, false); }
  function problem(data, status) {
    if (data && data.errors) return data.errors.map(function (e) { return e.field + ': ' + e.messages.join(', '); }).join('; ');
    return (data && data.message) || ('HTTP ' + status);
  }
  document.addEventListener('click', function (ev) {
    var btn = ev.target.closest && ev.target.closest('[data-action]');
    if (!btn) return;
    ev.preventDefault();
    var payload = JSON.parse(btn.getAttribute('data-body') || '{}');
    var form = btn.closest('form');
    try {
      if (form) Array.prototype.forEach.call(form.elements, function (el) {
        if (!el.name || el.value === '') return;
        payload[el.name] = el.hasAttribute('data-json') ? JSON.parse(el.value) : el.value;
      });
    } catch (e) { flash('Not valid JSON: ' + e.message, true); return; }
    btn.disabled = true;
    fetch(body.getAttribute('data-api') + '/' + btn.getAttribute('data-action'), {
      method: 'POST', credentials: 'same-origin',
      headers: { 'content-type': 'application/json', accept: 'application/json', 'x-durable-admin': '1' },
      body: JSON.stringify(payload)
    }).then(function (res) {
      return res.json().catch(function () { return {}; }).then(function (data) {
        if (!res.ok) { btn.disabled = false; flash(problem(data, res.status), true); return; }
        sessionStorage.setItem('durable-flash', btn.getAttribute('data-action') + ' recorded (by ' + (data.by || '?') + ')');
        location.reload();
      });
    }, function (err) { btn.disabled = false; flash(String(err), true); });
  });
  var live = body.getAttribute('data-live') === 'true', auto = document.getElementById('auto-refresh');
  if (live) setInterval(function () {
    if (auto && !auto.checked) return;
    fetch(body.getAttribute('data-api'), { credentials: 'same-origin', headers: { accept: 'application/json' } })
      .then(function (res) { return res.ok ? res.json() : null; })
      .then(function (d) { if (d && d.run && d.run.updatedAt !== body.getAttribute('data-updated')) location.reload(); })
      .catch(function () {});
  }, 1500);
})();`;
