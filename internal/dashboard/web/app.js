// everynode's dashboard: the DaemonSets, and one DaemonSet's nodes as a grid, kept
// live by server-sent events. The page never reloads: the list arrives whole at each
// change, the grid whole once and then as the cells that changed.
'use strict';

const $ = (id) => document.getElementById(id);

// What the page measures of itself, in milliseconds (read by the browser tests and
// benchmarks): the script's work to draw the whole grid or apply an update, and the
// time from a message's arrival to the frame after it was drawn (layout and paint
// included).
const stats = window.everynodeStats = {
  gridRenders: 0, lastGridMs: 0, lastGridFrameMs: 0, updates: 0, lastUpdateMs: 0, maxUpdateMs: 0,
  lastUpdateFrameMs: 0, maxUpdateFrameMs: 0, cells: 0, messages: 0,
};

// afterFrame calls f once the browser has drawn the next frame.
function afterFrame(f) {
  requestAnimationFrame(() => setTimeout(f, 0));
}

const stateNames = {
  current: 'current revision, available',
  updating: 'updating',
  waiting: 'old revision, waiting',
  failing: 'failing',
  ineligible: 'not eligible',
};

let selected = null; // {namespace, name}
let gridSource = null;
const cellByNode = new Map();
let picked = null; // the node whose explanation is shown

function connectList() {
  const src = new EventSource('api/daemonsets');
  src.addEventListener('open', () => setConn('live', 'live'));
  src.addEventListener('error', () => setConn('lost', 'reconnecting…'));
  src.addEventListener('daemonsets', (e) => renderList(JSON.parse(e.data)));
  src.addEventListener('failure', (e) => toast(JSON.parse(e.data), true));
}

function setConn(cls, text) {
  const c = $('conn');
  c.className = 'conn ' + cls;
  c.textContent = text;
}

function key(ns, name) { return ns + '/' + name; }

function renderList(list) {
  const body = document.querySelector('#daemonsets tbody');
  const rows = [];
  for (const ds of list) {
    const tr = document.createElement('tr');
    tr.dataset.namespace = ds.namespace;
    tr.dataset.name = ds.name;
    if (selected && key(ds.namespace, ds.name) === key(selected.namespace, selected.name)) tr.className = 'selected';
    const progressing = ds.progressing ? ds.progressing + (ds.progressingReason ? ' ' + ds.progressingReason : '') : '';
    for (const [text, num] of [[ds.namespace], [ds.name], [ds.desired, 1], [ds.current, 1], [ds.ready, 1],
      [ds.updated, 1], [ds.available, 1], [progressing + (ds.paused ? ' (paused)' : '')]]) {
      const td = document.createElement('td');
      td.textContent = text;
      if (num) td.className = 'num';
      tr.appendChild(td);
    }
    rows.push(tr);
  }
  body.replaceChildren(...rows);
  $('list-empty').hidden = list.length > 0;
  if (!selected && location.hash.length > 1) {
    const [ns, name] = decodeURIComponent(location.hash.slice(1)).split('/');
    if (ns && name) select(ns, name);
  }
}

function select(namespace, name) {
  selected = { namespace, name };
  history.replaceState(null, '', '#' + encodeURIComponent(key(namespace, name)));
  for (const tr of document.querySelectorAll('#daemonsets tbody tr')) {
    tr.classList.toggle('selected', tr.dataset.namespace === namespace && tr.dataset.name === name);
  }
  if (gridSource) gridSource.close();
  closeNode();
  cellByNode.clear();
  $('grid').replaceChildren();
  $('detail').hidden = false;
  $('ds-name').textContent = key(namespace, name);
  const base = 'api/daemonsets/' + encodeURIComponent(namespace) + '/' + encodeURIComponent(name);
  gridSource = new EventSource(base + '/grid');
  gridSource.addEventListener('update', (e) => applyUpdate(JSON.parse(e.data)));
  gridSource.addEventListener('gone', (e) => {
    cellByNode.clear();
    $('grid').replaceChildren();
    $('ds-message').textContent = JSON.parse(e.data);
  });
  gridSource.addEventListener('failure', (e) => toast(JSON.parse(e.data), true));
}

function applyUpdate(u) {
  const t0 = performance.now();
  stats.messages++;
  renderHead(u);
  if (u.grid) {
    renderGrid(u.grid);
    stats.gridRenders++;
    stats.lastGridMs = performance.now() - t0;
    afterFrame(() => { stats.lastGridFrameMs = performance.now() - t0; });
  } else {
    for (const c of u.cells || []) setCell(c);
    const ms = performance.now() - t0;
    stats.updates++;
    stats.lastUpdateMs = ms;
    stats.maxUpdateMs = Math.max(stats.maxUpdateMs, ms);
    afterFrame(() => {
      stats.lastUpdateFrameMs = performance.now() - t0;
      stats.maxUpdateFrameMs = Math.max(stats.maxUpdateFrameMs, stats.lastUpdateFrameMs);
    });
  }
  if (picked && u.cells && u.cells.some((c) => c.node === picked)) showNode(picked);
}

function renderHead(u) {
  const s = u.summary;
  $('ds-revision').textContent = u.revision ? 'revision ' + u.revision : '';
  const badge = $('ds-progress');
  badge.className = 'badge ' + (s.progressing || '');
  badge.textContent = s.progressing ? 'Progressing ' + s.progressing + (s.progressingReason ? ': ' + s.progressingReason : '') : 'no Progressing condition';
  $('ds-message').textContent = s.progressingMessage || '';
  $('ds-unavailable').textContent = u.unavailable ? 'Unavailable: ' + u.unavailable : '';
  $('problems').replaceChildren(...(u.problems || []).map((p) => {
    const li = document.createElement('li');
    li.textContent = p;
    return li;
  }));
  const legend = [];
  for (const state of Object.keys(stateNames)) {
    const n = (u.counts && u.counts[state]) || 0;
    const item = document.createElement('span');
    item.className = 'item';
    item.dataset.state = state;
    const sw = document.createElement('span');
    sw.className = 'swatch s-' + state;
    item.append(sw, stateNames[state] + ': ' + n);
    const why = u.reasons && u.reasons[state];
    if (why) {
      const w = document.createElement('span');
      w.className = 'why';
      w.textContent = '(' + Object.entries(why).map(([k, v]) => k + ' ' + v).join(', ') + ')';
      item.append(w);
    }
    legend.push(item);
  }
  $('legend').replaceChildren(...legend);
}

function groupTitle(groupBy, name) {
  if (!groupBy) return 'all nodes';
  return groupBy + '=' + (name || '(unlabelled)');
}

function renderGrid(g) {
  cellByNode.clear();
  const frag = document.createDocumentFragment();
  let n = 0;
  for (const group of g.groups || []) {
    const sec = document.createElement('div');
    sec.className = 'group';
    const h = document.createElement('h3');
    h.textContent = groupTitle(g.groupBy, group.name) + ' · ' + group.cells.length + ' nodes';
    const cells = document.createElement('div');
    cells.className = 'cells';
    for (const c of group.cells) {
      const el = document.createElement('div');
      el.dataset.node = c.node;
      paint(el, c);
      cellByNode.set(c.node, el);
      cells.appendChild(el);
      n++;
    }
    sec.append(h, cells);
    frag.appendChild(sec);
  }
  $('grid').replaceChildren(frag);
  stats.cells = n;
  if (picked && cellByNode.has(picked)) cellByNode.get(picked).classList.add('picked');
}

function paint(el, c) {
  el.className = 'cell s-' + c.state + (c.node === picked ? ' picked' : '');
  el.dataset.state = c.state;
  el.dataset.why = c.why || '';
}

// A cell's tooltip is made when the pointer reaches it, not at each update.
function tooltip(el) {
  el.title = el.dataset.node + ': ' + stateNames[el.dataset.state] + (el.dataset.why ? ' (' + el.dataset.why + ')' : '');
}

function setCell(c) {
  const el = cellByNode.get(c.node);
  if (el) paint(el, c);
}

async function showNode(node) {
  if (!selected) return;
  if (picked && cellByNode.has(picked)) cellByNode.get(picked).classList.remove('picked');
  picked = node;
  if (cellByNode.has(node)) cellByNode.get(node).classList.add('picked');
  $('node-panel').hidden = false;
  $('node-title').textContent = node;
  const url = 'api/daemonsets/' + encodeURIComponent(selected.namespace) + '/' + encodeURIComponent(selected.name) +
    '/nodes/' + encodeURIComponent(node);
  try {
    const res = await fetch(url);
    const text = await res.text();
    if (picked === node) $('node-text').textContent = text;
  } catch (err) {
    $('node-text').textContent = 'could not load the explanation: ' + err;
  }
}

function closeNode() {
  if (picked && cellByNode.has(picked)) cellByNode.get(picked).classList.remove('picked');
  picked = null;
  $('node-panel').hidden = true;
}

const actionQuestions = {
  pause: (ds) => 'Pause the rollout of daemonset ' + ds + '? No node is updated until it is resumed.',
  resume: (ds) => 'Resume the rollout of daemonset ' + ds + '?',
  promote: (ds) => 'Promote daemonset ' + ds + '? Its canary and partition are removed, so every node is updated.',
  undo: (ds) => 'Roll daemonset ' + ds + ' back to its previous revision?',
};

function confirmAction(action) {
  if (!selected) return;
  const ds = selected;
  $('confirm-text').textContent = actionQuestions[action](key(ds.namespace, ds.name));
  const dlg = $('confirm');
  dlg.returnValue = '';
  dlg.onclose = () => { if (dlg.returnValue === 'ok') runAction(action, ds); };
  dlg.showModal();
}

async function runAction(action, ds) {
  const url = 'api/daemonsets/' + encodeURIComponent(ds.namespace) + '/' + encodeURIComponent(ds.name) + '/' + action;
  try {
    const res = await fetch(url, { method: 'POST', headers: { 'X-Everynode-Dashboard': '1' } });
    if (!res.ok) {
      toast((await res.text()).trim(), true);
      return;
    }
    toast((await res.json()).message, false);
  } catch (err) {
    toast(String(err), true);
  }
}

let toastTimer = 0;
function toast(text, error) {
  const t = $('toast');
  t.textContent = text;
  t.className = error ? 'error' : '';
  t.hidden = false;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => { t.hidden = true; }, error ? 10000 : 4000);
}

document.querySelector('#daemonsets tbody').addEventListener('click', (e) => {
  const tr = e.target.closest('tr');
  if (tr) select(tr.dataset.namespace, tr.dataset.name);
});
$('grid').addEventListener('mouseover', (e) => {
  const cell = e.target.closest('.cell');
  if (cell) tooltip(cell);
});
$('grid').addEventListener('click', (e) => {
  const cell = e.target.closest('.cell');
  if (cell) showNode(cell.dataset.node);
});
$('node-close').addEventListener('click', closeNode);
for (const b of document.querySelectorAll('.actions button')) {
  b.addEventListener('click', () => confirmAction(b.dataset.action));
}
connectList();
