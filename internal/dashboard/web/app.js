// cg dashboard page: follows /events (Server-Sent Events) and draws every
// group it hears of. No framework, no build step, nothing fetched from
// elsewhere: it works offline. Every name is text in the DOM, and the
// elements carry data attributes (data-stream, data-group, data-partition,
// data-owner, data-member, data-instance, data-pin-id, data-dynamic,
// data-last-seen) for tests and tools.
"use strict";

(function () {
  const TIMELINE_MAX = 300;
  const RECENT_MAX = 12;
  const LANE_KEYS = 4;
  const FLOW_WINDOW_MS = 5000;
  const TIMELINE_TYPES = new Set([
    "pin", "unpin", "failover", "step_down", "rebalance", "member_added", "member_removed",
    "mapping_created", "mapping_deleted", "connection", "group_removed", "group_added",
  ]);
  const LABELS = {
    pin: "pinned", unpin: "unpinned", failover: "failover", step_down: "step-down",
    rebalance: "rebalance", member_added: "member added", member_removed: "member removed",
    mapping_created: "mapping created", mapping_deleted: "mapping deleted",
    connection: "connection", group_removed: "group removed", group_added: "group added",
  };

  const groups = new Map(); // "stream/group" -> group record
  const stats = { events: 0, lastId: "", ready: false };
  window.cgDashboard = { groups: groups, stats: stats };

  const $ = (id) => document.getElementById(id);

  // el builds an element: el("span", {class: "x", "data-a": "b"}, "text", child...).
  function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === "class") e.className = v;
      else if (k === "style") e.setAttribute("style", v);
      else if (k === "text") e.textContent = v;
      else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v === true ? "" : String(v));
    }
    for (const kid of kids) {
      if (kid === undefined || kid === null || kid === false) continue;
      e.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
    }
    return e;
  }

  // fill replaces parent's children, skipping the absent ones.
  function fill(parent, ...kids) {
    parent.replaceChildren(...kids.filter((k) => k !== undefined && k !== null && k !== false));
  }

  const keyOf = (stream, group) => stream + "/" + group;
  const idOf = (stream, group) => "group-" + (stream + "-" + group).replace(/[^A-Za-z0-9_-]/g, "_");
  const shortPin = (id) => (id && id.length > 6 ? "…" + id.slice(-6) : id || "");

  function clock(t) {
    const d = t ? new Date(t) : new Date();
    if (isNaN(d)) return "";
    return d.toLocaleTimeString([], { hour12: false }) + "." + String(d.getMilliseconds()).padStart(3, "0");
  }

  function ago(t) {
    const d = new Date(t);
    if (!t || isNaN(d)) return "";
    return age(Date.now() - d.getTime());
  }

  function age(ms) {
    if (ms === undefined || ms === null || isNaN(ms)) return "-";
    if (ms < 0) ms = 0;
    if (ms < 1000) return Math.round(ms) + "ms";
    if (ms < 60000) return (ms / 1000).toFixed(1) + "s";
    if (ms < 3600000) return Math.floor(ms / 60000) + "m" + String(Math.floor((ms % 60000) / 1000)).padStart(2, "0") + "s";
    return Math.floor(ms / 3600000) + "h" + String(Math.floor((ms % 3600000) / 60000)).padStart(2, "0") + "m";
  }

  // seen words when a member's instances last wrote their liveness
  // record, as info does: the members that added themselves, and the
  // operator's members that run dynamic instances.
  function seen(m) {
    if (m.last_seen) {
      return el("span", { class: "seen muted", "data-last-seen": m.last_seen, title: "last liveness write " + m.last_seen },
        " · seen " + ago(m.last_seen) + " ago");
    }
    if (m.dynamic) return el("span", { class: "seen muted", "data-last-seen": "" }, " · no instance seen");
    return null;
  }

  function ranges(ps) {
    if (!ps || ps.length === 0) return "none";
    const s = [...ps].sort((a, b) => a - b);
    const out = [];
    let a = s[0], b = s[0];
    for (let i = 1; i <= s.length; i++) {
      if (i < s.length && s[i] === b + 1) { b = s[i]; continue; }
      out.push(a === b ? String(a) : a + "-" + b);
      if (i < s.length) { a = b = s[i]; }
    }
    return out.join(",");
  }

  // parsePartitions reads "0-3,7" as [0,1,2,3,7]; null when malformed.
  function parsePartitions(text) {
    const out = [];
    for (const part of text.split(",").map((s) => s.trim()).filter(Boolean)) {
      const m = /^(\d+)(?:-(\d+))?$/.exec(part);
      if (!m) return null;
      const a = Number(m[1]), b = m[2] === undefined ? a : Number(m[2]);
      if (b < a) return null;
      for (let i = a; i <= b; i++) out.push(i);
    }
    return out.length ? out : null;
  }

  // ---- connection banner -------------------------------------------------

  let bannerTimer = null;
  function banner(state, text) {
    const b = $("banner");
    clearTimeout(bannerTimer);
    b.dataset.state = state;
    b.className = "banner " + state;
    b.textContent = text;
    b.hidden = false;
    if (state === "reconnected") {
      bannerTimer = setTimeout(() => { b.hidden = true; }, 6000);
    }
  }

  function setConn(state, text) {
    const c = $("conn");
    c.dataset.state = state;
    c.textContent = text;
    document.body.dataset.conn = state;
  }

  // ---- groups --------------------------------------------------------------

  function groupRecord(stream, group) {
    const k = keyOf(stream, group);
    let g = groups.get(k);
    if (g) return g;
    g = {
      stream: stream, group: group, state: null,
      laneKeys: new Map(), recent: [], handled: [], flowTimer: null,
    };
    g.section = el("section", { class: "group", id: idOf(stream, group), "data-stream": stream, "data-group": group });
    g.head = el("div", { class: "group-head" });
    g.lanes = el("div", { class: "lanes", "aria-label": "partitions of " + k });
    g.members = el("div", { class: "members" });
    g.flow = el("div", { class: "flow" });
    g.controls = controls(g);
    g.section.append(g.head, g.lanes, g.flow, g.members, g.controls);
    $("empty").hidden = true;
    // Keep the groups in name order.
    const all = [...$("groups").querySelectorAll("section.group")];
    const next = all.find((s) => keyOf(s.dataset.stream, s.dataset.group) > k);
    $("groups").insertBefore(g.section, next || null);
    groups.set(k, g);
    return g;
  }

  function ownerOf(st, p) {
    const ps = (st.partition_stats || []).find((x) => x.partition === p);
    if (ps && ps.owner) return ps.owner;
    for (const m of st.members || []) {
      if ((m.partitions || []).includes(p)) return m.name;
    }
    return "";
  }

  function colorOf(st, member) {
    const m = (st.members || []).find((x) => x.name === member);
    return m && m.color ? m.color : "#9aa0a6";
  }

  function renderGroup(g) {
    const st = g.state;
    const kind = st.kind || "";
    g.section.dataset.kind = kind;
    g.section.dataset.readOnly = st.read_only ? "true" : "false";
    g.section.dataset.partitions = String(st.partitions || 0);

    // Head: names, kind, size, flow (acks/s as the server counts them).
    const pending = st.pending !== undefined ? st.pending : (st.partition_stats || []).reduce((s, x) => s + (x.pending || 0), 0);
    const acks = typeof st.ack_rate === "number" ? st.ack_rate : null;
    fill(g.head, 
      el("h2", {}, el("span", { class: "gname" }, g.stream + " / " + g.group)),
      el("span", { class: "badge kind", "data-kind": kind }, kind || "group"),
      el("span", { class: "muted" }, (st.partitions || 0) + " partitions, " + (st.members || []).length + " members"),
      el("span", { class: "muted", "data-total-pending": pending }, "pending " + pending),
      el("span", { class: "muted", "data-ack-rate": acks === null ? "" : acks.toFixed(1) }, acks === null ? "flow -" : "flow " + acks.toFixed(1) + " acks/s"),
      st.mode ? el("span", { class: "muted" }, st.mode) : null,
      st.work_stream ? el("span", { class: "muted small" }, "work stream " + st.work_stream) : null,
      el("span", { class: "muted small updated" }, "updated " + clock(st.sampled_at || g.updated)),
    );
    const problem = st.error || st.lag_error || "";
    if (problem) g.head.append(el("p", { class: "error", "data-state-error": "" }, problem));

    // Lanes 0..N-1, each in its owner's colour.
    const n = st.partitions || 0;
    const maxPending = Math.max(1, ...(st.partition_stats || []).map((x) => x.pending || 0));
    const lanes = [];
    for (let p = 0; p < n; p++) {
      const ps = (st.partition_stats || []).find((x) => x.partition === p) || {};
      const owner = ownerOf(st, p);
      const color = owner ? (ps.color || colorOf(st, owner)) : "#c4c7cc";
      const delta = ps.rate || 0;
      const w = Math.round(((ps.pending || 0) / maxPending) * 100);
      lanes.push(el("div", {
        class: "lane" + (owner ? "" : " unowned"), "data-partition": p, "data-owner": owner,
        "data-pending": ps.pending || 0, "data-status": ps.status || "", style: "--c:" + color,
        title: ps.reason || "",
      },
      el("span", { class: "pnum" }, "P" + p),
      el("span", { class: "owner" }, owner || "unowned"),
      el("span", { class: "bar", title: "pending " + (ps.pending || 0) }, el("span", { class: "fill", style: "width:" + w + "%" })),
      el("span", { class: "pending" }, "pending " + (ps.pending || 0)),
      el("span", { class: "age", "data-oldest-ms": ps.oldest_age_ms || 0 }, "oldest " + (ps.pending ? age(ps.oldest_age_ms) : "-")),
      el("span", { class: "rate", title: "backlog change, messages per second" }, (delta > 0 ? "+" : "") + delta.toFixed(1) + "/s"),
      el("span", { class: "keys", "data-lane-keys": p }, (g.laneKeys.get(p) || []).join(" ")),
      ));
    }
    fill(g.lanes, ...lanes);

    // Members with their instances.
    const ro = !!st.read_only;
    const rows = (st.members || []).map((m) => {
      const insts = (m.instances || []).map((i) => el("li", {
        class: "instance " + (i.pinned ? "pinned" : "standby"), "data-instance": i.id || "",
        "data-pinned": i.pinned ? "true" : "false", "data-pin-id": i.pin_id || "",
      },
      i.id && i.id !== i.pin_id ? el("span", { class: "iname" }, i.id + " ") : null,
      el("span", { class: "istate" }, i.pinned ? "pinned" : "standby"),
      i.pin_id ? el("span", { class: "pin", title: i.pin_id }, " pin " + shortPin(i.pin_id)) : null,
      i.since ? el("span", { class: "since muted", title: i.since }, " since " + clock(i.since) + " (" + ago(i.since) + ")") : null,
      ));
      const actions = ro ? null : el("span", { class: "actions" },
        el("button", { type: "button", "data-action": "step-down", "data-member": m.name, title: "unpin the active instance" }, "step down"),
        kind === "elastic" ? el("button", { type: "button", "data-action": "drop", "data-member": m.name }, "drop") : null,
        kind === "elastic" ? el("button", { type: "button", "data-action": "mapping-delete", "data-member": m.name }, "delete mapping") : null,
      );
      return el("div", { class: "member", "data-member": m.name, "data-live": m.live ? "true" : "false", "data-pin-id": m.pin_id || "",
        "data-dynamic": m.dynamic ? "true" : "false", style: "--c:" + (m.color || "#9aa0a6") },
        el("div", { class: "mhead" },
          el("span", { class: "swatch" }),
          el("strong", { class: "mname" }, m.name),
          m.dynamic ? el("span", { class: "badge dynamic", "data-dynamic": "", title: "added itself; dropped once all its instances are gone" }, "dynamic") : null,
          seen(m),
          el("span", { class: "parts", "data-partitions": ranges(m.partitions) }, " partitions " + ranges(m.partitions)),
          el("span", { class: "muted" }, " · " + (m.instances || []).length + " instance" + ((m.instances || []).length === 1 ? "" : "s")),
          m.status ? el("span", { class: "mstatus", "data-status": m.status }, " " + m.status) : null,
          el("span", { class: "muted" }, " · pending " + (m.pending || 0)),
          typeof m.ack_rate === "number" ? el("span", { class: "muted" }, " · " + m.ack_rate.toFixed(1) + " acks/s") : null,
          m.consumer ? el("span", { class: "muted small" }, " · consumer " + m.consumer) : null,
          actions),
        insts.length ? el("ul", { class: "instances" }, ...insts) : el("p", { class: "muted small" }, "no instance running"));
    });
    if (rows.length === 0) rows.push(el("p", { class: "muted" }, "no members"));
    fill(g.members, el("h3", {}, "Members"), ...rows.filter(Boolean));

    // Controls: hidden when read-only; elastic-only ones for elastic groups.
    g.controls.hidden = ro;
    for (const e of g.controls.querySelectorAll("[data-elastic-only]")) e.hidden = kind !== "elastic";
    $("readonly").hidden = ![...groups.values()].some((x) => x.state && x.state.read_only);
    renderFlow(g);
  }

  // ---- message flow (from "handled" events) ---------------------------------

  function onHandled(ev) {
    const g = groups.get(keyOf(ev.stream, ev.group));
    if (!g) return;
    const now = Date.now();
    g.handled.push(now);
    const who = ev.instance || ev.member || "";
    const key = ev.key || ev.subject || "";
    g.recent.unshift({ key: key, who: who, member: ev.member || "", partition: ev.partition, seq: ev.seq, at: ev.time });
    if (g.recent.length > RECENT_MAX) g.recent.length = RECENT_MAX;
    let part = typeof ev.partition === "number" ? ev.partition : NaN;
    if (isNaN(part) && Array.isArray(ev.partitions) && ev.partitions.length === 1) part = ev.partitions[0];
    // The stored subject starts with the partition the transform stamped.
    if (isNaN(part) && ev.subject) { const m = /^(\d+)\./.exec(ev.subject); if (m) part = Number(m[1]); }
    if (!isNaN(part)) ev.partition = part;
    if (typeof ev.partition === "number") {
      const ks = g.laneKeys.get(ev.partition) || [];
      ks.unshift(key);
      if (ks.length > LANE_KEYS) ks.length = LANE_KEYS;
      g.laneKeys.set(ev.partition, ks);
      const lane = g.lanes.querySelector('[data-lane-keys="' + ev.partition + '"]');
      if (lane) lane.textContent = ks.join(" ");
    }
    if (!g.flowTimer) g.flowTimer = setTimeout(() => { g.flowTimer = null; renderFlow(g); }, 200);
  }

  function renderFlow(g) {
    if (!g.state) return;
    const now = Date.now();
    while (g.handled.length && now - g.handled[0] > FLOW_WINDOW_MS) g.handled.shift();
    const rate = g.handled.length / (FLOW_WINDOW_MS / 1000);
    const items = g.recent.map((r) => el("li", {
      class: "hkey", "data-key": r.key, "data-handled-by": r.who, style: "--c:" + colorOf(g.state, r.member),
    }, r.key, el("span", { class: "muted" }, " → " + r.who + (typeof r.partition === "number" ? " (P" + r.partition + ")" : ""))));
    fill(g.flow, 
      el("h3", {}, "Message flow"),
      el("span", { class: "muted", "data-handled-rate": rate.toFixed(1) },
        g.recent.length ? "handled " + rate.toFixed(1) + " msg/s (last 5 s), recent keys:" : "no handler events (they come from an in-process producer, such as cg demo --web)"),
    );
    if (items.length) g.flow.append(el("ol", { class: "recent" }, ...items));
  }

  // ---- timeline ---------------------------------------------------------------

  function timeline(ev) {
    const parts = [];
    const add = (k, v) => { if (v !== undefined && v !== null && v !== "" && !(Array.isArray(v) && !v.length)) parts.push([k, v]); };
    add("member", ev.member);
    add("instance", ev.instance);
    add("pin", ev.pin_id ? shortPin(ev.pin_id) : "");
    add("previous pin", ev.prev_pin_id ? shortPin(ev.prev_pin_id) : "");
    add("new pin", ev.new_pin_id ? shortPin(ev.new_pin_id) : "");
    add("from", ev.from);
    add("to", ev.to);
    add("partitions", Array.isArray(ev.partitions) ? ranges(ev.partitions) : ev.partitions);
    if (Array.isArray(ev.moves) && ev.moves.length) {
      add("moves", ev.moves.map((m) => (m.partition !== undefined ? "P" + m.partition + " " : "") + (m.from || "-") + "→" + (m.to || "-")).join(", "));
    }
    add("state", ev.state && typeof ev.state === "string" ? ev.state : "");
    add("", ev.reason || ev.message || ev.detail || "");
    const li = el("li", {
      class: "tl " + ev.type, "data-type": ev.type, "data-stream": ev.stream || "", "data-group": ev.group || "",
      "data-member": ev.member || "", "data-pin-id": ev.pin_id || "", "data-prev-pin-id": ev.prev_pin_id || "", "data-event-id": ev._id || "",
      "data-dynamic": ev.dynamic ? "true" : null,
    },
    el("time", { datetime: ev.time || "" }, clock(ev.time)),
    " ",
    el("span", { class: "tltype" }, LABELS[ev.type] || ev.type),
    ev.stream ? el("span", { class: "tlgroup" }, " " + ev.stream + (ev.group ? " / " + ev.group : "")) : null,
    ...parts.map(([k, v]) => el("span", { class: "tlkv" }, k ? " " + k + " " : " ", el("b", {}, String(v)))));
    if (ev.color) li.style.setProperty("--c", ev.color);
    else if (ev.member && ev.stream) {
      const g = groups.get(keyOf(ev.stream, ev.group));
      if (g && g.state) li.style.setProperty("--c", colorOf(g.state, ev.member));
    }
    const ol = $("timeline");
    ol.insertBefore(li, ol.firstChild);
    while (ol.children.length > TIMELINE_MAX) ol.lastChild.remove();
  }

  // ---- controls ---------------------------------------------------------------

  function controls(g) {
    const member = el("input", { name: "member", placeholder: "member", size: 10, "aria-label": "member name", autocomplete: "off" });
    const parts = el("input", { name: "partitions", placeholder: "partitions, e.g. 0-3,7", size: 18, "aria-label": "partitions", autocomplete: "off" });
    const msg = el("p", { class: "result", "data-result": "", role: "status" });
    const err = el("p", { class: "error", "data-error": "", role: "alert" });
    const need = () => {
      const m = member.value.trim();
      if (!m) throw new Error("type a member name first");
      return m;
    };
    const btn = (action, label, elasticOnly, body) => el("button", {
      type: "button", "data-action": action, "data-elastic-only": elasticOnly || null,
      onclick: () => { try { act(g, action, body()); } catch (e) { showError(g, e.message); } },
    }, label);
    const form = el("form", { class: "controls", "data-controls": "", onsubmit: (e) => e.preventDefault() },
      el("h3", {}, "Controls"),
      member, " ", parts, " ",
      btn("add", "add member", true, () => {
        const b = { member: need() };
        if (parts.value.trim()) {
          const ps = parsePartitions(parts.value);
          if (!ps) throw new Error("partitions: use numbers and ranges such as 0-3,7");
          b.partitions = ps;
        }
        return b;
      }),
      btn("drop", "drop member", true, () => ({ member: need() })),
      btn("mapping-create", "set mapping", true, () => {
        const ps = parsePartitions(parts.value);
        if (!ps) throw new Error("partitions: use numbers and ranges such as 0-3,7");
        return { member: need(), partitions: ps };
      }),
      // Without a member name: the group's whole mapping.
      btn("mapping-delete", "delete mapping", true, () => (member.value.trim() ? { member: member.value.trim() } : {})),
      btn("step-down", "step down", false, () => ({ member: need() })),
      msg, err);
    g.result = msg;
    g.error = err;
    // The member rows' buttons, drawn afresh on every change, are caught here.
    g.section.addEventListener("click", (e) => {
      const b = e.target.closest("button[data-action][data-member]");
      if (!b || b.closest("form")) return;
      act(g, b.dataset.action, { member: b.dataset.member });
    });
    return form;
  }

  const ROUTES = {
    "add": "api/elastic/add",
    "drop": "api/elastic/drop",
    "mapping-create": "api/mapping/create",
    "mapping-delete": "api/mapping/delete",
    "step-down": "api/step-down",
  };

  function showError(g, text) {
    g.result.textContent = "";
    g.error.textContent = text;
    g.section.dataset.lastError = text;
  }

  async function act(g, action, body) {
    const req = Object.assign({ stream: g.stream, group: g.group }, body);
    if (action === "step-down") req.kind = (g.state && g.state.kind) || "";
    g.error.textContent = "";
    g.result.textContent = action + " " + (body.member || "") + "…";
    try {
      const res = await fetch(ROUTES[action], {
        method: "POST", headers: { "Content-Type": "application/json" },
        body: JSON.stringify(req), credentials: "same-origin",
      });
      let reply = {};
      try { reply = await res.json(); } catch (_) { /* not JSON */ }
      if (!res.ok || reply.error) {
        showError(g, (reply && reply.error) || (action + ": HTTP " + res.status));
        return;
      }
      g.result.textContent = action + " " + (body.member || "") + ": done";
      g.section.dataset.lastOk = action;
    } catch (e) {
      showError(g, action + ": " + e.message);
    }
  }

  // ---- the event stream -----------------------------------------------------

  function handle(ev, id) {
    stats.events++;
    if (id) { stats.lastId = id; ev._id = id; }
    document.body.dataset.events = String(stats.events);
    switch (ev.type) {
      case "group": {
        const g = groupRecord(ev.stream, ev.group);
        const first = !g.state;
        g.state = ev.state || {};
        g.updated = ev.time;
        renderGroup(g);
        if (first && stats.ready) timeline(Object.assign({}, ev, { type: "group_added" }));
        break;
      }
      case "group_removed": {
        const k = keyOf(ev.stream, ev.group);
        const g = groups.get(k);
        if (g) { g.section.remove(); groups.delete(k); }
        if (groups.size === 0) $("empty").hidden = false;
        timeline(ev);
        break;
      }
      case "ready":
        stats.ready = true;
        document.body.dataset.ready = "1";
        if (groups.size === 0) $("empty").textContent = "No consumer groups found.";
        break;
      case "handled":
        onHandled(ev);
        break;
      case "connection":
        if (ev.state === "disconnected") {
          banner("disconnected", "NATS: disconnected — reconnecting");
          setConn("degraded", "NATS disconnected");
        } else if (ev.state === "reconnected") {
          banner("reconnected", "NATS: reconnected");
          setConn("live", "live");
        } else if (ev.state === "closed") {
          banner("disconnected", "NATS: connection closed");
          setConn("degraded", "NATS closed");
        }
        timeline(ev);
        break;
      default:
        if (TIMELINE_TYPES.has(ev.type) || ev.type) timeline(ev);
    }
  }

  let es = null;
  let down = false;
  let retry = null;

  function onData(e) {
    let ev;
    try { ev = JSON.parse(e.data); } catch (_) { return; }
    if (!ev || typeof ev !== "object") return;
    if (!ev.type && e.type && e.type !== "message") ev.type = e.type;
    handle(ev, e.lastEventId);
  }

  function connect() {
    es = new EventSource("events");
    es.onopen = () => {
      setConn("live", "live");
      if (down) banner("reconnected", "reconnected");
      down = false;
    };
    es.onmessage = onData;
    // Should the server name its events, they arrive under their types.
    for (const t of ["group", "ready", "handled", "group_removed", ...TIMELINE_TYPES]) es.addEventListener(t, onData);
    es.onerror = () => {
      down = true;
      setConn("down", "disconnected");
      banner("disconnected", "disconnected — reconnecting");
      // The browser retries by itself unless the reply was an error; then
      // this page tries again.
      if (es.readyState === EventSource.CLOSED && !retry) {
        retry = setTimeout(() => { retry = null; connect(); }, 1500);
      }
    };
  }

  // Ages and "since" go stale between events: refresh them now and then.
  setInterval(() => { for (const g of groups.values()) if (g.state) renderFlow(g); }, 1000);
  setInterval(() => {
    for (const s of document.querySelectorAll(".instance .since")) {
      const t = s.getAttribute("title");
      s.textContent = " since " + clock(t) + " (" + ago(t) + ")";
    }
    for (const s of document.querySelectorAll(".member .seen[data-last-seen]")) {
      const t = s.dataset.lastSeen;
      if (t) s.textContent = " · seen " + ago(t) + " ago";
    }
  }, 5000);

  connect();
})();
