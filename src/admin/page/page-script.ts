/**
 * The inspector's only script, inlined in every page. A button with `data-action` POSTs JSON to
 * `<data-api>/<action>` (with `X-Durable-Admin: 1`, which an action signed in by cookie needs) with its
 * `data-body` merged with the fields of its form (fields marked `data-json` are parsed as JSON, a ticked
 * checkbox is `true`), then
 * reloads and shows what was recorded (a fork: opens the fork's page). A live run's page asks `<data-api>/changes?since=<token>` every
 * 1.5 s (one cheap read, no run data); when the run changed it fetches only the events after the newest
 * one it shows (`events?after=`) and appends them (as text, never markup), and it reloads when the status
 * changed (or more than a page of events arrived), so a resumed run is seen finishing. Every run page
 * follows the run's progress stream (`<data-api>/stream`, Server-Sent Events: every entry once, in order;
 * the browser reconnects with Last-Event-ID) into its "Progress stream" table until the `end` event.
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
        if (el.type === 'checkbox') { if (el.checked) payload[el.name] = true; return; }
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
        var action = btn.getAttribute('data-action');
        sessionStorage.setItem('durable-flash', action + ' recorded (by ' + (data.by || '?') + ')');
        var here = body.getAttribute('data-api');
        if (action === 'fork' && data.run) location.href = here.slice(0, here.lastIndexOf('/api/runs/')) + '/runs/' + data.run.id;
        else location.reload();
      });
    }, function (err) { btn.disabled = false; flash(String(err), true); });
  });
  var live = body.getAttribute('data-live') === 'true', auto = document.getElementById('auto-refresh');
  var api = body.getAttribute('data-api'), token = body.getAttribute('data-token');
  var status = body.getAttribute('data-status'), lastEvent = body.getAttribute('data-last-event') || '0';
  var feed = document.getElementById('live-events'), busy = false;
  function getJson(url) {
    return fetch(url, { credentials: 'same-origin', headers: { accept: 'application/json' } })
      .then(function (res) { return res.ok ? res.json() : null; });
  }
  function cell(tr, text, cls) {
    var td = document.createElement('td'); td.textContent = text; if (cls) td.className = cls; tr.appendChild(td);
  }
  function append(events) {
    events.forEach(function (e) {
      var tr = document.createElement('tr'), p = JSON.stringify(e.payload) || '';
      tr.setAttribute('data-testid', 'live-event'); tr.setAttribute('data-type', e.type);
      cell(tr, String(e.createdAt).replace('T', ' ').replace('Z', ''), 'mono');
      cell(tr, 'epoch ' + e.epoch, 'muted'); cell(tr, e.type);
      cell(tr, p.length > 220 ? p.slice(0, 217) + '...' : p, 'mono');
      feed.appendChild(tr); lastEvent = String(e.id);
    });
    if (events.length) document.getElementById('live').hidden = false;
  }
  function poll() {
    if (busy || (auto && !auto.checked)) return;
    busy = true;
    getJson(api + '/changes?since=' + encodeURIComponent(token)).then(function (c) {
      if (!c || !c.changed) return;
      if (c.status !== status) { location.reload(); return; }
      return getJson(api + '/events?after=' + lastEvent + '&limit=200').then(function (page) {
        if (!page) return;
        append(page.items);
        if (page.next !== undefined) location.reload(); else token = c.token;
      });
    }).catch(function () {}).then(function () { busy = false; });
  }
  if (live && feed) setInterval(poll, 1500);
  var progress = document.getElementById('progress-entries');
  if (progress && window.EventSource) {
    var source = new EventSource(api + '/stream');
    source.onmessage = function (m) {
      var e = JSON.parse(m.data), tr = document.createElement('tr'), d = JSON.stringify(e.data) || '';
      tr.setAttribute('data-testid', 'stream-entry'); tr.setAttribute('data-seq', String(e.seq));
      cell(tr, String(e.seq), 'num'); cell(tr, e.topic);
      cell(tr, e.step === null ? 'workflow' : 'step ' + e.step + ', attempt ' + e.attempt + ' (epoch ' + e.epoch + ')', 'muted');
      cell(tr, d.length > 220 ? d.slice(0, 217) + '...' : d, 'mono');
      progress.appendChild(tr); document.getElementById('progress').hidden = false;
    };
    source.addEventListener('end', function () { source.close(); });
  }
})();`;
