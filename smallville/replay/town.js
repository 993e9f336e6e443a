// The town on a canvas: tiles, objects, area names, agents and what they say. Shared by the
// replay page and the live page of `smallville serve` (each inlines this file).
function hue(text) { let h = 0; for (const ch of text) h = (h * 31 + ch.charCodeAt(0)) % 360; return h; }
function sector(area) { return area.split(" / ")[0]; }
function esc(s) { return String(s).replace(/[&<>"]/g, c => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"}[c])); }
// The index of the last entry of a time-sorted list at or before t (-1: none).
function before(list, t) {
  let lo = 0, hi = list.length - 1, best = -1;
  while (lo <= hi) { const mid = (lo + hi) >> 1; if (list[mid][0] <= t) { best = mid; lo = mid + 1; } else hi = mid - 1; }
  return best;
}
// Where a track ([t, column, row] entries) is at time t.
function trackAt(track, t) {
  const i = Math.max(0, before(track, t));
  return [track[i][1], track[i][2]];
}
// An agent's colour: one of 36 hues, so a crowd is drawn with few changes of colour.
function colorOf(id) { return `hsl(${Math.round(hue(id) / 10) * 10 % 360}, 70%, 40%)`; }
function count(n, word) { return `${n} ${word}${n === 1 ? "" : "s"}`; }
const CROWD = 250;       // more agents in view than this: squares without initials, by colour

// Rectangles ({x, y, w, h}, each with a rank) in buckets of a grid, so a new one is checked
// against its neighbours only: how labels are kept from running into each other.
class Boxes {
  constructor(cell) { this.cell = cell; this.buckets = new Map(); this.all = []; }
  *keys(b) {
    const s = this.cell;
    for (let i = Math.floor(b.x / s); i <= Math.floor((b.x + b.w) / s); i++)
      for (let j = Math.floor(b.y / s); j <= Math.floor((b.y + b.h) / s); j++) yield i * 100003 + j;
  }
  // Whether `b` overlaps a box of at least `rank`.
  hits(b, rank = 0) { return this.worst(b, rank) >= rank; }
  // The highest rank of the boxes `b` overlaps (-1: none), looking no further once one has `enough`.
  worst(b, enough = Infinity) {
    let most = -1;
    for (const k of this.keys(b)) for (const o of this.buckets.get(k) || [])
      if (o.rank > most && b.x < o.x + o.w && o.x < b.x + b.w && b.y < o.y + o.h && o.y < b.y + b.h) {
        most = o.rank;
        if (most >= enough) return most;
      }
    return most;
  }
  add(b, rank) {
    const box = {...b, rank};
    for (const k of this.keys(b)) { const list = this.buckets.get(k); if (list) list.push(box); else this.buckets.set(k, [box]); }
    this.all.push(box);
  }
}
const PLACE = 0, DOT = 1, LABEL = 2;        // ranks: what a label avoids first, last, always

// `text` in lines no wider than `width` (null: a word is wider).
function wrap(g, text, width) {
  const lines = [];
  for (const word of text.split(" ")) {
    if (g.measureText(word).width > width) return null;
    const last = lines.length ? `${lines[lines.length - 1]} ${word}` : null;
    if (last !== null && g.measureText(last).width <= width) lines[lines.length - 1] = last; else lines.push(word);
  }
  return lines;
}
function clamp(v, lo, hi) { return Math.max(lo, Math.min(hi, v)); }

class Town {
  constructor(map, agents) {
    this.map = map; this.agents = agents;
    this.W = map.rows[0].length; this.H = map.rows.length;
    this.T = Math.max(6, Math.min(12, Math.floor(1100 / this.W)));
    this.width = this.W * this.T; this.height = this.H * this.T;
    this.byId = new Map(agents.map(a => [a.id, a]));
    this.background = this.drawMap();
  }
  area(c, r) { return (this.map.rows[r] && this.map.legend[this.map.rows[r][c]]) || ""; }
  // The map without anyone on it, drawn once.
  drawMap() {
    const {W, H, T} = this, canvas = document.createElement("canvas");
    canvas.width = this.width; canvas.height = this.height;
    const g = canvas.getContext("2d"), spots = new Map();
    for (let r = 0; r < H; r++) for (let c = 0; c < W; c++) {
      const area = this.area(c, r);
      if (!area || area === "wall") g.fillStyle = "#5c5650";
      else g.fillStyle = `hsl(${hue(sector(area))}, 45%, ${area.includes("street") ? 88 : 78}%)`;
      g.fillRect(c * T, r * T, T, T);
      if (!area || area === "wall" || area.includes("street")) continue;
      for (const key of [sector(area), area]) {
        const s = spots.get(key) || {c: 0, r: 0, n: 0, c0: c, c1: c, r0: r, r1: r};
        s.c += c; s.r += r; s.n += 1;
        s.c0 = Math.min(s.c0, c); s.c1 = Math.max(s.c1, c); s.r0 = Math.min(s.r0, r); s.r1 = Math.max(s.r1, r);
        spots.set(key, s);
      }
    }
    g.fillStyle = "#6b4f2a";
    for (const [, c, r] of this.map.objects) g.fillRect(c * T + T / 4, r * T + T / 4, T / 2, T / 2);
    this.places = this.placeNames(g, spots);
    return canvas;
  }
  // Each place's name inside its largest room (else across the place), wrapped to its width,
  // the largest places first. A name that fits nowhere there, or would run into another, is
  // left to the hover line. `spots`: per place and per room, its tiles' sums and bounds.
  placeNames(g, spots) {
    const T = this.T, size = Math.max(9, T), lh = Math.round(size * 1.2), boxes = new Boxes(8 * T);
    g.font = `${size}px system-ui`; g.fillStyle = "rgba(0,0,0,0.55)"; g.textAlign = "center"; g.textBaseline = "middle";
    const rooms = new Map();
    for (const [key, s] of spots) if (key.includes(" / ")) {
      const best = rooms.get(sector(key));
      if (!best || s.n > best.n) rooms.set(sector(key), s);
    }
    const places = [...spots].filter(([key]) => !key.includes(" / ")).sort(([a, s], [b, t]) => t.n - s.n || (a < b ? -1 : 1));
    for (const [name, whole] of places) {
      for (const s of [rooms.get(name), whole].filter(Boolean)) {
        const room = {x: s.c0 * T + 2, y: s.r0 * T + 2, w: (s.c1 + 1 - s.c0) * T - 4, h: (s.r1 + 1 - s.r0) * T - 4};
        const lines = wrap(g, name, room.w);
        if (!lines || lines.length * lh > room.h) continue;
        const w = Math.ceil(Math.max(...lines.map(l => g.measureText(l).width))), h = lines.length * lh;
        const box = {x: clamp((s.c / s.n + 0.5) * T - w / 2, room.x, room.x + room.w - w),
                     y: clamp((s.r / s.n + 0.5) * T - h / 2, room.y, room.y + room.h - h), w, h, name};
        if (boxes.hits(box)) continue;
        boxes.add(box, PLACE);
        lines.forEach((line, i) => g.fillText(line, box.x + w / 2, box.y + i * lh + lh / 2));
        break;
      }
    }
    g.textAlign = "start"; g.textBaseline = "alphabetic";
    return boxes;
  }
  // What is said in the tick up to t: speech is a time-sorted list of [t, speaker, listener, text].
  saying(speech, t, tick) {
    const out = [];
    for (let i = before(speech, t); i >= 0 && t - speech[i][0] < tick; i--) out.push(speech[i]);
    return out.reverse();
  }
  // Each agent's dot and label, drawn once into one canvas (an atlas), side by side: a frame
  // copies small images instead of drawing a path and text for each, and one image for a dot
  // with its label just right of it, the usual case.
  sprites() {
    if (this.atlas) return this.atlas;
    const T = this.T, F = Math.max(10, T + 2), font = `${F}px system-ui`, D = T + 2 * Math.ceil(0.1 * T + 1);
    const measure = document.createElement("canvas").getContext("2d");
    measure.font = font;
    const cells = {}, height = Math.max(D, Math.ceil(1.25 * F));
    let x = 0, y = 0;
    for (const a of this.agents) {
      const w = Math.ceil(measure.measureText(a.label).width) + 4;
      if (x + D + w > 2048) { x = 0; y += height; }
      cells[a.id] = [x, y, w]; x += D + w;
    }
    const atlas = document.createElement("canvas");
    atlas.width = 2048; atlas.height = y + height;
    const g = atlas.getContext("2d");
    g.font = font; g.textBaseline = "middle"; g.lineJoin = "round";
    for (const a of this.agents) {
      const [dx, dy] = cells[a.id];
      g.beginPath();
      g.arc(dx + D / 2, dy + height / 2, T * 0.6, 0, 2 * Math.PI);
      g.fillStyle = colorOf(a.id);
      g.fill();
      g.lineWidth = 3; g.strokeStyle = "rgba(255,255,255,0.85)";
      g.strokeText(a.label, dx + D + 2, dy + height / 2);
      g.fillStyle = "#111";
      g.fillText(a.label, dx + D + 2, dy + height / 2);
    }
    this.atlas = {canvas: atlas, cells, D, height};
    return this.atlas;
  }
  // Where a label w x h may go beside the tile at pixel (x, y), whose dot's image is D wide:
  // just right of the dot first, then round it (ring 0); then a label's height further up or
  // down, for a crowd (ring 1).
  static spots(x, y, T, w, h, D) {
    const up = y - h + T * 0.3, down = y + 0.7 * T, mid = x + (T - w) / 2, box = ([bx, by]) => ({x: bx, y: by, w, h});
    return [[[x - (D - T) / 2 + D, y + Math.floor((T - h) / 2)], [x + T, up], [x + T, down], [x - w, up],
             [x - 0.1 * T - w, y + (T - h) / 2], [x - w, down], [mid, y - h - 0.1 * T], [mid, y + 1.1 * T]].map(box),
            [[x + T, up - h], [x + T, down + h], [x - w, up - h], [x - w, down + h], [mid, y - 2 * h - 0.1 * T],
             [mid, y + 1.1 * T + h]].map(box)];
  }
  // The best spot, in this order: beside the dot clear of place names, dots and labels; clear
  // of dots and labels; further out so; over a dot beside it; further out so; each inside the
  // view before any outside it. Null when every spot runs into a label. (One look at each.)
  free(placed, [near, far], view) {
    let best = null, tier = Infinity;
    for (const [ring, spots] of [[0, near], [1, far]]) {
      if (tier <= 2 * ring) break;                      // (nothing further out can do better)
      for (const b of spots) {
        const worst = placed.worst(b, LABEL);
        if (worst >= LABEL) continue;
        let t = worst >= DOT ? 4 + ring : 2 * ring + (this.places.hits(b) ? 1 : 0);
        if (b.x < view.x || b.y < view.y || b.x + b.w > view.x + view.w || b.y + b.h > view.y + view.h) t += 6;
        if (t < tier) { best = b; tier = t; }
        if (tier === 2 * ring) break;
      }
    }
    return best;
  }
  // Draw the part of the town in `view` ({x, y, w, h}, pixels of the whole map) on ctx, whose
  // canvas is the view's size: the agents at `positions` ({id: [column, row]}), what is said;
  // with `ground` false, on a clear canvas laid over the map (`background`) shown beneath.
  // Labels never overlap: a crowd's initials go round their dots, people on one tile get a
  // count, and a label with no room left is not drawn (`drawn` lists those that were).
  draw(ctx, view, positions, said, selected, ground = true) {
    const T = this.T;
    const x0 = view.x - 4 * T, y0 = view.y - 2 * T, x1 = view.x + view.w + T, y1 = view.y + view.h + T;
    if (ground) {
      ctx.fillStyle = "#5c5650"; ctx.fillRect(0, 0, view.w, view.h);
      ctx.drawImage(this.background, view.x, view.y, view.w, view.h, 0, 0, view.w, view.h);
    } else ctx.clearRect(0, 0, view.w, view.h);
    ctx.save();
    ctx.translate(-view.x, -view.y);
    const seen = [];
    for (const a of this.agents) {
      const [c, r] = positions[a.id], x = c * T, y = r * T;
      if (x >= x0 && x <= x1 && y >= y0 && y <= y1) seen.push(a);
    }
    this.drawn = {labels: [], bubbles: []};
    if (seen.length > CROWD) this.squares(ctx, seen, positions);
    else this.people(ctx, view, seen, positions, said, selected);
    ctx.restore();
  }
  // A crowd: one square each, a colour at a time.
  squares(ctx, seen, positions) {
    const T = this.T;
    if (!this.colors) {
      this.colors = new Map();
      for (const a of this.agents) this.colors.set(colorOf(a.id), [...(this.colors.get(colorOf(a.id)) || []), a]);
    }
    const shown = new Set(seen);
    for (const [color, members] of this.colors) {
      ctx.fillStyle = color;
      for (const a of members) if (shown.has(a)) { const [c, r] = positions[a.id]; ctx.fillRect(c * T, r * T, T, T); }
    }
  }
  // The people in view: where every label goes is worked out first (the selected agent's tile
  // first), then dots, counts and labels are drawn.
  people(ctx, view, seen, positions, said, selected) {
    const T = this.T, {canvas: atlas, cells, D, height} = this.sprites(), placed = new Boxes(4 * T);
    const off = (D - T) / 2, lift = Math.floor((T - height) / 2), tiles = new Map();
    for (const a of seen) {
      const [c, r] = positions[a.id], key = c * 100003 + r;
      if (tiles.has(key)) tiles.get(key).push(a); else tiles.set(key, [a]);
    }
    const first = m => m.filter(a => a.id === selected).concat(m.filter(a => a.id !== selected));
    const all = [...tiles.values()].map(first);
    const groups = all.filter(m => m[0].id === selected).concat(all.filter(m => m[0].id !== selected));
    for (const m of groups) {
      const [c, r] = positions[m[0].id];
      placed.add({x: c * T - 0.1 * T, y: r * T - 0.1 * T, w: 1.2 * T, h: 1.2 * T}, DOT);
      if (m.length > 1) placed.add({x: c * T + 0.5 * T, y: r * T + 0.5 * T, w: T, h: T}, DOT);
    }
    const labels = groups.map(m => {                     // the people on a tile: one label, side by side
      const [c, r] = positions[m[0].id], spots = Town.spots(c * T, r * T, T, m.reduce((n, a) => n + cells[a.id][2], 0), height, D);
      const box = this.free(placed, spots, view);
      if (box) placed.add(box, LABEL);
      return box && {box, whole: m.length === 1 && box === spots[0][0]};
    });
    groups.forEach((m, i) => {
      const [c, r] = positions[m[0].id], [sx, sy, w] = cells[m[0].id], whole = labels[i] && labels[i].whole;
      ctx.drawImage(atlas, sx, sy, whole ? D + w : D, height, c * T - off, r * T + lift, whole ? D + w : D, height);
    });
    this.counts(ctx, groups, positions);
    if (selected && positions[selected]) {
      const [c, r] = positions[selected];
      ctx.beginPath();
      ctx.arc(c * T + T / 2, r * T + T / 2, T * 0.9, 0, 2 * Math.PI);
      ctx.fillStyle = colorOf(selected);
      ctx.fill();
      ctx.lineWidth = 2; ctx.strokeStyle = "#000"; ctx.stroke();
    }
    groups.forEach((m, i) => {
      if (!labels[i]) return;
      let x = Math.round(labels[i].box.x);
      const y = Math.round(labels[i].box.y);
      for (const a of m) {
        const [sx, sy, w] = cells[a.id];
        if (!labels[i].whole || a.id === selected) ctx.drawImage(atlas, sx + D, sy, w, height, x, y, w, height);
        this.drawn.labels.push([a.id, a.label, x, y, w, height]);
        x += w;
      }
    });
    this.bubbles(ctx, view, placed, positions, said);
  }
  // How many stand on a tile, where more than one do.
  counts(ctx, groups, positions) {
    const T = this.T;
    ctx.font = `bold ${Math.max(8, T - 1)}px system-ui`; ctx.textAlign = "center"; ctx.textBaseline = "middle";
    for (const m of groups) if (m.length > 1) {
      const [c, r] = positions[m[0].id];
      ctx.beginPath(); ctx.arc(c * T + T, r * T + T, 0.5 * T + 1, 0, 2 * Math.PI);
      ctx.fillStyle = "#222"; ctx.fill(); ctx.fillStyle = "#fff";
      ctx.fillText(String(m.length), c * T + T, r * T + T + 0.5);
    }
    ctx.textAlign = "start"; ctx.textBaseline = "alphabetic";
  }
  // What each speaker said last in the tick, in a bubble above it (or below, stacked further
  // out, to its left) clear of the labels and other bubbles, inside the view if it can be.
  bubbles(ctx, view, placed, positions, said) {
    const T = this.T, last = new Map();
    for (const [ts, a, , text] of said) if (positions[a]) last.set(a, [text, ts]);
    ctx.font = `${Math.max(10, T + 2)}px system-ui`;
    const h = T + 8;
    for (const [a, [text, ts]] of last) {
      const [c, r] = positions[a];
      const said = `${this.byId.get(a).label}: ${text}`;     // (whose, wherever the bubble had room)
      const line = said.length > 64 ? said.slice(0, 61) + "..." : said;
      const w = ctx.measureText(line).width + 8;
      const tries = [];
      for (let k = 0; k < 6; k++)
        for (const y of [r * T - 2 * T - 6 - k * (h + 2), r * T + 2 * T + k * (h + 2)])
          tries.push({x: c * T + T, y, w, h}, {x: c * T - w, y, w, h});
      const box = tries.find(b => b.x >= view.x && b.x + w <= view.x + view.w && b.y >= view.y && !placed.hits(b, LABEL))
        || tries.find(b => !placed.hits(b, LABEL));
      if (!box) continue;
      placed.add(box, LABEL);
      ctx.fillStyle = "rgba(255,255,255,0.92)";
      ctx.fillRect(box.x, box.y, w, h);
      ctx.fillStyle = "#000";
      ctx.fillText(line, box.x + 4, box.y + T + 4);
      this.drawn.bubbles.push([a, box.x, box.y, w, h, ts]);
    }
  }
  // The speech bubble drawn last under the map pixel (x, y): whose line and its time, or null.
  bubbleAt(x, y) {
    const hit = this.drawn.bubbles.find(([, bx, by, w, h]) => x >= bx && x <= bx + w && y >= by && y <= by + h);
    return hit ? {agent: hit[0], t: hit[5]} : null;
  }
  // The agent nearest the map pixel (x, y), within three tiles.
  nearest(positions, x, y) {
    let best = null, dist = 3;
    for (const [id, [c, r]] of Object.entries(positions)) {
      const d = Math.hypot(c + 0.5 - x / this.T, r + 0.5 - y / this.T);
      if (d < dist) { best = id; dist = d; }
    }
    return best;
  }
  // What is under the map pixel (x, y): the place, and who stands on that tile (or nearest,
  // within a tile and a half), by name and label.
  describe(positions, x, y) {
    const c = Math.floor(x / this.T), r = Math.floor(y / this.T), area = this.area(c, r);
    let here = this.agents.filter(a => positions[a.id] && positions[a.id][0] === c && positions[a.id][1] === r);
    if (!here.length) {
      const near = this.nearest(positions, x, y);
      const [nc, nr] = near ? positions[near] : [Infinity, Infinity];
      if (Math.hypot(nc - c, nr - r) <= 1.5) here = [this.byId.get(near)];
    }
    const people = here.map(a => `${a.name} (${a.label})`).join(", ");
    return [area === "wall" ? "" : area, people].filter(Boolean).join(": ");
  }
}

// A line by the pointer over `target` naming what is there (`describe(event)`): what a label
// leaves out, a place too small for its name or a crowd's initials, is a hover away.
function hoverLine(target, describe) {
  const tip = document.createElement("div");
  tip.id = "tip";
  Object.assign(tip.style, {position: "fixed", pointerEvents: "none", display: "none", zIndex: "10", whiteSpace: "nowrap",
                            background: "rgba(255,255,255,0.95)", border: "1px solid #999", padding: "2px 6px"});
  document.body.appendChild(tip);
  target.addEventListener("mousemove", ev => {
    const text = describe(ev);
    tip.textContent = text;
    tip.style.display = text ? "block" : "none";
    tip.style.left = `${ev.clientX + 12}px`; tip.style.top = `${ev.clientY + 16}px`;
  });
  target.addEventListener("mouseleave", () => { tip.style.display = "none"; });
}

// The controls' play button (controls.html): moves the slider on at the speed chosen, to `end()`.
function player(end) {
  const button = document.getElementById("play"), speed = document.getElementById("speed");
  const slider = document.getElementById("slider");
  let timer = null;
  button.addEventListener("click", () => {
    if (timer) { clearInterval(timer); timer = null; button.innerHTML = "&#9654;"; return; }
    button.innerHTML = "&#10074;&#10074;";
    timer = setInterval(() => {
      slider.value = Math.min(end(), Number(slider.value) + Number(speed.value) / 10);
      slider.dispatchEvent(new Event("input"));
      if (Number(slider.value) >= end()) button.click();
    }, 100);
  });
}
